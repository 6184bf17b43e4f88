package apiserver

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// TestBuiltinFieldSelectors: the field selectors kube-apiserver supports on
// secrets (type) and namespaces (status.phase) select; others stay 400.
func TestBuiltinFieldSelectors(t *testing.T) {
	api := newConfigMapServer(t, Config{})
	if err := api.Register(registry.Secrets()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	sec := "/api/v1/namespaces/default/secrets"
	for _, c := range []struct{ path, body string }{
		{sec, `{"metadata":{"name":"plain"},"data":{"k":"dg=="}}`},
		{sec, `{"metadata":{"name":"cert"},"type":"kubernetes.io/tls","data":{"tls.crt":"YQ==","tls.key":"Yg=="}}`},
		{"/api/v1/namespaces", `{"metadata":{"name":"other"}}`},
	} {
		if r := do(t, ts, "POST", c.path, c.body); r.code != 201 {
			t.Fatalf("create %s: %d %s", c.body, r.code, r.body)
		}
	}

	tests := []struct{ path, selector string }{
		{sec, "type=kubernetes.io/tls"},
		{sec, "type!=Opaque"},
		{sec, "type=Opaque"},
		{"/api/v1/secrets", "type=kubernetes.io/tls,metadata.namespace=default"},
		{"/api/v1/namespaces", "status.phase=Active"},
		{"/api/v1/namespaces", "status.phase!=Active"},
	}
	want := [][]string{{"cert"}, {"cert"}, {"plain"}, {"cert"}, {"default", "kube-node-lease", "kube-public", "kube-system", "other"}, nil}
	for i, tt := range tests {
		r := do(t, ts, "GET", tt.path+"?fieldSelector="+url.QueryEscape(tt.selector), "")
		if r.code != 200 {
			t.Errorf("%s?fieldSelector=%s: %d %s", tt.path, tt.selector, r.code, r.body)
			continue
		}
		got := itemNames(t, r.object(t))
		if !slices.Equal(got, want[i]) {
			t.Errorf("%s?fieldSelector=%s: %v, want %v", tt.path, tt.selector, got, want[i])
		}
	}
	do(t, ts, "GET", "/api/v1/namespaces/default/configmaps?fieldSelector=type%3DOpaque", "").status(t, 400, meta.StatusReasonBadRequest)
}
