package apiserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

const (
	leasesPath = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	gadgetPath = "/apis/example.dev/v1/namespaces/default/gadgets"
	mergeType  = "application/merge-patch+json"
)

// gadgetResource is a custom type with an int-or-string, a number and a
// schemaless field, which integer normalisation must leave alone.
func gadgetResource(t *testing.T) registry.Resource {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"spec":{"type":"object","properties":{
		"port":{"x-kubernetes-int-or-string":true},"ratio":{"type":"number"},
		"free":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}`), &s); err != nil {
		t.Fatal(err)
	}
	return registry.Resource{Group: "example.dev", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true, Schema: &s}
}

// numbersServer serves configmaps, widgets, gadgets, leases and events.
func numbersServer(t *testing.T) *httptest.Server {
	t.Helper()
	api, ts := newTestServer(t)
	for _, res := range append(registry.Events(registry.EventOptions{}), registry.Leases(), gadgetResource(t)) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// hasField reports whether JSON text holds "name": literal (any spacing).
func hasField(body []byte, name, literal string) bool {
	return regexp.MustCompile(`"` + regexp.QuoteMeta(name) + `":\s*` + regexp.QuoteMeta(literal) + `[,}\s]`).Match(body)
}

// An integer field of a built-in type written with a fraction or an
// exponent is a 400 naming the field, as kube-apiserver's decoding into Go
// structs answers ("cannot unmarshal number 1.5e1 into ... int32"); "-0" is
// read as 0.
func TestFloatIntegerIsBadRequestForBuiltins(t *testing.T) {
	ts := numbersServer(t)
	st := do(t, ts, "POST", leasesPath, `{"metadata":{"name":"lf"},"spec":{"leaseDurationSeconds":1.5e1}}`).status(t, 400, meta.StatusReasonBadRequest)
	if want := `Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal number 1.5e1 into Go struct field spec.leaseDurationSeconds of type int32`; st.Message != want {
		t.Errorf("lease: %q, want %q", st.Message, want)
	}
	st = do(t, ts, "POST", coreEvents, strings.Replace(recorderEvent("e1", "cm", "Normal", "c"), `"count":1`, `"count":2.0`, 1)).status(t, 400, meta.StatusReasonBadRequest)
	if !strings.Contains(st.Message, "cannot unmarshal number 2.0 into Go struct field count of type int32") {
		t.Errorf("event: %q", st.Message)
	}
	if r := do(t, ts, "POST", leasesPath, `{"metadata":{"name":"l"},"spec":{"leaseDurationSeconds":10,"leaseTransitions":-0}}`); r.code != 201 || !hasField(r.body, "leaseTransitions", "0") {
		t.Fatalf("-0: %d %s", r.code, r.body)
	}
	st = do(t, ts, "PATCH", leasesPath+"/l", `{"spec":{"leaseDurationSeconds":3e1}}`, "Content-Type", mergeType).status(t, 400, meta.StatusReasonBadRequest)
	if !strings.Contains(st.Message, "spec.leaseDurationSeconds") {
		t.Errorf("merge patch: %q", st.Message)
	}
	do(t, ts, "PUT", leasesPath+"/l", `{"metadata":{"name":"l"},"spec":{"leaseDurationSeconds":99999999999999999999}}`).status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "PUT", leasesPath+"/l", `{"metadata":{"name":"l"},"spec":{"leaseDurationSeconds":1e400}}`).status(t, 400, meta.StatusReasonBadRequest)
	if r := do(t, ts, "GET", leasesPath+"/l", ""); !hasField(r.body, "leaseDurationSeconds", "10") {
		t.Fatalf("after the refused writes: %s", r.body)
	}
}

// A custom resource's integral integer written with a fraction or an
// exponent is stored as the plain integer on every write path, as
// kube-apiserver stores it; a fraction stays a 422.
func TestFloatIntegerIsCanonicalForCustomResources(t *testing.T) {
	ts := numbersServer(t)
	check := func(what string, r response, field, want string) {
		t.Helper()
		if r.code >= 300 {
			t.Fatalf("%s: %d %s", what, r.code, r.body)
		}
		got := do(t, ts, "GET", wdPath+"/w", "")
		if !hasField(r.body, field, want) || !hasField(got.body, field, want) {
			t.Fatalf("%s: %s = %s wanted; answer %s, stored %s", what, field, want, r.body, got.body)
		}
	}
	r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1e2,"ports":[{"name":"a","port":8.0e1}]}}`)
	check("create", r, "size", "100")
	check("create", r, "port", "80")
	check("merge patch", do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":2.0}}`, "Content-Type", mergeType), "size", "2")
	check("json patch", do(t, ts, "PATCH", wdPath+"/w", `[{"op":"replace","path":"/spec/size","value":3E0}]`, "Content-Type", "application/json-patch+json"), "size", "3")
	check("apply", do(t, ts, "PATCH", wdPath+"/w?fieldManager=a&force=true", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":4.0}}`, "Content-Type", applyPatchType), "size", "4")
	cur := do(t, ts, "GET", wdPath+"/w", "").object(t)
	rv := str(cur, "metadata", "resourceVersion")
	check("update", do(t, ts, "PUT", wdPath+"/w", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"`+rv+`"},"spec":{"size":50e-1,"replicas":-0}}`), "size", "5")
	check("update -0", do(t, ts, "GET", wdPath+"/w", ""), "replicas", "0")
	check("status", do(t, ts, "PATCH", wdPath+"/w/status", `{"status":{"replicas":6.00}}`, "Content-Type", mergeType), "replicas", "6")
	check("scale", do(t, ts, "PATCH", wdPath+"/w/scale", `{"spec":{"replicas":6}}`, "Content-Type", mergeType), "replicas", "6")
	do(t, ts, "PATCH", wdPath+"/w/scale", `{"spec":{"replicas":6.0}}`, "Content-Type", mergeType).status(t, 400, meta.StatusReasonBadRequest)
	check("size", do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":6e0}}`, "Content-Type", mergeType), "size", "6")

	st := do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":1.5}}`, "Content-Type", mergeType).status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, `spec.size in body must be of type integer: "number"`) {
		t.Errorf("fraction: %q", st.Message)
	}
	// Integral but beyond 2^53 as a float, or beyond int64: not an integer.
	do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":1e18}}`, "Content-Type", mergeType).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":99999999999999999999}}`, "Content-Type", mergeType).status(t, 422, meta.StatusReasonInvalid)
	check("refused", do(t, ts, "GET", wdPath+"/w", ""), "size", "6")

	// YAML bodies: their numbers reach the decoder as JSON numbers Go wrote.
	r = do(t, ts, "POST", wdPath, "apiVersion: example.dev/v1\nkind: Widget\nmetadata:\n  name: wy\nspec:\n  size: 1e2\n  ports:\n  - name: a\n    port: 8.0e1\n", "Content-Type", "application/yaml")
	if r.code != 201 || !hasField(r.body, "size", "100") || !hasField(r.body, "port", "80") {
		t.Fatalf("yaml create: %d %s", r.code, r.body)
	}
}

// int-or-string integers are integers too; strings, number fields and
// fields without a schema keep what was written.
func TestFloatIntegerLeavesOtherFields(t *testing.T) {
	ts := numbersServer(t)
	r := do(t, ts, "POST", gadgetPath, `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"port":8e1,"ratio":1.5e1,"free":{"n":1e2,"f":2.0}}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	got := do(t, ts, "GET", gadgetPath+"/g", "").body
	for field, want := range map[string]string{"port": "80", "ratio": "1.5e1", "n": "1e2", "f": "2.0"} {
		if !hasField(got, field, want) {
			t.Errorf("%s: want %s in %s", field, want, got)
		}
	}
	r = do(t, ts, "PATCH", gadgetPath+"/g", `{"spec":{"port":"8e1"}}`, "Content-Type", mergeType)
	if !hasField(r.body, "port", `"8e1"`) {
		t.Errorf("int-or-string string: %d %s", r.code, r.body)
	}
	do(t, ts, "PATCH", gadgetPath+"/g", `{"spec":{"port":1.5}}`, "Content-Type", mergeType).status(t, 422, meta.StatusReasonInvalid)
}

// A number beyond float64's range is a 400 wherever it is, as in
// kube-apiserver: no client could decode it.
func TestNumberOutOfRangeIsBadRequest(t *testing.T) {
	ts := numbersServer(t)
	for _, body := range []string{
		`{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"free":{"n":1e400}}}`,
		`{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"ratio":-1E+309}}`,
		`{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"port":1` + strings.Repeat("0", 400) + `}}`,
	} {
		st := do(t, ts, "POST", gadgetPath, body).status(t, 400, meta.StatusReasonBadRequest)
		if !strings.Contains(st.Message, "out of range") {
			t.Errorf("%.60s: %q", body, st.Message)
		}
	}
	if r := do(t, ts, "POST", gadgetPath, `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"ratio":1e-400}}`); r.code != 201 {
		t.Fatalf("underflow: %d %s", r.code, r.body) // it is 0, as Go reads it
	}
	do(t, ts, "PATCH", gadgetPath+"/g", `[{"op":"add","path":"/spec/ratio","value":1e999}]`, "Content-Type", "application/json-patch+json").status(t, 400, meta.StatusReasonBadRequest)
}

// TestHugeNumberStoredStaysDeletable: a number beyond float64's range is
// refused in requests, but one already stored (a hook's, or written before
// requests were refused it) is read, updated and deleted like any other.
func TestHugeNumberStoredStaysDeletable(t *testing.T) {
	api := newConfigMapServer(t, Config{Admission: []registry.AdmissionHook{{
		Name: "huge", SideEffects: registry.SideEffectsNone, Operations: []registry.Operation{registry.OperationCreate},
		Mutate: func(_ context.Context, req *registry.AdmissionRequest) error {
			if req.User == nil {
				return nil
			}
			req.Object["spec"] = map[string]any{"x": json.Number("1e400")}
			return nil
		},
	}}})
	blobs := registry.Resource{Group: "example.dev", Version: "v1", Resource: "blobs", Kind: "Blob", Namespaced: true,
		Schema: &schema.Schema{Type: schema.TypeObject, XPreserveUnknownFields: true}}
	if err := api.Register(blobs); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	path := "/apis/example.dev/v1/namespaces/default/blobs"
	do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Blob","metadata":{"name":"r"},"spec":{"x":1e400}}`).status(t, 400, meta.StatusReasonBadRequest)
	if r := do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Blob","metadata":{"name":"b"}}`); r.code != 201 || !strings.Contains(string(r.body), `"x":1e400`) {
		t.Fatalf("create through the hook: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "PATCH", path+"/b", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	// A JSON patch decodes the patched document, stored number included.
	if r := do(t, ts, "PATCH", path+"/b", `[{"op":"add","path":"/metadata/labels/c","value":"d"}]`, "Content-Type", "application/json-patch+json"); r.code != 200 {
		t.Fatalf("JSON patch: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "DELETE", path+"/b", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
}
