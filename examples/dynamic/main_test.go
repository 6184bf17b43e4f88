package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

const gadgetV1 = `group: toys.example.com
version: v1
plural: gadgets
kind: Gadget
shortNames: [gd]
namespaced: true
schema:
  type: object
  properties:
    spec:
      type: object
      required: [name]
      properties:
        name: {type: string}
`

// gadgetV2 adds a defaulted field.
const gadgetV2 = gadgetV1 + `        color: {type: string, default: blue}
`

// openStore opens a Badger store in dir/db, closed when the test ends.
func openStore(t *testing.T, dir string) *badger.Store {
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// serve runs the example's handler over store and typesFile; call sends it
// a request and returns the status code and body, stop ends it.
func serve(t *testing.T, store *badger.Store, typesFile string) (call func(method, path, body string) (int, string), stop func()) {
	s := serveAPI(t, store, typesFile)
	return s.call, s.stop
}

// testServer is the example's handler served over HTTP.
type testServer struct {
	api *apiserver.Server
	url string
	// stop ends it.
	stop func()
	t    *testing.T
}

func serveAPI(t *testing.T, store *badger.Store, typesFile string) *testServer {
	h, api, err := newHandler(context.Background(), slog.New(slog.DiscardHandler), store, typesFile)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	return &testServer{api: api, url: ts.URL, stop: func() { ts.Close(); api.Close() }, t: t}
}

// do sends a request with a JSON body and returns the status code, body
// and header.
func (s *testServer) do(method, path, body string) (int, string, http.Header) {
	s.t.Helper()
	return s.doType(method, path, "application/json", body)
}

// doType is do with the body's content type.
func (s *testServer) doType(method, path, contentType, body string) (int, string, http.Header) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// call is do without the header.
func (s *testServer) call(method, path, body string) (int, string) {
	s.t.Helper()
	code, b, _ := s.do(method, path, body)
	return code, b
}

// status decodes a Status answer, failing the test on anything else.
func status(t *testing.T, body string) meta.Status {
	t.Helper()
	var st meta.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %s", err, body)
	}
	return st
}

func TestTypesAtRunTime(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	typesFile := filepath.Join(dir, "types.json")
	call, stop := serve(t, store, typesFile)
	gadgets := "/kube/apis/toys.example.com/v1/namespaces/default/gadgets"

	if code, _ := call("GET", gadgets, ""); code != 404 {
		t.Fatalf("before the type exists: %d", code)
	}
	if code, body := call("PUT", "/types/gadgets", gadgetV1); code != 204 {
		t.Fatalf("add type: %d %s", code, body)
	}
	if code, body := call("GET", "/kube/apis/toys.example.com/v1", ""); code != 200 || !strings.Contains(body, `"gadgets"`) {
		t.Fatalf("discovery after adding: %d %s", code, body)
	}
	if code, body := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"name":"first"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"bad"},"spec":{}}`); code != 422 {
		t.Fatalf("invalid create: %d %s", code, body)
	}

	// Change the schema: the new default applies to new writes.
	if code, body := call("PUT", "/types/gadgets", gadgetV2); code != 204 {
		t.Fatalf("change type: %d %s", code, body)
	}
	if code, body := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"g2"},"spec":{"name":"second"}}`); code != 201 || !strings.Contains(body, `"color":"blue"`) {
		t.Fatalf("create with the changed schema: %d %s", code, body)
	}
	if code, body := call("GET", "/kube/openapi/v3/apis/toys.example.com/v1", ""); code != 200 || !strings.Contains(body, `"color"`) {
		t.Fatalf("OpenAPI after the change: %d", code)
	}

	// A bad schema is refused and the served type stays as it was.
	if code, _ := call("PUT", "/types/gadgets", "group: toys.example.com\nversion: v1\nplural: gadgets\nkind: Gadget\nschema: {type: array}\n"); code != 422 {
		t.Fatalf("non-structural schema accepted: %d", code)
	}
	if code, _ := call("GET", gadgets+"/g1", ""); code != 200 {
		t.Fatalf("type broken by a refused change: %d", code)
	}

	// Definitions survive a restart.
	stop()
	call, stop = serve(t, store, typesFile)
	if code, body := call("GET", gadgets+"/g2", ""); code != 200 || !strings.Contains(body, `"second"`) {
		t.Fatalf("after restart: %d %s", code, body)
	}

	// Removing the type stops serving it; the objects stay in storage.
	if code, _ := call("DELETE", "/types/gadgets", ""); code != 204 {
		t.Fatalf("remove type: %d", code)
	}
	if code, _ := call("GET", gadgets+"/g1", ""); code != 404 {
		t.Fatalf("after removal: %d", code)
	}
	if code, body := call("GET", "/kube/apis", ""); strings.Contains(body, "toys.example.com") {
		t.Fatalf("discovery after removal: %d %s", code, body)
	}
	if code, _ := call("PUT", "/types/gadgets", gadgetV2); code != 204 {
		t.Fatalf("re-add: %d", code)
	}
	if code, body := call("GET", gadgets+"/g1", ""); code != 200 || !strings.Contains(body, `"first"`) {
		t.Fatalf("objects after re-adding the type: %d %s", code, body)
	}
	stop()
}

// gadgetRules is gadgetV1 with a validation rule on spec.name.
var gadgetRules = strings.Replace(gadgetV1, "name: {type: string}",
	`name: {type: string, x-kubernetes-validations: [{rule: "self != 'root'", message: root is reserved}]}`, 1)

// TestRefusedRules: a definition whose validation rule does not compile is
// refused with the rule's path and the compiler's message, and the type goes
// on being served as it was, also when the refused definition renames it.
func TestRefusedRules(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	call, stop := serve(t, store, filepath.Join(dir, "types.json"))
	defer stop()
	gadgets := "/kube/apis/toys.example.com/v1/namespaces/default/gadgets"
	if code, body := call("PUT", "/types/gadgets", gadgetRules); code != 204 {
		t.Fatalf("add type: %d %s", code, body)
	}
	if code, body := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"name":"root"}}`); code != 422 || !strings.Contains(body, `"message":"Invalid value: \"root\": root is reserved"`) {
		t.Fatalf("the rule is not enforced: %d %s", code, body)
	}
	if code, body := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"name":"first"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	broken := strings.Replace(gadgetRules, "self != 'root'", "self != root", 1)
	for _, def := range []string{broken, strings.Replace(broken, "plural: gadgets", "plural: gizmos", 1)} {
		code, body := call("PUT", "/types/gadgets", def)
		if st := status(t, body); code != 422 || st.Code != 422 || st.Reason != meta.StatusReasonInvalid ||
			!strings.Contains(st.Message, `spec.name: x-kubernetes-validations[0]: rule: Invalid value: "self != root": compilation failed: ERROR: <input>:1:9: undeclared reference to 'root'`) {
			t.Errorf("PUT of a rule that does not compile: %d %s", code, body)
		}
		if code, body := call("GET", gadgets+"/g1", ""); code != 200 {
			t.Errorf("the type after a refused definition: %d %s", code, body)
		}
		if code, _ := call("POST", gadgets, `{"apiVersion":"toys.example.com/v1","kind":"Gadget","metadata":{"name":"g2"},"spec":{"name":"root"}}`); code != 422 {
			t.Errorf("the type's rule after a refused definition: %d", code)
		}
	}
	if code, _ := call("GET", "/kube/apis/toys.example.com/v1/namespaces/default/gizmos", ""); code != 404 {
		t.Errorf("the refused plural is served: %d", code)
	}
}
