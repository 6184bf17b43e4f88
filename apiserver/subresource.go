package apiserver

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// serveSubresource serves /status, /scale and custom subresources.
func (s *Server) serveSubresource(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	res := st.Resource()
	switch {
	case info.Subresource == "status" && res.Subresources.Status:
		switch r.Method {
		case http.MethodGet:
			s.handleGet(w, r, st, info)
		case http.MethodPut:
			s.handleUpdate(w, r, st, info)
		case http.MethodPatch:
			s.handlePatch(w, r, st, info)
		default:
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		}
	case info.Subresource == "scale" && res.Subresources.Scale != nil:
		s.serveScale(w, r, st, info)
	case info.Subresource == "finalize" && res.ServesFinalize():
		if r.Method != http.MethodPut {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleUpdate(w, r, st, info)
	default:
		if sr, ok := res.Subresources.Custom[info.Subresource]; ok {
			s.serveCustomSubresource(w, r, st, info, sr)
			return
		}
		s.writeError(w, r, meta.NewNotFoundPath())
	}
}

// serveScale serves GET, PUT and PATCH on /scale (an autoscaling/v1 Scale).
func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	writeScale := func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error) {
		opts.Subresource = "scale"
		scale, err := st.UpdateScale(ctx, info.Namespace, info.Name, obj, opts)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(scale)
		return &registry.Result{JSON: b, Object: scale}, err
	}
	switch r.Method {
	case http.MethodGet:
		scale, err := st.GetScale(r.Context(), info.Namespace, info.Name)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, http.StatusOK, scale)
	case http.MethodPut:
		opts, obj, _, err := s.readObjectWrite(r, st, info, "UpdateOptions")
		if err == nil {
			err = checkURLName(obj, info.Name)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		res, err := writeScale(r.Context(), obj, opts)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeRaw(w, r, http.StatusOK, res.JSON)
	case http.MethodPatch:
		// Scale is a built-in kind: JSON, merge and strategic merge patches.
		s.patch(w, r, patchTarget{
			gvk:       registry.ScaleGroupVersionKind,
			name:      info.Name,
			strategic: true,
			get:       func(ctx context.Context) (registry.Object, error) { return st.GetScale(ctx, info.Namespace, info.Name) },
			write:     writeScale,
		})
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
	}
}
