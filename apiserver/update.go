package apiserver

import (
	"fmt"
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// handleUpdate serves the update verb (PUT to an object, its status or its
// finalize subresource): 200, or 201 when the update created the object.
func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, obj, dups, err := s.readObjectWrite(r, st, info, "UpdateOptions")
	if err == nil {
		err = checkURLName(obj, info.Name)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.UnknownFields = dups
	opts.Subresource = info.Subresource
	opts.UID = meta.GetUID(obj) // a PUT's uid is a precondition
	res, err := st.Update(r.Context(), info.Namespace, info.Name, obj, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, warning := range res.Warnings {
		addWarning(w, warning)
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	s.writeRaw(w, r, code, res.JSON)
}

// checkURLName refuses a PUT body whose metadata.name is not the URL's,
// absent included, as kube-apiserver's update handler does.
func checkURLName(obj registry.Object, name string) error {
	md, _ := obj["metadata"].(map[string]any)
	if bodyName, _ := md["name"].(string); bodyName != name {
		return meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", bodyName, name))
	}
	return nil
}
