package apiserver

import (
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// handleCreate serves the create verb (POST to a collection): 201 with the
// stored object.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, obj, dups, err := s.readObjectWrite(r, st, info, "CreateOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.UnknownFields = dups
	res, err := st.Create(r.Context(), info.Namespace, obj, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, warning := range res.Warnings {
		addWarning(w, warning)
	}
	s.writeRaw(w, r, http.StatusCreated, res.JSON)
}
