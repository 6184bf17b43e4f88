package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestResourcePathsSkipRouterAlike: ServeHTTP sends resource paths to
// serveResource without the router; every answer must be the one the
// router gives for the same request, malformed and unknown paths included.
func TestResourcePathsSkipRouterAlike(t *testing.T) {
	api, _ := newTestServer(t)
	serve := func(h http.Handler, method, target, body string) *httptest.ResponseRecorder {
		var req *http.Request
		if body != "" {
			req = httptest.NewRequest(method, target, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		} else {
			req = httptest.NewRequest(method, target, nil)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := serve(api, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"x"},"data":{"a":"b"}}`); rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	paths := []string{
		"/api/v1/namespaces",
		"/api/v1/namespaces/default",
		"/api/v1/namespaces/default/status",
		"/api/v1/namespaces/default/configmaps",
		"/api/v1/namespaces/default/configmaps/",
		"/api/v1/namespaces/default/configmaps/x",
		"/api/v1/namespaces/default/configmaps/x/status",
		"/api/v1/namespaces/default/configmaps/x/y/z",
		"/api/v1/namespaces/default/configmaps/a%2Fb",
		"/api/v1/namespaces/default/configmaps/..",
		"/api/v1/namespaces/default/configmaps/%25zz",
		"/api/v1/configmaps",
		"/api/v1/nothings",
		"/api/v2/configmaps",
		"/api/v1/namespaces//configmaps",
		"/api/v1//configmaps",
		"/api//namespaces",
		"/api/v1/",
		"/api/v1",
		"/apis/example.com/v1/widgets",
		"/apis/example.com/v1/namespaces/default/widgets/w",
		"/apis/example.com/v1/",
		"/apis/example.com/v1",
		"/apis//v1/widgets",
		"/apis/example.com//widgets",
		"/apis/unknown.io/v1/things",
		"//api/v1/configmaps",
	}
	// Deletes change what later requests see: only of names that do not
	// exist.
	for _, p := range []string{"/api/v1/namespaces/default/configmaps/zz", "/apis/example.com/v1/namespaces/default/widgets/zz", "/api/v1/namespaces/default/configmaps/x/y/z"} {
		fast, routed := serve(api, "DELETE", p, ""), serve(api.router, "DELETE", p, "")
		if fast.Code != routed.Code || fast.Body.String() != routed.Body.String() {
			t.Errorf("DELETE %s: ServeHTTP %d %s; router %d %s", p, fast.Code, fast.Body, routed.Code, routed.Body)
		}
	}
	for _, p := range paths {
		for _, m := range []struct{ method, body string }{
			{"GET", ""},
			{"POST", `{"metadata":{"name":"y"}`}, // malformed: nothing is created
			{"PUT", `{"metadata":`},              // malformed: nothing is written
			{"OPTIONS", ""},
		} {
			fast := serve(api, m.method, p, m.body)
			routed := serve(api.router, m.method, p, m.body)
			if fast.Code != routed.Code || fast.Body.String() != routed.Body.String() {
				t.Errorf("%s %s: ServeHTTP %d %s; router %d %s", m.method, p, fast.Code, fast.Body, routed.Code, routed.Body)
			}
			if f, r := fast.Header().Get("Content-Type"), routed.Header().Get("Content-Type"); f != r {
				t.Errorf("%s %s: Content-Type %q, router %q", m.method, p, f, r)
			}
		}
	}
}

// TestSpanRouteWithoutRouter: a resource request served without the router
// is named by the router's pattern, after the pattern of a chi router kapi
// is mounted in; never by its client-chosen path.
func TestSpanRouteWithoutRouter(t *testing.T) {
	api := newConfigMapServer(t, Config{})
	for _, tc := range []struct {
		target, mountPattern, routePath, want string
	}{
		{"/apis/made.up/v1/things", "", "", "/apis/{group}/{version}/*"},
		{"/api/v9/pods", "", "", "/api/{version}/*"},
		{"/kube/apis/made.up/v1/things", "/kube/*", "/apis/made.up/v1/things", "/kube/apis/{group}/{version}/*"},
	} {
		r := httptest.NewRequest("GET", tc.target, nil)
		if tc.mountPattern != "" {
			rc := chi.NewRouteContext()
			rc.RoutePatterns, rc.RoutePath = []string{tc.mountPattern}, tc.routePath
			r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))
		}
		var got string
		api.begin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = api.spanRoute(r, &requestInfo{})
		})).ServeHTTP(httptest.NewRecorder(), r)
		if got != tc.want {
			t.Errorf("%s: route %q, want %q", tc.target, got, tc.want)
		}
	}
}
