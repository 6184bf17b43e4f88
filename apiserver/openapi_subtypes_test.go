package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// Built-in types publish their nested structs as definitions of their own,
// referenced from their fields, as kube-apiserver does (kubectl explain
// shows <ObjectReference>, not <Object>), in OpenAPI v3 and v2; the names
// never show in a document or in a CRD's schema, wherever they are put
// (a root, anyOf, an invalid or empty name).
func TestOpenAPISubtypeDefinitions(t *testing.T) {
	api, ts := newTestServer(t)
	var gizmo schema.Schema
	if err := json.Unmarshal([]byte(`{"x-kapi-definition":"dev.example.v1.Root","type":"object","properties":{
"spec":{"x-kapi-definition":"dev.example.v1.GizmoSpec","type":"object","properties":{"size":{"type":"integer"}}},
"odd":{"x-kapi-definition":"a/b","type":"object","anyOf":[{"x-kapi-definition":"dev.example.v1.Any","required":["x"]}]},
"empty":{"x-kapi-definition":"","type":"string"}}}`), &gizmo); err != nil {
		t.Fatal(err)
	}
	for _, res := range append(registry.Events(registry.EventOptions{}), registry.Leases(),
		registry.Resource{Group: "example.dev", Version: "v1", Resource: "gizmos", Kind: "Gizmo", Namespaced: true, Schema: &gizmo}) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) (map[string]any, string) {
		t.Helper()
		r := do(t, ts, "GET", path, "")
		if r.code != 200 {
			t.Fatalf("GET %s: %d", path, r.code)
		}
		if strings.Contains(string(r.body), "x-kapi-definition") {
			t.Errorf("GET %s shows x-kapi-definition", path)
		}
		return r.object(t), string(r.body)
	}
	v3ref := func(name string) string { return `{"allOf":[{"$ref":"#/components/schemas/` + name + `"}]}` }
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	core, _ := get("/openapi/v3/api/v1")
	schemas := core["components"].(map[string]any)["schemas"].(map[string]any)
	prop := func(schemas map[string]any, def string, path ...string) any {
		var v any = schemas[def]
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return v
	}
	for _, c := range []struct {
		def  string
		path []string
		ref  string
	}{
		{"io.k8s.api.core.v1.Event", []string{"properties", "involvedObject"}, "io.k8s.api.core.v1.ObjectReference"},
		{"io.k8s.api.core.v1.Event", []string{"properties", "related"}, "io.k8s.api.core.v1.ObjectReference"},
		{"io.k8s.api.core.v1.Event", []string{"properties", "source"}, "io.k8s.api.core.v1.EventSource"},
		{"io.k8s.api.core.v1.Event", []string{"properties", "series"}, "io.k8s.api.core.v1.EventSeries"},
		{"io.k8s.api.core.v1.Namespace", []string{"properties", "spec"}, "io.k8s.api.core.v1.NamespaceSpec"},
		{"io.k8s.api.core.v1.Namespace", []string{"properties", "status"}, "io.k8s.api.core.v1.NamespaceStatus"},
		{"io.k8s.api.core.v1.NamespaceStatus", []string{"properties", "conditions", "items"}, "io.k8s.api.core.v1.NamespaceCondition"},
	} {
		if got := js(prop(schemas, c.def, c.path...)); got != v3ref(c.ref) {
			t.Errorf("%s %v: %s, want a reference to %s", c.def, c.path, got, c.ref)
		}
	}
	if got := js(prop(schemas, "io.k8s.api.core.v1.ObjectReference", "properties", "kind", "type")); got != `"string"` {
		t.Errorf("ObjectReference definition: kind type %s", got)
	}
	events, _ := get("/openapi/v3/apis/events.k8s.io/v1")
	schemas = events["components"].(map[string]any)["schemas"].(map[string]any)
	if got := js(prop(schemas, "io.k8s.api.events.v1.Event", "properties", "series")); got != v3ref("io.k8s.api.events.v1.EventSeries") {
		t.Errorf("events.k8s.io Event series: %s", got)
	}
	if prop(schemas, "io.k8s.api.core.v1.ObjectReference") == nil || prop(schemas, "io.k8s.api.events.v1.EventSeries") == nil {
		t.Error("events.k8s.io/v1 document lacks the definitions its Event refers to")
	}
	leases, _ := get("/openapi/v3/apis/coordination.k8s.io/v1")
	if got := js(prop(leases["components"].(map[string]any)["schemas"].(map[string]any), "io.k8s.api.coordination.v1.Lease", "properties", "spec")); got != v3ref("io.k8s.api.coordination.v1.LeaseSpec") {
		t.Errorf("Lease spec: %s", got)
	}
	v2, _ := get("/openapi/v2")
	if got := js(prop(v2["definitions"].(map[string]any), "io.k8s.api.core.v1.Event", "properties", "involvedObject")); got != `{"$ref":"#/definitions/io.k8s.api.core.v1.ObjectReference"}` {
		t.Errorf("v2 Event involvedObject: %s", got)
	}
	gizmos, _ := get("/openapi/v3/apis/example.dev/v1")
	if got := js(prop(gizmos["components"].(map[string]any)["schemas"].(map[string]any), "dev.example.v1.Gizmo", "properties", "spec")); got != v3ref("dev.example.v1.GizmoSpec") {
		t.Errorf("Gizmo spec: %s", got)
	}
	crd, body := get(crdsPath + "/gizmos.example.dev")
	if !strings.Contains(body, `"size":{"type":"integer"}`) || crd["kind"] != "CustomResourceDefinition" {
		t.Errorf("gizmos CRD: %.300s", body)
	}
}
