package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The type the version tests serve: example.dev Widget in four versions.
// v1 (the storage version and the hub) has spec.color and spec.replicas;
// v2 has them as spec.paint.color and spec.scale.replicas, with its own
// printer columns, selectable field and scale path; v1beta1 is v1's shape,
// deprecated; v1alpha1 is v1's shape, not served.
const (
	vwV1Schema = `{"type":"object","properties":{
 "spec":{"type":"object","properties":{"size":{"type":"integer"},"color":{"type":"string"},"replicas":{"type":"integer"}}},
 "status":{"type":"object","properties":{"replicas":{"type":"integer"},"phase":{"type":"string"}}}}}`
	vwV2Schema = `{"type":"object","properties":{
 "spec":{"type":"object","properties":{"size":{"type":"integer"},
  "paint":{"type":"object","properties":{"color":{"type":"string"}}},
  "scale":{"type":"object","properties":{"replicas":{"type":"integer"}}}}},
 "status":{"type":"object","properties":{"replicas":{"type":"integer"},"phase":{"type":"string"}}}}}`

	vwPath   = "/apis/example.dev/%s/namespaces/default/widgets"
	vwLabel  = "convert" // a label whose value "fail" or "panic" breaks the v2 conversion
	vwFailed = "fail"
)

// vwV2Message is the protobuf form of v2 (v1 has none: JSON only).
var vwV2Message = codec.MustMessage("Widget",
	codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
	codec.Field{Name: "spec", Number: 2, Kind: codec.MessageKind, Message: codec.MustMessage("WidgetSpec",
		codec.Field{Name: "size", Number: 1, Kind: codec.Int64},
		codec.Field{Name: "paint", Number: 2, Kind: codec.MessageKind, Message: codec.MustMessage("Paint",
			codec.Field{Name: "color", Number: 1, Kind: codec.String})},
		codec.Field{Name: "scale", Number: 3, Kind: codec.MessageKind, Message: codec.MustMessage("WidgetScale",
			codec.Field{Name: "replicas", Number: 1, Kind: codec.Int32})})},
	codec.Field{Name: "status", Number: 3, Kind: codec.MessageKind, Message: codec.MustMessage("WidgetStatus",
		codec.Field{Name: "replicas", Number: 1, Kind: codec.Int32},
		codec.Field{Name: "phase", Number: 2, Kind: codec.String})},
)

// vwPathOf is the widgets collection of version v in namespace default.
func vwPathOf(v string) string { return fmt.Sprintf(vwPath, v) }

// versionedWidgets is the registration and a count of v1 → v2 conversions.
type versionedWidgets struct {
	toV2 atomic.Int64 // calls of the v2 spoke's FromHub
	// admission records, per version, the apiVersion of the objects the
	// version's admission hook saw.
	admission chan string
}

func vwSchema(t testing.TB, src string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(src), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// moveField moves the value at path from to path to (each a list of keys),
// creating maps on the way; nothing when from is absent.
func moveField(obj registry.Object, from, to []string) {
	cur := obj
	for _, k := range from[:len(from)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
	v, ok := cur[from[len(from)-1]]
	if !ok {
		return
	}
	delete(cur, from[len(from)-1])
	dst := obj
	for _, k := range to[:len(to)-1] {
		next, ok := dst[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			dst[k] = next
		}
		dst = next
	}
	dst[to[len(to)-1]] = v
}

// breakOnLabel fails or panics when obj carries the convert label.
func breakOnLabel(obj registry.Object) error {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	switch labels[vwLabel] {
	case vwFailed:
		return fmt.Errorf("paint is not representable")
	case "panic":
		panic("the paint spilled")
	}
	return nil
}

// admissionSeen says what a hook saw: the hook's name, the request's
// version, and the apiVersion and spec of the object and the old object.
func admissionSeen(hook string, req *registry.AdmissionRequest) string {
	s := fmt.Sprintf("%s: %s %s %s %v", hook, req.Operation, req.Kind.Version, req.Object["apiVersion"], req.Object["spec"])
	if req.OldObject != nil {
		s += fmt.Sprintf(" / %s %v", req.OldObject["apiVersion"], req.OldObject["spec"])
	}
	return s
}

// definition returns the four versions, storage version v1.
func (vw *versionedWidgets) definition(t testing.TB) registry.Versions {
	t.Helper()
	base := registry.Resource{Group: "example.dev", Resource: "widgets", Kind: "Widget", Namespaced: true,
		ShortNames: []string{"wd"}, Categories: []string{"all"}}
	v1 := base
	v1.Version, v1.Schema = "v1", vwSchema(t, vwV1Schema)
	v1.Subresources = registry.Subresources{Status: true, Scale: &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}}
	v1.PrinterColumns = []registry.Column{
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Color", Type: "string", JSONPath: ".spec.color"},
	}
	v1.SelectableFields = []string{".spec.color"}
	v2 := base
	v2.Version, v2.Schema = "v2", vwSchema(t, vwV2Schema)
	v2.Subresources = registry.Subresources{Status: true, Scale: &registry.Scale{SpecReplicasPath: ".spec.scale.replicas", StatusReplicasPath: ".status.replicas"}}
	v2.PrinterColumns = []registry.Column{
		{Name: "Paint", Type: "string", JSONPath: ".spec.paint.color"},
		{Name: "Size", Type: "integer", JSONPath: ".spec.size", Priority: 1},
	}
	v2.SelectableFields = []string{".spec.paint.color"}
	v2.Protobuf = vwV2Message
	beta := base
	beta.Version, beta.Schema, beta.Deprecated = "v1beta1", vwSchema(t, vwV1Schema), true
	alpha := base
	alpha.Version, alpha.Schema, alpha.Unserved = "v1alpha1", vwSchema(t, vwV1Schema), true
	if vw.admission != nil {
		for _, r := range []*registry.Resource{&v1, &v2} {
			r.Admission = []registry.AdmissionHook{{Name: "record-" + r.Version, Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
				vw.admission <- admissionSeen(r.Version, req)
				return nil
			}}}
		}
	}
	same := registry.Spoke{
		ToHub:   func(obj registry.Object) (registry.Object, error) { return obj, nil },
		FromHub: func(obj registry.Object) (registry.Object, error) { return obj, nil },
	}
	return registry.Versions{
		Versions: []registry.Resource{v1, v2, beta, alpha},
		Storage:  "v1",
		Conversion: registry.Conversion{Hub: "v1", Spokes: map[string]registry.Spoke{
			"v1beta1":  same,
			"v1alpha1": same,
			"v2": {
				ToHub: func(obj registry.Object) (registry.Object, error) {
					moveField(obj, []string{"spec", "paint", "color"}, []string{"spec", "color"})
					moveField(obj, []string{"spec", "scale", "replicas"}, []string{"spec", "replicas"})
					if spec, ok := obj["spec"].(map[string]any); ok {
						delete(spec, "paint")
						delete(spec, "scale")
					}
					return obj, nil
				},
				FromHub: func(obj registry.Object) (registry.Object, error) {
					vw.toV2.Add(1)
					if err := breakOnLabel(obj); err != nil {
						return nil, err
					}
					moveField(obj, []string{"spec", "color"}, []string{"spec", "paint", "color"})
					moveField(obj, []string{"spec", "replicas"}, []string{"spec", "scale", "replicas"})
					return obj, nil
				},
			},
		}},
	}
}

// newVersionsServer starts a server (anonymous access, controllers
// running) serving namespaces, configmaps and the versioned widgets.
// options, when given, changes the server's Config.
func newVersionsServer(t testing.TB, vw *versionedWidgets, options ...func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	return serveVersions(t, vw.definition(t), options...)
}

// serveVersions is newVersionsServer with the versioned type def.
func serveVersions(t testing.TB, def registry.Versions, options ...func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := Config{Storage: store, MaxRequestBodyBytes: 1 << 20, AllowAnonymous: true}
	for _, o := range options {
		o(&cfg)
	}
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	if err := api.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return api, ts
}

// vwCreate creates a widget through v1 (size, color, replicas) and returns
// its resourceVersion.
func vwCreate(t testing.TB, ts *httptest.Server, name, color string, labels string) string {
	t.Helper()
	if labels == "" {
		labels = "{}"
	}
	r := do(t, ts, "POST", vwPathOf("v1"), fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q,"labels":%s},"spec":{"size":1,"color":%q,"replicas":2}}`, name, labels, color))
	if r.code != 201 {
		t.Fatalf("create %s: %d %s", name, r.code, r.body)
	}
	return str(r.object(t), "metadata", "resourceVersion")
}

// paint returns spec.paint.color of a v2 object.
func paint(obj map[string]any) string { return str(obj, "spec", "paint", "color") }

// Every object is served in the version of the request, whichever version
// it was written through.
func TestVersionsGetAndList(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	for i, c := range []string{"red", "green", "blue"} {
		vwCreate(t, ts, fmt.Sprintf("w%d", i), c, "")
	}
	r := do(t, ts, "POST", vwPathOf("v2"), `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":4,"paint":{"color":"teal"},"scale":{"replicas":5}}}`)
	if r.code != 201 || paint(r.object(t)) != "teal" || str(r.object(t), "apiVersion") != "example.dev/v2" {
		t.Fatalf("create through v2: %d %s", r.code, r.body)
	}

	g := do(t, ts, "GET", vwPathOf("v2")+"/w0", "")
	if o := g.object(t); g.code != 200 || o["apiVersion"] != "example.dev/v2" || paint(o) != "red" || str(o, "spec", "scale", "replicas") != "2" || str(o, "spec", "color") != "" {
		t.Errorf("get w0 through v2: %d %s", g.code, g.body)
	}
	g = do(t, ts, "GET", vwPathOf("v1")+"/w3", "")
	if o := g.object(t); g.code != 200 || o["apiVersion"] != "example.dev/v1" || str(o, "spec", "color") != "teal" || str(o, "spec", "replicas") != "5" || str(o, "spec", "paint") != "" {
		t.Errorf("get w3 through v1: %d %s", g.code, g.body)
	}

	wantColor := map[string]string{"w0": "red", "w1": "green", "w2": "blue", "w3": "teal"}
	checkItems := func(what, v string, items []any) {
		t.Helper()
		for _, it := range items {
			o := it.(map[string]any)
			color := str(o, "spec", "color")
			if v == "v2" {
				color = paint(o)
			}
			if o["apiVersion"] != "example.dev/"+v || color != wantColor[str(o, "metadata", "name")] {
				t.Errorf("%s through %s: item %v", what, v, o)
			}
		}
	}
	for _, v := range []string{"v1", "v2"} {
		for _, q := range []string{"", "?resourceVersion=0"} {
			l := do(t, ts, "GET", vwPathOf(v)+q, "").object(t)
			items, _ := l["items"].([]any)
			if l["apiVersion"] != "example.dev/"+v || l["kind"] != "WidgetList" || len(items) != 4 {
				t.Fatalf("list%s through %s: %v", q, v, l)
			}
			checkItems("list"+q, v, items)
		}
		// Chunked: two pages of two.
		var all []any
		cont := ""
		for page := 0; ; page++ {
			q := "?limit=2"
			if cont != "" {
				q += "&continue=" + cont
			}
			l := do(t, ts, "GET", vwPathOf(v)+q, "").object(t)
			items, _ := l["items"].([]any)
			all = append(all, items...)
			cont = str(l, "metadata", "continue")
			if cont == "" {
				break
			}
			if page > 2 {
				t.Fatalf("chunked list through %s does not end", v)
			}
		}
		if len(all) != 4 {
			t.Fatalf("chunked list through %s: %d items", v, len(all))
		}
		checkItems("chunked list", v, all)
	}

	// A continue token of one version's list is good for the other's.
	l := do(t, ts, "GET", vwPathOf("v1")+"?limit=1", "").object(t)
	rest := do(t, ts, "GET", vwPathOf("v2")+"?limit=10&continue="+str(l, "metadata", "continue"), "")
	if items, _ := rest.object(t)["items"].([]any); rest.code != 200 || len(items) != 3 {
		t.Errorf("a v1 continue token through v2: %d %s", rest.code, rest.body)
	}
}

// Tables carry each version's printer columns; PartialObjectMetadata the
// version of the request.
func TestVersionsTableAndMetadata(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "w0", "red", "")
	const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"
	for v, want := range map[string]string{"v1": "Name,Size,Color", "v2": "Name,Paint,Size"} {
		for _, path := range []string{vwPathOf(v), vwPathOf(v) + "/w0", vwPathOf(v) + "?resourceVersion=0"} {
			tbl := do(t, ts, "GET", path, "", "Accept", tableAccept).object(t)
			var names []string
			for _, c := range tbl["columnDefinitions"].([]any) {
				names = append(names, c.(map[string]any)["name"].(string))
			}
			if got := fmt.Sprint(names); got != fmt.Sprint(strings.Split(want, ",")) {
				t.Errorf("%s: columns %v, want %s", path, names, want)
			}
			rows := tbl["rows"].([]any)
			cells := rows[0].(map[string]any)["cells"].([]any)
			if len(rows) != 1 || fmt.Sprint(cells[:3]) != map[string]string{"v1": "[w0 1 red]", "v2": "[w0 red 1]"}[v] {
				t.Errorf("%s: rows %v", path, rows)
			}
		}
	}
	const pomAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	for _, v := range []string{"v1", "v2"} {
		r := do(t, ts, "GET", vwPathOf(v), "", "Accept", pomAccept)
		l := r.object(t)
		items, _ := l["items"].([]any)
		if r.code != 200 || l["kind"] != "PartialObjectMetadataList" || len(items) != 1 {
			t.Fatalf("metadata list through %s: %d %s", v, r.code, r.body)
		}
		if it := items[0].(map[string]any); it["apiVersion"] != "meta.k8s.io/v1" || it["kind"] != "PartialObjectMetadata" || str(it, "metadata", "name") != "w0" || it["spec"] != nil {
			t.Errorf("metadata list through %s: %v", v, it)
		}
		r = do(t, ts, "GET", vwPathOf(v)+"/w0", "", "Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
		if o := r.object(t); r.code != 200 || o["kind"] != "PartialObjectMetadata" || str(o, "metadata", "name") != "w0" {
			t.Errorf("metadata get through %s: %d %s", v, r.code, r.body)
		}
	}
}

func registryConversionNone() registry.Conversion { return registry.Conversion{None: true} }
