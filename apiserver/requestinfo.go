package apiserver

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/auth"
)

// requestInfo is what a resource URL and method name.
type requestInfo struct {
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	// Verb is the Kubernetes verb: get, list, watch, create, update, patch,
	// delete, deletecollection.
	Verb string

	user       *auth.User // for the audit record
	registered bool       // the resource is served (set by serveResource), for the metrics
	// selected is the name a list or watch pins with its fieldSelector
	// (selectedName): authorized as a request for that name.
	selected string
}

// attributes returns the authorization attributes of a resource request.
func (info requestInfo) attributes() auth.Attributes {
	return auth.Attributes{Verb: info.Verb, ResourceRequest: true, APIGroup: info.Group, APIVersion: info.Version,
		Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: cmp.Or(info.Name, info.selected)}
}

// parseResourcePath splits the part of a URL after /api/VERSION/ or
// /apis/GROUP/VERSION/ into namespace, resource, name and subresource, with
// kube-apiserver's rule for the namespaces resource itself. It reports false
// for paths that name nothing.
func parseResourcePath(rest string) (ns, resource, name, sub string, ok bool) {
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "", "", "", "", false
	}
	// At most five segments name something (namespaces/NS/RESOURCE/NAME/SUB).
	var buf [5]string
	parts := buf[:0]
	for seg := range strings.SplitSeq(rest, "/") {
		if len(parts) == len(buf) {
			return "", "", "", "", false
		}
		parts = append(parts, seg)
	}
	for i, p := range parts {
		// Segments may arrive still escaped (chi routes on the raw path when
		// there is one). A segment that is empty, "." or "..", or that
		// unescapes to something with a slash or a NUL, names nothing: it
		// could not be a valid name and must never shape a storage key.
		u, err := url.PathUnescape(p)
		if err != nil || u == "" || u == "." || u == ".." || strings.ContainsAny(u, "/\x00") {
			return "", "", "", "", false
		}
		parts[i] = u
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		ns = parts[1]
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		} else {
			// /namespaces/NAME[/status]: the namespace object itself.
			ns = ""
		}
	}
	switch len(parts) {
	case 3:
		sub = parts[2]
		fallthrough
	case 2:
		name = parts[1]
		fallthrough
	case 1:
		resource = parts[0]
	default:
		return "", "", "", "", false
	}
	return ns, resource, name, sub, true
}

// splitResourcePath splits a URL path below a group version
// (/api/VERSION/REST or /apis/GROUP/VERSION/REST) as the router's resource
// routes do, on the path the router sees (rawRoutePath). ok is false for
// any other path, and for an empty group, version or rest.
func splitResourcePath(p string) (group, version, rest string, ok bool) {
	switch {
	case strings.HasPrefix(p, "/api/"):
		version, rest, ok = strings.Cut(p[len("/api/"):], "/")
	case strings.HasPrefix(p, "/apis/"):
		var gv string
		if group, gv, ok = strings.Cut(p[len("/apis/"):], "/"); ok && group != "" {
			version, rest, ok = strings.Cut(gv, "/")
		}
	}
	return group, version, rest, ok && version != "" && rest != ""
}

// resolveRequest builds the request info of a resource request. qerr is
// what is wrong with its query: a query string that does not parse, or a
// watch parameter that is not a boolean (the verb is then read from what
// did parse, for authorization, and the request is answered qerr).
func resolveRequest(r *http.Request) (info requestInfo, ok bool, qerr error) {
	st := stateOf(r)
	group, version, rest, ok := splitResourcePath(st.raw)
	if !ok {
		return requestInfo{}, false, nil
	}
	info = requestInfo{Group: group, Version: version}
	info.Namespace, info.Resource, info.Name, info.Subresource, ok = parseResourcePath(rest)
	if !ok {
		return info, false, nil
	}
	q, err := st.queryValues(r)
	if err != nil {
		qerr = badQuery(err)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		watch, _, err := queryBool(q, "watch")
		if err != nil && qerr == nil && info.Subresource == "" {
			qerr = err
		}
		switch {
		case info.Subresource == "" && watch:
			// A collection or one object (kapi watches the object, with
			// metadata.name as the field selector). A subresource has no
			// watch: as in kube-apiserver, a GET of a named path is a get
			// whatever ?watch says, and is authorized as one.
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		default:
			info.Verb = "get"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		if info.Name == "" {
			info.Verb = "deletecollection"
		} else {
			info.Verb = "delete"
		}
	default:
		info.Verb = strings.ToLower(r.Method)
	}
	return info, true, qerr
}
