package apiserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/prometheus/client_golang/prometheus"
)

// tracingServer serves configmaps with tracing into an in-memory span
// recorder, with one global validating hook and one mutating hook of the
// configmaps type.
func tracingServer(t *testing.T) (*tracetest.SpanRecorder, *httptest.Server, *badger.Store) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, TracerProvider: tp, DisableControllers: true,
		Admission: []registry.AdmissionHook{{Name: "global-check", SideEffects: registry.SideEffectsNone,
			Validate: func(ctx context.Context, req *registry.AdmissionRequest) error {
				if req.Name == "forbidden" {
					return errors.New("no")
				}
				return nil
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	cm := registry.ConfigMaps()
	cm.Admission = []registry.AdmissionHook{{Name: "label-it", SideEffects: registry.SideEffectsNone,
		Mutate: func(ctx context.Context, req *registry.AdmissionRequest) error { return nil }}}
	if err := api.Register(cm); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return rec, ts, store
}

func tracedRequest(t *testing.T, ts *httptest.Server, method, path, body string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tracing-test/1.0")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// serverSpan waits for the ended server span with the given name (it ends
// just after the response is written) and returns it.
func serverSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var found sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == name && s.SpanKind() == trace.SpanKindServer {
				found = s
			}
		}
		if found != nil {
			return found
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range rec.Ended() {
				names = append(names, s.Name())
			}
			t.Fatalf("no server span %q; ended spans: %q", name, names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children returns the ended spans whose parent is span.
func children(rec *tracetest.SpanRecorder, span sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == span.SpanContext().SpanID() && s.SpanContext().TraceID() == span.SpanContext().TraceID() {
			out[s.Name()] = s
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("span %q: no attribute %s (have %v)", s.Name(), k, s.Attributes())
			continue
		}
		if g.Emit() != attribute.StringValue(toString(v)).Emit() {
			t.Errorf("span %q: %s = %s, want %v", s.Name(), k, g.Emit(), v)
		}
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return attribute.IntValue(v).Emit()
	}
	panic("unsupported")
}

func TestTracingCreateGetListErrors(t *testing.T) {
	rec, ts, _ := tracingServer(t)

	// Create, continuing the client's trace.
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	code := tracedRequest(t, ts, "POST", "/api/v1/namespaces/default/configmaps",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"},"data":{"k":"v"}}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01")
	if code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	create := serverSpan(t, rec, "HTTP POST /api/v1/namespaces/{namespace}/configmaps")
	if got := create.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("create span trace ID %s, want the client's %s", got, traceID)
	}
	if got := create.Parent().SpanID().String(); got != parentID || !create.Parent().IsRemote() {
		t.Errorf("create span parent %s (remote %v), want the client's span %s", got, create.Parent().IsRemote(), parentID)
	}
	wantAttrs(t, create, map[attribute.Key]any{
		"http.request.method": "POST", "http.route": "/api/v1/namespaces/{namespace}/configmaps",
		"http.response.status_code": 201, "user_agent.original": "tracing-test/1.0",
		"kapi.verb": "create", "kapi.group": "", "kapi.version": "v1", "kapi.resource": "configmaps", "kapi.namespace": "default",
	})
	if create.Status().Code != codes.Unset {
		t.Errorf("create span status %v", create.Status())
	}
	kids := children(rec, create)
	for _, name := range []string{"storage.Create", "admission.Mutate", "admission.Validate"} {
		if _, ok := kids[name]; !ok {
			t.Errorf("create: no child span %q; children: %v", name, kids)
		}
	}
	if s, ok := kids["storage.Create"]; ok {
		wantAttrs(t, s, map[attribute.Key]any{"kapi.storage.key": "/registry/core/configmaps/default/cm1"})
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("storage span kind %v", s.SpanKind())
		}
	}
	if s, ok := kids["admission.Mutate"]; ok {
		wantAttrs(t, s, map[attribute.Key]any{"kapi.admission.hook": "label-it", "kapi.admission.operation": "CREATE"})
	}
	if s, ok := kids["admission.Validate"]; ok {
		wantAttrs(t, s, map[attribute.Key]any{"kapi.admission.hook": "global-check"})
	}

	// Get: a new trace (no traceparent), storage.Get below it.
	if code := tracedRequest(t, ts, "GET", "/api/v1/namespaces/default/configmaps/cm1", ""); code != 200 {
		t.Fatalf("get: %d", code)
	}
	get := serverSpan(t, rec, "HTTP GET /api/v1/namespaces/{namespace}/configmaps/{name}")
	if get.Parent().IsValid() {
		t.Errorf("get without traceparent has parent %v", get.Parent())
	}
	wantAttrs(t, get, map[attribute.Key]any{"kapi.verb": "get", "kapi.name": "cm1", "http.response.status_code": 200})
	if s, ok := children(rec, get)["storage.Get"]; !ok {
		t.Errorf("get: no storage.Get child")
	} else if s.Status().Code != codes.Unset {
		t.Errorf("storage.Get status %v", s.Status())
	}

	// List.
	if code := tracedRequest(t, ts, "GET", "/api/v1/namespaces/default/configmaps?limit=10", ""); code != 200 {
		t.Fatalf("list: %d", code)
	}
	list := serverSpan(t, rec, "HTTP GET /api/v1/namespaces/{namespace}/configmaps")
	wantAttrs(t, list, map[attribute.Key]any{"kapi.verb": "list", "kapi.resource": "configmaps", "http.response.status_code": 200})

	// Not found: a 4xx leaves the server span's status unset; the storage
	// span records the error without failing.
	if code := tracedRequest(t, ts, "GET", "/api/v1/namespaces/default/configmaps/missing", ""); code != 404 {
		t.Fatalf("get missing: %d", code)
	}
	var miss sdktrace.ReadOnlySpan
	deadline := time.Now().Add(5 * time.Second)
	for miss == nil && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer && attrs(s)["kapi.name"].AsString() == "missing" {
				miss = s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if miss == nil {
		t.Fatal("no span for the 404")
	}
	wantAttrs(t, miss, map[attribute.Key]any{"http.response.status_code": 404})
	if miss.Status().Code != codes.Unset {
		t.Errorf("404 span status %v, want unset", miss.Status())
	}
	if s, ok := children(rec, miss)["storage.Get"]; !ok || len(s.Events()) == 0 || s.Status().Code != codes.Unset {
		t.Errorf("404: storage.Get child missing, without its error event, or failed: %v", s)
	}

	// An admission denial: 403, the hook's span records the error.
	if code := tracedRequest(t, ts, "POST", "/api/v1/namespaces/default/configmaps",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"forbidden"}}`); code != http.StatusForbidden {
		t.Fatalf("denied create: %d", code)
	}

	// Non-resource requests are named by their route.
	if code := tracedRequest(t, ts, "GET", "/version", ""); code != 200 {
		t.Fatalf("version: %d", code)
	}
	serverSpan(t, rec, "HTTP GET /version")

	// Background work (the watch caches, the namespace bootstrap) made no
	// root storage spans.
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "storage.") && !s.Parent().IsValid() {
			t.Errorf("root storage span %q", s.Name())
		}
	}
}

func TestTracingServerError(t *testing.T) {
	rec, ts, store := tracingServer(t)
	store.Close() // every storage operation now fails
	code := tracedRequest(t, ts, "GET", "/api/v1/namespaces/default/configmaps/x", "")
	if code < 500 {
		t.Fatalf("get on a closed store: %d, want 5xx", code)
	}
	s := serverSpan(t, rec, "HTTP GET /api/v1/namespaces/{namespace}/configmaps/{name}")
	if s.Status().Code != codes.Error {
		t.Errorf("5xx span status %v, want Error", s.Status())
	}
	wantAttrs(t, s, map[attribute.Key]any{"http.response.status_code": code, "error.type": attribute.IntValue(code).Emit()})
	st, ok := children(rec, s)["storage.Get"]
	if !ok {
		t.Fatal("no storage.Get child")
	}
	if st.Status().Code != codes.Error {
		t.Errorf("storage.Get on a closed store: status %v, want Error", st.Status())
	}
}

func TestTracingOff(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := New(context.Background(), Config{Storage: store, DisableControllers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if _, ok := api.cfg.Storage.(tracedStore); ok {
		t.Error("storage wrapped for tracing without a TracerProvider")
	}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if got := api.tracing(h); reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Error("the tracing middleware wrapped the handler without a TracerProvider")
	}
	res := registry.ConfigMaps()
	res.Admission = []registry.AdmissionHook{{Name: "x", Validate: func(context.Context, *registry.AdmissionRequest) error { return nil }}}
	if got := api.traceAdmission(res); &got.Admission[0] != &res.Admission[0] {
		t.Error("admission hooks copied without a TracerProvider")
	}
}

// TestTracingWatch checks that a traced watch still streams (the
// middleware's response writer passes flushes through) and gets one span for
// its whole life.
func TestTracingWatch(t *testing.T) {
	rec, ts, _ := tracingServer(t)
	if code := tracedRequest(t, ts, "POST", "/api/v1/namespaces/default/configmaps",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w1"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	resp, err := ts.Client().Get(ts.URL + "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"type":"ADDED"`) || !strings.Contains(string(body), `"name":"w1"`) {
		t.Fatalf("watch body: %s", body)
	}
	var found bool
	deadline := time.Now().Add(5 * time.Second)
	for !found && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			if s.Name() == "HTTP GET /api/v1/namespaces/{namespace}/configmaps" && attrs(s)["kapi.verb"].AsString() == "watch" {
				found = true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !found {
		t.Error("no server span for the watch")
	}
}

// Span names and http.route come from registered resources only: made-up
// resources and subresources get chi's route pattern.
func TestTracingRouteOfUnknownPaths(t *testing.T) {
	rec, ts, _ := tracingServer(t)
	for _, p := range []string{
		"/apis/made.up/v1/namespaces/default/things-8f3a/x",
		"/api/v1/namespaces/default/configmaps/cm1/bogus-sub-91",
		"/api/v9/pods",
	} {
		if code := tracedRequest(t, ts, "GET", p, ""); code != http.StatusNotFound {
			t.Fatalf("GET %s: %d", p, code)
		}
	}
	if code := tracedRequest(t, ts, "GET", "/api/v1/namespaces/default/configmaps/cm1", ""); code != http.StatusNotFound {
		t.Fatalf("GET cm1: %d", code)
	}
	serverSpan(t, rec, "HTTP GET /api/v1/namespaces/{namespace}/configmaps/{name}")
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		route := attrs(s)["http.route"].AsString()
		if strings.Contains(s.Name(), "made.up") || strings.Contains(s.Name(), "bogus") || strings.Contains(s.Name(), "v9") ||
			strings.Contains(route, "made.up") || strings.Contains(route, "bogus") || strings.Contains(route, "v9") {
			t.Errorf("span %q route %q carries a client-chosen URL part", s.Name(), route)
		}
	}
	serverSpan(t, rec, "HTTP GET /apis/{group}/{version}/*")
	serverSpan(t, rec, "HTTP GET /api/{version}/*")
}

// The storage wrappers of metrics and tracing keep the store's progress
// requests, which the watch caches use to answer consistent reads at once.
func TestStorageWrappersKeepProgressRequests(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, DisableControllers: true,
		TracerProvider: tp, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	p, ok := api.Registry().Storage().(storage.ProgressRequester)
	if !ok {
		t.Fatalf("the registry's storage %T cannot request progress", api.Registry().Storage())
	}
	if err := p.RequestProgress(context.Background()); err != nil {
		t.Fatal(err)
	}
}
