package apiserver

import (
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// handleGet serves the get verb: one object, at the resourceVersion the
// query asks for, in the negotiated representation.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	p := payload{kind: bodyObject, res: st.Resource()}
	c, err := p.choose(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := st.Get(r.Context(), info.Namespace, info.Name, queryOf(r).Get("resourceVersion"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.json = body
	s.writeEncoded(w, r, http.StatusOK, c, p, false)
}
