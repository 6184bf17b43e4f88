package apiserver

import (
	"net/http"
	"strconv"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// handleList serves the list verb: streamed where the representation allows
// (streamList), otherwise read whole and written in one piece.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	p := payload{kind: bodyList, res: st.Resource()}
	c, err := p.choose(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq, err := s.listOptions(queryOf(r), st)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if lq.sendInitialEvents != nil {
		// kube-apiserver refuses it on anything but a watch.
		s.writeError(w, r, meta.NewInvalidOptions("ListOptions", meta.ErrorList{
			meta.Forbidden(meta.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"),
		}))
		return
	}
	opts := lq.opts
	if s.streamList(w, r, st, info.Namespace, c, opts) {
		return
	}
	opts.KeepItems = true
	var list registry.ListResult
	if err := st.List(r.Context(), info.Namespace, opts, &list); err != nil {
		s.writeError(w, r, err)
		return
	}
	p.items = list.Items
	if p.items == nil {
		p.items = [][]byte{}
	}
	p.listMeta = meta.ListMeta{ResourceVersion: strconv.FormatInt(list.ResourceVersion, 10), Continue: list.Continue, RemainingItemCount: list.RemainingItemCount}
	s.writeEncoded(w, r, http.StatusOK, c, p, false)
}
