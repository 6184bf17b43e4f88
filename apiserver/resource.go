package apiserver

import (
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// serveResource serves every URL below a group version: collections, objects
// and subresources. It finds and authorizes the resource (resolveResource),
// then hands the request to the handler of its verb.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	st, info, ok := s.resolveResource(w, r)
	if !ok {
		return
	}
	if st.Resource().Virtual != nil {
		s.serveVirtual(w, r, st, info)
		return
	}
	if info.Subresource != "" {
		s.serveSubresource(w, r, st, info)
		return
	}
	if r.Method == http.MethodHead {
		// As kube-apiserver: a HEAD would do a get's, a list's or a
		// watch's work and send none of it.
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	switch info.Verb {
	case "get":
		s.handleGet(w, r, st, info)
	case "list":
		s.handleList(w, r, st, info)
	case "watch":
		s.handleWatch(w, r, st, info)
	case "create":
		if info.Name != "" || allNamespaces(st, info) {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleCreate(w, r, st, info)
	case "update":
		if info.Name == "" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleUpdate(w, r, st, info)
	case "patch":
		if info.Name == "" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handlePatch(w, r, st, info)
	case "delete":
		s.handleDelete(w, r, st, info)
	case "deletecollection":
		if st.Resource().Resource == "namespaces" || allNamespaces(st, info) {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleDeleteCollection(w, r, st, info)
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
	}
}

// allNamespaces reports a collection of a namespaced type across every
// namespace: it can be read and watched, but as in Kubernetes nothing is
// created in it and it is not deleted as a whole (a client that forgot its
// namespace must not delete every namespace's objects).
func allNamespaces(st *registry.Store, info requestInfo) bool {
	return st.Resource().Namespaced && info.Namespace == ""
}

// resolveResource reads what a resource request is about, notes it for the
// audit log and the metrics, authorizes it, and checks that the resource is
// served, that the namespace fits its scope and that the query parses. It
// answers the request and reports false when any of that fails.
func (s *Server) resolveResource(w http.ResponseWriter, r *http.Request) (*registry.Store, requestInfo, bool) {
	info, ok, qerr := resolveRequest(r)
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return nil, info, false
	}
	q := queryOf(r)
	info.selected = selectedName(q, info)
	st, registered := s.reg.Store(meta.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource})
	info.registered = registered
	noteRequest(r.Context(), info)
	if info.Verb == "watch" {
		noteLongRunning(r.Context(), info)
	}
	// Authorization comes before anything about the resource is revealed
	// (whether it exists too), and is the same for dry-run requests.
	if err := s.authorize(r.Context(), info.attributes()); err != nil {
		s.writeError(w, r, err)
		return nil, info, false
	}
	if !registered {
		s.writeError(w, r, meta.NewNotFoundPath())
		return nil, info, false
	}
	if res := st.Resource(); res.Deprecated {
		addWarning(w, res.DeprecationWarning)
	}
	// A namespaced type needs a namespace for named objects; a cluster-scoped
	// one has none.
	if res := st.Resource(); (res.Namespaced && info.Name != "" && info.Namespace == "") || (!res.Namespaced && info.Namespace != "") {
		s.writeError(w, r, meta.NewNotFoundPath())
		return nil, info, false
	}
	// A query that does not parse is refused, never read in part.
	if qerr == nil {
		qerr = checkPretty(q)
	}
	if qerr != nil {
		s.writeError(w, r, qerr)
		return nil, info, false
	}
	return st, info, true
}
