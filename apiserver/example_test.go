package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
}

type WidgetSpec struct {
	Size  int64  `json:"size" kapi:"required,min=0"`
	Color string `json:"color,omitempty" kapi:"default=red"`
}

// request sends one request and returns the status code and body.
func request(h http.Handler, method, path, body string, header ...string) (int, string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// New builds the handler, Register adds a type, and the Server is an
// http.Handler like any other.
func ExampleNew() {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions()) // badger.DefaultOptions(dir) to keep data
	if err != nil {
		panic(err)
	}
	defer store.Close()

	api, err := apiserver.New(ctx, apiserver.Config{
		Storage: store,
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token": {Name: "admin", Groups: []string{auth.GroupMasters}},
		}),
	})
	if err != nil {
		panic(err)
	}
	defer api.Close()

	widgets, err := registry.ForType[Widget](registry.Resource{
		Group: "example.dev", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true,
	})
	if err != nil {
		panic(err)
	}
	if err := api.Register(widgets); err != nil {
		panic(err)
	}

	const path = "/apis/example.dev/v1/namespaces/default/widgets"
	code, _ := request(api, "GET", path, "")
	fmt.Println("without a token:", code)

	code, _ = request(api, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}`,
		"Authorization", "Bearer admin-token")
	fmt.Println("create:", code)

	code, body := request(api, "GET", path+"/w1", "", "Authorization", "Bearer admin-token")
	var w Widget
	_ = json.Unmarshal([]byte(body), &w)
	fmt.Println("get:", code, w.Metadata.Name, w.Spec.Size, w.Spec.Color)

	code, body = request(api, "GET", path+"/w2", "", "Authorization", "Bearer admin-token")
	var st meta.Status
	_ = json.Unmarshal([]byte(body), &st)
	fmt.Println("get missing:", code, st.Reason, st.Message)
	// Output:
	// without a token: 401
	// create: 201
	// get: 200 w1 3 red
	// get missing: 404 NotFound widgets.example.dev "w2" not found
}

// The Server can be mounted under a prefix of another router. With
// net/http's ServeMux, strip the prefix; with chi, router.Mount("/kube", api)
// does it.
func ExampleServer_ServeHTTP_prefix() {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	api, err := apiserver.New(context.Background(), apiserver.Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		panic(err)
	}
	defer api.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the host's own page") })
	mux.Handle("/kube/", http.StripPrefix("/kube", api))

	_, body := request(mux, "GET", "/", "")
	fmt.Println(body)
	code, body := request(mux, "GET", "/kube/api/v1/namespaces/default", "")
	var ns map[string]any
	_ = json.Unmarshal([]byte(body), &ns)
	fmt.Println(code, ns["kind"], meta.GetName(ns))
	// Output:
	// the host's own page
	// 200 Namespace default
}

// With Config.TracerProvider every request is a server span with child
// spans for storage operations and admission hooks. Any OpenTelemetry SDK
// provider works; here the SDK's in-memory recorder shows the spans.
func ExampleConfig_tracing() {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	api, err := apiserver.New(context.Background(), apiserver.Config{
		Storage: store, AllowAnonymous: true,
		TracerProvider: tp, // and optionally Propagator (default: W3C traceparent)
	})
	if err != nil {
		panic(err)
	}
	defer api.Close()
	if err := api.Register(registry.ConfigMaps()); err != nil {
		panic(err)
	}

	request(api, "POST", "/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"}}`,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

	for _, s := range recorder.Ended() {
		if s.Name() == "storage.Create" || strings.HasPrefix(s.Name(), "HTTP ") {
			fmt.Println(s.Name(), "in trace", s.SpanContext().TraceID())
		}
	}
	// Output:
	// storage.Create in trace 4bf92f3577b34da6a3ce929d0e0e4736
	// HTTP POST /api/v1/namespaces/{namespace}/configmaps in trace 4bf92f3577b34da6a3ce929d0e0e4736
}
