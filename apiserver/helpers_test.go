package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// testWidgetSchema is the Widget schema of the quickstart, written as a CRD
// would give it.
const testWidgetSchema = `{"type":"object","required":["spec"],"properties":{
 "spec":{"type":"object","required":["size"],"properties":{
  "size":{"type":"integer","minimum":0},"color":{"type":"string"},"replicas":{"type":"integer"},
  "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name","port"],"properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string"}}}}}},
 "status":{"type":"object","properties":{"replicas":{"type":"integer"},"phase":{"type":"string"},"selector":{"type":"string"}}}}}`

func widgetResource(t testing.TB) registry.Resource {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(testWidgetSchema), &s); err != nil {
		t.Fatal(err)
	}
	return registry.Resource{
		Group: "example.dev", Version: "v1", Resource: "widgets", Kind: "Widget",
		ShortNames: []string{"wd"}, Categories: []string{"all"}, Namespaced: true, Schema: &s,
		Subresources: registry.Subresources{Status: true, Scale: &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}},
		PrinterColumns: []registry.Column{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
			{Name: "Color", Type: "string", JSONPath: ".spec.color"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
		SelectableFields: []string{".spec.color"},
	}
}

// newTestServer starts a Server on an in-memory Badger store serving
// namespaces, configmaps and widgets.
func newTestServer(t testing.TB) (*Server, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api, err := New(context.Background(), Config{Storage: store, MaxRequestBodyBytes: 1 << 20, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetResource(t)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return api, ts
}

// newConfigMapServer returns a Server (anonymous access, no controllers)
// serving configmaps, on cfg's store or a new in-memory one; other fields of
// cfg are kept.
func newConfigMapServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Storage == nil {
		store, err := badger.Open(badger.InMemoryOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		cfg.Storage = store
	}
	cfg.AllowAnonymous, cfg.DisableControllers = true, true
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	return api
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// status decodes a Status body and checks its code and reason.
func (r response) status(t testing.TB, code int, reason meta.StatusReason) meta.Status {
	t.Helper()
	if r.code != code {
		t.Fatalf("code = %d, want %d; body %s", r.code, code, r.body)
	}
	var st meta.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("not a Status: %v: %s", err, r.body)
	}
	wantCode := int32(code)
	if code < 400 {
		wantCode = 0 // success Statuses of deletes carry no code
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Code != wantCode || st.Reason != reason {
		t.Fatalf("status = %+v, want code %d reason %q", st, code, reason)
	}
	if code >= 400 && st.Status != meta.StatusFailure {
		t.Fatalf("status.status = %q, want Failure", st.Status)
	}
	return st
}

func do(t testing.TB, ts *httptest.Server, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		b, _ := json.Marshal(v)
		return string(b)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// watchStream reads watch events from a streaming response.
type watchStream struct {
	resp   *http.Response
	events chan map[string]any
}

func startWatch(t testing.TB, ts *httptest.Server, path string) *watchStream {
	t.Helper()
	return startWatchAs(t, ts, path, "")
}

// startWatchAs starts a watch with a bearer token ("" for none).
func startWatchAs(t testing.TB, ts *httptest.Server, path, token string) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("watch %s: %d %s", path, resp.StatusCode, b)
	}
	ws := &watchStream{resp: resp, events: make(chan map[string]any, 100)}
	go func() {
		defer close(ws.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("bad watch line %q: %v", sc.Text(), err)
				return
			}
			ws.events <- ev
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return ws
}

func (ws *watchStream) next(t testing.TB) map[string]any {
	t.Helper()
	select {
	case ev, ok := <-ws.events:
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return nil
}

// Discovery documents as clients decode them (package discovery builds
// them): an APIResourceList entry, and an aggregated discovery group with its
// resources' subresources.
type (
	apiResource struct {
		Name, SingularName, Group, Version, Kind string
		Namespaced                               bool
		Verbs, ShortNames, Categories            []string
		StorageVersionHash                       string
	}
	discoveryGroup struct {
		Metadata struct{ Name string }
		Versions []struct {
			Version   string
			Resources []struct {
				Resource     string
				Subresources []discoverySubresource
			}
		}
	}
	discoverySubresource struct {
		Subresource  string
		ResponseKind struct{ Group, Version, Kind string }
		Verbs        []string
	}
)
