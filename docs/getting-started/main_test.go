package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/storage/badger"
)

// TestDocMatchesProgram keeps docs/getting-started.md honest: its main.go
// block is this directory's main.go, byte for byte.
func TestDocMatchesProgram(t *testing.T) {
	doc, err := os.ReadFile("../getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```go\n// Command notes"
	i := strings.Index(string(doc), open)
	if i < 0 {
		t.Fatal("getting-started.md has no main.go block")
	}
	block := string(doc[i+len("```go\n"):])
	block = block[:strings.Index(block, "```\n")]
	if block != string(src) {
		t.Error("the main.go block of docs/getting-started.md differs from docs/getting-started/main.go")
	}
}

// TestNotes serves the program's API and does what the guide's kubectl
// commands do, over HTTP.
func TestNotes(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := newAPI(context.Background(), store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ts := httptest.NewServer(api)
	defer ts.Close()

	do := func(method, path, body string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const notes = "/apis/notes.example.com/v1/namespaces/default/notes"
	if code, body := do("POST", notes, `{"apiVersion":"notes.example.com/v1","kind":"Note","metadata":{"name":"groceries"},"spec":{"text":"Buy milk","priority":"high"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := do("POST", notes, `{"apiVersion":"notes.example.com/v1","kind":"Note","metadata":{"name":"call-bob"},"spec":{"text":"Call Bob back"}}`); code != 201 || !strings.Contains(body, `"priority":"normal"`) {
		t.Fatalf("create with default: %d %s", code, body)
	}
	if code, body := do("GET", notes, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"); code != 200 || !strings.Contains(body, `"name":"Priority"`) || !strings.Contains(body, "Buy milk") {
		t.Fatalf("table: %d %s", code, body)
	}
	if code, body := do("PATCH", notes+"/call-bob", `{"spec":{"priority":"urgent"}}`, "Content-Type", "application/merge-patch+json"); code != 422 || !strings.Contains(body, "Unsupported value") {
		t.Fatalf("invalid patch: %d %s", code, body)
	}
	if code, body := do("GET", "/apis/notes.example.com/v1", ""); code != 200 || !strings.Contains(body, `"shortNames":["nt"]`) {
		t.Fatalf("discovery: %d %s", code, body)
	}
}
