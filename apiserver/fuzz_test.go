package apiserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// FuzzParseResourcePath checks that whatever the path, the parts it yields
// can never carry a slash, a NUL or a relative segment into a storage key.
func FuzzParseResourcePath(f *testing.F) {
	for _, s := range []string{"namespaces/default/configmaps/x", "namespaces/x", "namespaces/x/status", "widgets/a%2Fb", "namespaces/%2e%2e/configmaps", "a/b/c/d", "x%00y", "namespaces/a/b/c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		ns, res, name, sub, ok := parseResourcePath(rest)
		if !ok {
			return
		}
		for _, p := range []string{ns, res, name, sub} {
			if strings.ContainsAny(p, "/\x00") || p == "." || p == ".." {
				t.Fatalf("parseResourcePath(%q) yielded unsafe part %q", rest, p)
			}
		}
		if res == "" {
			t.Fatalf("parseResourcePath(%q) yielded no resource", rest)
		}
	})
}

// FuzzListQuery throws arbitrary query strings at a list, watch and get:
// the server must answer with a Status or a list, never panic, and never
// return objects of another namespace.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"limit=1", "limit=-1&continue=abc", "labelSelector=a%20in%20(b", "fieldSelector=metadata.name%3Dx",
		"resourceVersion=999999999999&resourceVersionMatch=Exact", "resourceVersion=1&limit=1", "watch=1&timeoutSeconds=0&resourceVersion=1",
		"continue=eyJ2IjoxLCJydiI6MSwic3RhcnQiOiIuLi8uLi9vdGhlciJ9.00000000", "resourceVersion=abc", "limit=99999999999999999999"} {
		f.Add(s)
	}
	api, ts := newTestServer(f)
	_ = api
	do(f, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"secret"}}`)
	do(f, ts, "POST", "/api/v1/namespaces/secret/configmaps", `{"metadata":{"name":"hidden"}}`)
	do(f, ts, "POST", cmPath, `{"metadata":{"name":"mine"}}`)
	h := ts.Config.Handler
	f.Fuzz(func(t *testing.T, query string) {
		if strings.Contains(query, "watch") {
			return // watches stream; their parameters are covered by the list path
		}
		if _, err := url.ParseQuery(query); err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodGet, cmPath, nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("query %q: %d %s", query, rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), `"hidden"`) {
			t.Fatalf("query %q read another namespace: %s", query, rec.Body.String())
		}
	})
}

func TestHostileNamesAndBodies(t *testing.T) {
	_, ts := newTestServer(t)
	for _, p := range []string{
		cmPath + "/a%2Fb", cmPath + "/%2e%2e", "/api/v1/namespaces/%2e%2e/configmaps", "/api/v1/namespaces/default%2Fx/configmaps",
		cmPath + "/x%00y", "/api/v1/namespaces/default/configmaps/a/b/c",
	} {
		r := do(t, ts, "GET", p, "")
		if r.code != 404 && r.code != 400 {
			t.Errorf("GET %s: %d %s", p, r.code, r.body)
		}
	}
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n" +
		"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n" +
		"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
	do(t, ts, "POST", cmPath, bomb, "Content-Type", "application/yaml").status(t, 400, meta.StatusReasonBadRequest)
	deep := `{"metadata":{"name":"deep"},"data":` + strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000) + "}"
	do(t, ts, "POST", cmPath, deep).status(t, 400, meta.StatusReasonBadRequest)
	deepYAML := "metadata: {name: deepy}\ndata: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n"
	do(t, ts, "POST", cmPath, deepYAML, "Content-Type", "application/yaml").status(t, 400, meta.StatusReasonBadRequest)
	if r := do(t, ts, "POST", cmPath, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fromyaml\ndata:\n  k: v\n", "Content-Type", "application/yaml"); r.code != 201 {
		t.Fatalf("YAML create: %d %s", r.code, r.body)
	}
	list := do(t, ts, "GET", cmPath, "").object(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("%d configmaps after hostile input, want 1", n)
	}
}

func TestParseResourcePath(t *testing.T) {
	for _, tc := range []struct {
		rest               string
		ns, res, name, sub string
		ok                 bool
	}{
		{"configmaps", "", "configmaps", "", "", true},
		{"configmaps/", "", "configmaps", "", "", true},
		{"namespaces/ns/configmaps", "ns", "configmaps", "", "", true},
		{"namespaces/ns/configmaps/a", "ns", "configmaps", "a", "", true},
		{"namespaces/ns/configmaps/a/status", "ns", "configmaps", "a", "status", true},
		{"namespaces/ns/configmaps/a/status/x", "", "", "", "", false},
		{"namespaces/ns", "", "namespaces", "ns", "", true},
		{"namespaces/ns/status", "", "namespaces", "ns", "status", true},
		{"namespaces/ns/finalize", "", "namespaces", "ns", "finalize", true},
		{"nodes/n/proxy", "", "nodes", "n", "proxy", true},
		{"nodes/n/proxy/x", "", "", "", "", false},
		{"widgets/a%2Fb", "", "", "", "", false},
		{"widgets/a%20b", "", "widgets", "a b", "", true},
		{"namespaces//configmaps", "", "", "", "", false},
		{"", "", "", "", "", false},
	} {
		ns, res, name, sub, ok := parseResourcePath(tc.rest)
		if ok != tc.ok || (ok && (ns != tc.ns || res != tc.res || name != tc.name || sub != tc.sub)) {
			t.Errorf("parseResourcePath(%q) = %q %q %q %q %v, want %q %q %q %q %v", tc.rest, ns, res, name, sub, ok, tc.ns, tc.res, tc.name, tc.sub, tc.ok)
		}
	}
}

func TestIsResourcePath(t *testing.T) {
	for p, want := range map[string]bool{
		"/api/v1/pods": true, "/api/v1": false, "/api/v1/": false, "/api": false, "/": false, "": false,
		"/apis/g/v1/x": true, "/apis/g/v1": false, "/apis/g/v1/x/y/z": true, "/api//x": true, "api/v1/x/": true,
		"/openapi/v3/apis/g/v1": false, "/apiss/g/v1/x": false,
	} {
		if got := isResourcePath(p); got != want {
			t.Errorf("isResourcePath(%q) = %v, want %v", p, got, want)
		}
	}
}
