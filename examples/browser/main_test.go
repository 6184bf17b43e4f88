package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage/badger"
)

// TestHandler checks the program's routes: the page and its script under
// /ui/, the API under /k8s/ without credentials, and a watch of the kind the
// page makes. The page itself runs in headless Chromium in
// examples/e2e/browser_test.go.
func TestHandler(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h, api, err := newHandler(context.Background(), slog.New(slog.DiscardHandler), store)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ts := httptest.NewServer(h)
	defer ts.Close()

	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("/"); resp.Request.URL.Path != "/ui/" || !strings.Contains(body, `<script src="app.js">`) {
		t.Fatalf("/ redirects to the page: ended at %s: %.200s", resp.Request.URL, body)
	}
	if resp, body := get("/ui/app.js"); resp.StatusCode != 200 || !strings.Contains(body, "allowWatchBookmarks=true") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("app.js: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, body := get("/k8s/apis/example.dev/v1/widgets")
	var list struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || list.Metadata.ResourceVersion == "" {
		t.Fatalf("anonymous list under /k8s/: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/k8s/apis/example.dev/v1/widgets?watch=1&allowWatchBookmarks=true&resourceVersion="+list.Metadata.ResourceVersion, nil)
	w, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Body.Close()
	created, err := http.Post(ts.URL+"/k8s/apis/example.dev/v1/namespaces/default/widgets", "application/json",
		strings.NewReader(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	created.Body.Close()
	if created.StatusCode != 201 {
		t.Fatalf("create: %d", created.StatusCode)
	}
	var ev struct {
		Type   string `json:"type"`
		Object Widget `json:"object"`
	}
	events := bufio.NewReader(w.Body)
	var line []byte
	for ev.Type == "" || ev.Type == "BOOKMARK" {
		if line, err = events.ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("watch event: %v %s", err, line)
		}
	}
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type != "ADDED" || ev.Object.Metadata.Name != "w1" || ev.Object.Spec.Color != "blue" {
		t.Fatalf("watch event: %v %s", err, line)
	}
}

// Requests must name the server's loopback address in Host: a page on
// another site reaching 127.0.0.1 through a rebound DNS name is refused.
func TestCheckHost(t *testing.T) {
	h := checkHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), "127.0.0.1", "8080")
	for host, want := range map[string]int{
		"127.0.0.1:8080":              200,
		"localhost:8080":              200,
		"LocalHost:8080":              200,
		"[::1]:8080":                  200,
		"evil.example:8080":           403,
		"localhost.evil.example:8080": 403,
		"127.0.0.1:9090":              403,
		"localhost":                   403,
		"":                            403,
	} {
		r := httptest.NewRequest("GET", "/k8s/api/v1/namespaces", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
	// On port 80 the Host header may omit the port.
	h = checkHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), "localhost", "80")
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]", "localhost:80"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("Host %q on port 80: %d", host, w.Code)
		}
	}
}
