package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
)

// publicPaths may be read without credentials, as kube-apiserver's
// system:public-info-viewer allows: probes and the version.
func isPublicPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version":
		return true
	}
	return strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/")
}

// publicRule is isPublicPath as an RBAC rule, for SelfSubjectRulesReview;
// TestPublicRuleIsPublicPath keeps the two the same.
func publicRule() auth.Rule {
	return auth.Rule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*", "/version"}}
}

// routePaths returns the request path relative to where the handler is
// mounted (chi's Mount passes the rest of the path in its route context),
// and the same path as chi routes on it (rawRoutePath), with one look for
// the route context (a walk up net/http's contexts).
func routePaths(r *http.Request) (path, raw string) {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePath != "" {
		return rc.RoutePath, rc.RoutePath
	}
	if r.URL.RawPath != "" {
		return r.URL.Path, r.URL.RawPath
	}
	return r.URL.Path, r.URL.Path
}

// isResourcePath reports whether p names API resources (/api/V/... or
// /apis/G/V/...) rather than discovery documents.
func isResourcePath(p string) bool {
	p = strings.Trim(p, "/")
	segments := strings.Count(p, "/") + 1
	first, _, _ := strings.Cut(p, "/")
	switch {
	case segments >= 3 && first == "api":
		return true
	case segments >= 4 && first == "apis":
		return true
	}
	return false
}

// authenticate identifies the user of every request (401 when that fails)
// and puts it in the request context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := stateOf(r)
		if isPublicPath(st.path) {
			next.ServeHTTP(w, r)
			return
		}
		var user *auth.User
		if s.cfg.Authenticator != nil {
			u, ok, err := s.cfg.Authenticator.Authenticate(r)
			if err != nil {
				s.log.Debug("authentication failed", "path", r.URL.Path, "err", err)
				s.writeError(w, r, unauthorized())
				return
			}
			if ok {
				user = u
				if !user.InGroup(auth.GroupAuthenticated) {
					// A copy: the authenticator may share u (and the array
					// behind its groups) between requests.
					withGroup := *u
					withGroup.Groups = append(slices.Clip(u.Groups), auth.GroupAuthenticated)
					user = &withGroup
				}
			}
		}
		if user == nil {
			if !s.cfg.AllowAnonymous {
				s.writeError(w, r, unauthorized())
				return
			}
			user = &auth.User{Name: auth.AnonymousUser, Groups: []string{auth.GroupUnauthenticated}}
		}
		st.user = user
		next.ServeHTTP(w, r)
	})
}

func unauthorized() *meta.StatusError {
	se := meta.NewBadRequest("Unauthorized")
	se.Status.Reason = meta.StatusReasonUnauthorized
	se.Status.Code = http.StatusUnauthorized
	return se
}

// authorize asks the authorizer about a request; the error is a 403 Status
// (or 500 when the authorizer failed).
func (s *Server) authorize(ctx context.Context, a auth.Attributes) error {
	a.User, _ = auth.UserFrom(ctx)
	d, reason, err := s.authorizer.Authorize(ctx, a)
	if err != nil {
		return meta.NewInternalError(err)
	}
	if d == auth.Allow {
		return nil
	}
	msg := auth.DenialMessage(a, reason)
	if !a.ResourceRequest {
		se := meta.NewForbidden(meta.GroupResource{}, "", "")
		se.Status.Message = msg
		se.Status.Details = nil
		return se
	}
	gr := meta.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	if a.Subresource != "" {
		gr.Resource += "/" + a.Subresource
	}
	return meta.NewForbidden(gr, a.Name, msg)
}

// authorizeNonResource guards discovery, OpenAPI and other non-resource
// paths.
func (s *Server) authorizeNonResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := stateOf(r).path
		if isPublicPath(p) || isResourcePath(p) {
			// Resource requests are authorized once their request info is
			// known, in serveResource.
			next.ServeHTTP(w, r)
			return
		}
		if err := s.authorize(r.Context(), auth.Attributes{Verb: strings.ToLower(r.Method), Path: p}); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLongRunning reports whether r is a watch or a follow stream, which are
// exempt from the in-flight limits and the request timeout. It decides on
// the resolved request, as the handler will: a watch is a GET with ?watch
// of a collection or an object (never of a subresource), and a follow
// stream is a GET with ?follow=true of a custom subresource that declares a
// Stream. Anything else, e.g. GET /api/v1/configmaps?follow=true, is an
// ordinary request.
func (s *Server) isLongRunning(r *http.Request, rs *requestState) bool {
	if r.Method != http.MethodGet {
		return false
	}
	q, _ := rs.queryValues(r)
	watch, follow := queryTrue(q, "watch"), q.Get("follow") == "true"
	if !watch && !follow {
		return false
	}
	gvr, sub, ok := resourceOfPath(rs.raw)
	if !ok {
		return false
	}
	st, ok := s.reg.Store(gvr)
	if !ok {
		return false
	}
	res := st.Resource()
	if sub == "" {
		return watch && res.Virtual == nil
	}
	sr, ok := res.Subresources.Custom[sub]
	return ok && follow && sr.Stream != nil
}

// rawRoutePath is the path chi routes on: the route context's, else the
// escaped path when there is one.
func rawRoutePath(r *http.Request) string {
	_, raw := routePaths(r)
	return raw
}

// resourceOfPath splits a resource URL path (/api/V/... or /apis/G/V/...)
// as the router and resolveRequest do.
func resourceOfPath(p string) (gvr meta.GroupVersionResource, sub string, ok bool) {
	var rest string
	if gvr.Group, gvr.Version, rest, ok = splitResourcePath(p); !ok {
		return meta.GroupVersionResource{}, "", false
	}
	_, gvr.Resource, _, sub, ok = parseResourcePath(rest)
	return gvr, sub, ok
}

func newTooManyRequests() *meta.StatusError {
	se := meta.NewServiceUnavailable("Too many requests, please try again later.")
	se.Status.Reason = meta.StatusReasonTooManyRequests
	se.Status.Code = http.StatusTooManyRequests
	se.Status.Details = &meta.StatusDetails{RetryAfterSeconds: 1}
	se.RetryAfter = 1
	return se
}

// AuditRecord is one request, as an audit sink receives it.
type AuditRecord struct {
	Time        time.Time     `json:"time"`
	User        string        `json:"user"`
	Groups      []string      `json:"groups,omitempty"`
	Verb        string        `json:"verb"`
	Method      string        `json:"method"`
	Path        string        `json:"path"`
	APIGroup    string        `json:"apiGroup,omitempty"`
	Resource    string        `json:"resource,omitempty"`
	Subresource string        `json:"subresource,omitempty"`
	Namespace   string        `json:"namespace,omitempty"`
	Name        string        `json:"name,omitempty"`
	Code        int           `json:"code"`
	Latency     time.Duration `json:"latency"`
}

// AuditSink receives one record per request, after the response. It must be
// safe for concurrent use and should not block.
type AuditSink interface {
	Record(ctx context.Context, rec AuditRecord)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (sr *statusRecorder) WriteHeader(code int) {
	if sr.code == 0 {
		sr.code = code
	}
	sr.ResponseWriter.WriteHeader(code)
}

func (sr *statusRecorder) Write(b []byte) (int, error) {
	if sr.code == 0 {
		sr.code = http.StatusOK
	}
	return sr.ResponseWriter.Write(b)
}

func (sr *statusRecorder) Flush() {
	if f, ok := sr.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (sr *statusRecorder) Unwrap() http.ResponseWriter { return sr.ResponseWriter }

type auditInfoKey struct{}

// audit records every request to the configured sink.
func (s *Server) audit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := stateOf(r)
		rec, info := st.recorder(w), &st.info
		next.ServeHTTP(rec, r)
		ar := AuditRecord{Time: start.UTC(), Method: r.Method, Path: r.URL.Path, Code: rec.code, Latency: time.Since(start),
			Verb: info.Verb, APIGroup: info.Group, Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name}
		if ar.Verb == "" {
			ar.Verb = strings.ToLower(r.Method)
		}
		if u, ok := userOf(r, info); ok {
			ar.User, ar.Groups = u.Name, u.Groups
		}
		s.cfg.Audit.Record(r.Context(), ar)
	})
}

// userOf finds the user the request was authenticated as (the audit
// middleware runs outside authentication, so the handler leaves it in info).
func userOf(r *http.Request, info *requestInfo) (*auth.User, bool) {
	if info.user != nil {
		return info.user, true
	}
	return auth.UserFrom(r.Context())
}

// noteRequest lets the audit middleware know what a request was.
func noteRequest(ctx context.Context, info requestInfo) {
	if p, ok := ctx.Value(auditInfoKey{}).(*requestInfo); ok {
		*p = info
		p.user, _ = auth.UserFrom(ctx)
	}
}
