package apiserver

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// The health endpoints answer as kube-apiserver's: named checks, verbose
// lists, exclusions, one check by path, reasons withheld; /readyz fails once
// the server is shutting down (EndWatches), /livez does not.
func TestHealthEndpoints(t *testing.T) {
	api, ts := newTestServer(t)
	for _, c := range []struct{ path, body string }{
		{"/readyz", "ok"},
		{"/livez?verbose", "[+]ping ok\n[+]storage ok\nlivez check passed\n"},
		{"/healthz?verbose=false", "[+]ping ok\n[+]storage ok\nhealthz check passed\n"},
		{"/readyz?verbose", "[+]ping ok\n[+]storage ok\n[+]shutdown ok\nreadyz check passed\n"},
		{"/readyz?verbose&exclude=storage&exclude=nope", "[+]ping ok\n[+]storage excluded: ok\n[+]shutdown ok\n" +
			"warn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"},
		{"/livez/ping", "ok"},
		{"/readyz/storage", "ok"},
		{"/readyz/shutdown", "ok"},
	} {
		if r := do(t, ts, "GET", c.path, ""); r.code != 200 || string(r.body) != c.body {
			t.Errorf("GET %s: %d %q, want 200 %q", c.path, r.code, r.body, c.body)
		}
	}
	// Only GET and HEAD: the endpoints need no credentials (kube-apiserver
	// answers other methods 403 to anonymous users).
	if r := do(t, ts, "POST", "/healthz", ""); r.code != 405 {
		t.Errorf("POST /healthz: %d %q, want 405", r.code, r.body)
	}
	for _, p := range []string{"/livez/nope", "/livez/shutdown", "/healthz/x/y", "/healthz/", "/readyz/"} {
		if r := do(t, ts, "GET", p, ""); r.code != 404 {
			t.Errorf("GET %s: %d %s, want 404", p, r.code, r.body)
		}
	}
	for _, c := range []struct {
		path string
		code int
	}{{"/readyz", 200}, {"/livez/ping", 200}, {"/openapi/v2", 200}, {"/openapi/v3", 200}, {"/apis", 200},
		{"/version", 405}, {"/api", 405}, {cmPath, 405}, {cmPath + "?watch=1", 405}} {
		if r := do(t, ts, "HEAD", c.path, ""); r.code != c.code {
			t.Errorf("HEAD %s: %d, want %d", c.path, r.code, c.code)
		}
	}

	api.EndWatches()
	if r := do(t, ts, "GET", "/readyz", ""); r.code != 500 || !strings.Contains(string(r.body), "[-]shutdown failed: reason withheld\n") ||
		!strings.HasSuffix(string(r.body), "readyz check failed\n") {
		t.Errorf("readyz while shutting down: %d %q", r.code, r.body)
	}
	if r := do(t, ts, "GET", "/readyz/shutdown", ""); r.code != 500 {
		t.Errorf("readyz/shutdown while shutting down: %d %q", r.code, r.body)
	}
	if r := do(t, ts, "GET", "/livez", ""); r.code != 200 {
		t.Errorf("livez while shutting down: %d %q", r.code, r.body)
	}
}

// A failing store fails every endpoint without saying why to the client.
func TestHealthStorageFailed(t *testing.T) {
	api, ts := newTestServer(t)
	if err := api.cfg.Storage.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		r := do(t, ts, "GET", p, "")
		if r.code != 500 || !strings.Contains(string(r.body), "[-]storage failed: reason withheld\n") || strings.Contains(string(r.body), "closed") {
			t.Errorf("GET %s with the store closed: %d %q", p, r.code, r.body)
		}
	}
	if r := do(t, ts, "GET", "/livez/storage", ""); r.code != 500 || string(r.body) != "internal server error: reason withheld\n" {
		t.Errorf("GET /livez/storage with the store closed: %d %q", r.code, r.body)
	}
}

// Mounted under a prefix with chi, the endpoints still know which they are:
// /kube/readyz runs readyz's checks and fails once the server shuts down.
func TestHealthMountedWithChi(t *testing.T) {
	api, _ := newTestServer(t)
	router := chi.NewRouter()
	router.Mount("/kube", api)
	ts := httptest.NewServer(router)
	t.Cleanup(ts.Close)
	want := "[+]ping ok\n[+]storage ok\n[+]shutdown ok\nreadyz check passed\n"
	if r := do(t, ts, "GET", "/kube/readyz?verbose", ""); string(r.body) != want {
		t.Errorf("GET /kube/readyz?verbose: %d %q, want %q", r.code, r.body, want)
	}
	api.EndWatches()
	if r := do(t, ts, "GET", "/kube/readyz", ""); r.code != 500 {
		t.Errorf("GET /kube/readyz after EndWatches: %d %q, want 500", r.code, r.body)
	}
	if r := do(t, ts, "GET", "/kube/livez/ping", ""); r.code != 200 {
		t.Errorf("GET /kube/livez/ping: %d %q", r.code, r.body)
	}
}
