package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// widgetSeeds are widgets in either version's form; each is tried as a v1
// and as a v2 widget (what a version does not know is pruned when it is
// admitted).
var widgetSeeds = []string{
	`{"spec":{"size":1}}`,
	`{"spec":{"size":3,"color":"red"}}`,
	`{"spec":{"size":3,"color":""}}`,
	`{"metadata":{"annotations":{"example.dev/finish":"matte"}},"spec":{"size":2,"color":"blue"}}`,
	`{"metadata":{"annotations":{"example.dev/finish":""}},"spec":{"size":2}}`,
	`{"metadata":{"annotations":{"example.dev/finish":"gloss","note":"keep"},"labels":{"app":"demo"}},"spec":{"size":0}}`,
	`{"metadata":{"labels":{"a":"b"}},"spec":{"size":5,"replicas":0,"tags":[],"ports":[]}}`,
	`{"spec":{"size":5,"replicas":2,"tags":["x","y"],"ports":[{"name":"http","port":80,"protocol":""},{"name":"dns","port":53,"protocol":"UDP"}]}}`,
	`{"spec":{"size":1},"status":{"replicas":0,"phase":"","selector":""}}`,
	`{"spec":{"size":1},"status":{"replicas":2,"phase":"Ready","selector":"app=demo"}}`,
	`{"spec":{"size":1},"status":{}}`,
	`{"spec":{"size":4,"appearance":{}}}`,
	`{"spec":{"size":4,"appearance":{"color":"green","finish":"satin"}}}`,
	`{"spec":{"size":4,"appearance":{"color":"","finish":""}}}`,
	`{"spec":{"size":4,"appearance":{"finish":"matte"}},"status":{"phase":"Pending"}}`,
	`{"metadata":{"annotations":{"other":"x"}},"spec":{"size":9007199254740993,"appearance":{"color":"é\u0000"}}}`,
	`{"spec":{"size":1.0}}`,
	`{"spec":{"size":1,"unknown":true},"extra":1}`,
}

// FuzzWidgetConversion checks the conversions between example.dev/v1 and
// example.dev/v2 widgets (widget_v2.go) on every widget that one of the
// versions admits, as the server runs them:
//
//   - written in its version and read back in it, the widget is unchanged
//     (for v2: v2 → v1, the hub and storage version → v2);
//   - read in the other version, it passes that version's schema and
//     validation, and written back there unchanged and read in its own
//     version again, it is still unchanged (for v1: v1 → v2 → v1);
//   - the conversion functions themselves, called without the registry's
//     recover, neither panic nor fail, and round-trip it.
//
// "Unchanged" compares spec, status, labels and annotations (the rest of
// metadata is the server's) as JSON, numbers by value (see comparedParts).
//
// The seeds run with go test; to fuzz, for as long as -fuzztime says:
//
//	go test ./examples/quickstart -run '^$' -fuzz FuzzWidgetConversion -fuzztime 10m
func FuzzWidgetConversion(f *testing.F) {
	for _, s := range widgetSeeds {
		f.Add([]byte(s))
	}
	h := newConversionHarness(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []string{"v1", "v2"} {
			h.check(t, data, v)
		}
	})
}

// conversionHarness is a quickstart API (newAPI) on in-memory Badger.
type conversionHarness struct {
	stores map[string]*registry.Store // by version
	spoke  registry.Spoke             // v2 ↔ v1
	n      int                        // names objects
}

func newConversionHarness(tb testing.TB) *conversionHarness {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	api, err := newAPI(context.Background(), apiserver.Config{Storage: store, AllowAnonymous: true}, time.Hour, "v1")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { api.Close() })
	vs, err := widgetVersions("v1")
	if err != nil {
		tb.Fatal(err)
	}
	h := &conversionHarness{stores: map[string]*registry.Store{}, spoke: vs.Conversion.Spokes["v2"]}
	for _, v := range []string{"v1", "v2"} {
		st, ok := api.Registry().Store(meta.GroupVersionResource{Group: "example.dev", Version: v, Resource: "widgets"})
		if !ok {
			tb.Fatalf("example.dev/%s widgets is not served", v)
		}
		h.stores[v] = st
	}
	return h
}

// check runs the properties for data as a widget in version v, if v admits
// it.
func (h *conversionHarness) check(t *testing.T, data []byte, v string) {
	ctx := context.Background()
	other := map[string]string{"v1": "v2", "v2": "v1"}[v]
	st, ost := h.stores[v], h.stores[other]
	obj, status, ok := h.admit(t, data, v)
	if !ok {
		return
	}
	name := meta.GetName(obj)
	defer func() {
		if _, err := st.Delete(ctx, "default", name, registry.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}()
	if status != nil {
		obj["status"] = status
		res, err := st.Update(ctx, "default", name, obj, registry.WriteOptions{Subresource: "status"})
		switch {
		case meta.ReasonOf(err) == meta.StatusReasonInvalid:
			delete(obj, "status") // a status the schema refuses: check the rest
		case err != nil:
			t.Fatalf("%s: update status %s: %v", v, status, err)
		default:
			obj = res.Object
		}
	}

	back := h.get(t, v, name)
	h.same(t, fmt.Sprintf("%s written and read in %s", v, v), obj, back)

	there := h.get(t, other, name)
	if errs := schema.Validate(map[string]any(there), ost.Resource().Schema); len(errs) > 0 {
		t.Fatalf("%s read in %s does not pass %s's schema: %v\n%s", v, other, other, errs, js(there))
	}
	if unknown := schema.Prune(clone(t, there), ost.Resource().Schema); len(unknown) > 0 {
		t.Fatalf("%s read in %s has fields %s does not have: %v\n%s", v, other, other, unknown, js(there))
	}
	if val := ost.Resource().Strategy.Validate; val != nil {
		if errs := val(ctx, there); len(errs) > 0 {
			t.Fatalf("%s read in %s does not pass %s's validation: %v\n%s", v, other, other, errs, js(there))
		}
	}
	// Written back with a label more (a write that changes nothing is not
	// stored), which the comparison ignores.
	md := there["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]any{}
	}
	labels[touchedLabel] = "yes"
	md["labels"] = labels
	if _, err := ost.Update(ctx, "default", name, there, registry.WriteOptions{}); err != nil {
		t.Fatalf("%s read in %s and written back: %v\n%s", v, other, err, js(there))
	}
	h.same(t, fmt.Sprintf("%s read in %s, written back and read in %s", v, other, v), obj, h.get(t, v, name))

	// The functions alone: a panic here fails the fuzz with its stack.
	toHub, fromHub := h.spoke.ToHub, h.spoke.FromHub
	if v == "v1" {
		toHub, fromHub = fromHub, toHub
	}
	mid, err := toHub(clone(t, obj))
	if err != nil {
		t.Fatalf("converting %s: %v\n%s", v, err, js(obj))
	}
	round, err := fromHub(mid)
	if err != nil {
		t.Fatalf("converting %s back to %s: %v\n%s", other, v, err, js(mid))
	}
	h.same(t, fmt.Sprintf("%s → %s → %s by the conversion functions", v, other, v), obj, round)
}

// admit creates the widget in data in version v under a name of its own,
// with only the labels and annotations of its metadata; ok is false when v
// does not admit it (not JSON, or refused as invalid). status is data's
// status, which a create drops (it is written through /status).
func (h *conversionHarness) admit(t *testing.T, data []byte, v string) (obj registry.Object, status any, ok bool) {
	raw, _, err := codec.DecodeJSON(data)
	in, isObj := raw.(map[string]any)
	if err != nil || !isObj {
		return nil, nil, false
	}
	h.n++
	md := map[string]any{"name": fmt.Sprintf("w%d", h.n)}
	if old, _ := in["metadata"].(map[string]any); old != nil {
		for _, k := range []string{"labels", "annotations"} {
			if x, ok := old[k]; ok {
				md[k] = x
			}
		}
	}
	in["metadata"] = md
	in["apiVersion"], in["kind"] = "example.dev/"+v, "Widget"
	status = in["status"]
	res, err := h.stores[v].Create(context.Background(), "default", in, registry.WriteOptions{})
	switch meta.ReasonOf(err) {
	case meta.StatusReasonInvalid, meta.StatusReasonBadRequest:
		return nil, nil, false
	}
	if err != nil {
		t.Fatalf("create in %s: %v\n%s", v, err, data)
	}
	return res.Object, status, true
}

func (h *conversionHarness) get(t *testing.T, v, name string) registry.Object {
	t.Helper()
	obj, err := h.stores[v].GetObject(context.Background(), "default", name)
	if err != nil {
		t.Fatalf("get %s in %s: %v", name, v, err)
	}
	return obj
}

// same fails t unless a and b have the same spec, status, labels and
// annotations.
func (h *conversionHarness) same(t *testing.T, what string, a, b registry.Object) {
	t.Helper()
	pa, pb := comparedParts(a), comparedParts(b)
	if !equalJSON(pa, pb) {
		t.Fatalf("%s changes the widget:\nbefore %s\nafter  %s", what, js(pa), js(pb))
	}
}

// touchedLabel marks a widget written back in the other version.
const touchedLabel = "test.example.dev/touched"

// comparedParts is what a conversion must keep: spec, status, labels
// (but touchedLabel) and annotations. An empty map of labels or annotations
// counts as none: kube-apiserver drops it, and so does every conversion
// through meta.ObjectMeta.
func comparedParts(obj registry.Object) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	parts := map[string]any{"spec": obj["spec"], "status": obj["status"]}
	for _, k := range []string{"labels", "annotations"} {
		m, _ := md[k].(map[string]any)
		if k == "labels" && m[touchedLabel] != nil {
			m = maps.Clone(m)
			delete(m, touchedLabel)
		}
		if len(m) > 0 {
			parts[k] = m
		}
	}
	return parts
}

// equalJSON compares two decoded JSON values, numbers by value (1, 1.0
// and 1e0 are equal).
func equalJSON(a, b any) bool {
	if ra, ok := number(a); ok {
		rb, ok := number(b)
		return ok && ra.Cmp(rb) == 0
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// number returns a JSON number's exact value.
func number(x any) (*big.Rat, bool) {
	if !meta.IsNumber(x) {
		return nil, false
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(string(b))
	return r, ok
}

// clone copies obj through JSON, numbers exact.
func clone(t *testing.T, obj registry.Object) registry.Object {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := codec.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func js(x any) string {
	b, _ := json.Marshal(x)
	return string(b)
}

// The two forms of one widget: v2's spec.appearance is v1's spec.color and
// the annotation example.dev/finish, which v2 never shows and refuses.
func TestWidgetV2Forms(t *testing.T) {
	ctx := context.Background()
	h := newConversionHarness(t)
	create := func(v, body string) registry.Object {
		t.Helper()
		raw, _, err := codec.DecodeJSON([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.stores[v].Create(ctx, "default", raw.(map[string]any), registry.WriteOptions{})
		if err != nil {
			t.Fatalf("create in %s: %v", v, err)
		}
		return res.Object
	}
	want := func(obj registry.Object, part, wantJSON string) {
		t.Helper()
		var w any
		if err := json.Unmarshal([]byte(wantJSON), &w); err != nil {
			t.Fatal(err)
		}
		got := comparedParts(obj)[part]
		if !equalJSON(got, w) {
			t.Errorf("%s %s = %s, want %s", obj["apiVersion"], part, js(got), wantJSON)
		}
	}

	create("v2", `{"metadata":{"name":"a","annotations":{"note":"x"}},"spec":{"size":3,"appearance":{"color":"red","finish":"matte"}}}`)
	v1 := h.get(t, "v1", "a")
	want(v1, "spec", `{"size":3,"color":"red"}`)
	want(v1, "annotations", `{"note":"x","example.dev/finish":"matte"}`)
	v2 := h.get(t, "v2", "a")
	want(v2, "spec", `{"size":3,"appearance":{"color":"red","finish":"matte"}}`)
	want(v2, "annotations", `{"note":"x"}`)

	create("v1", `{"metadata":{"name":"b","annotations":{"example.dev/finish":"gloss"}},"spec":{"size":1,"color":"blue"}}`)
	v2 = h.get(t, "v2", "b")
	want(v2, "spec", `{"size":1,"appearance":{"color":"blue","finish":"gloss"}}`)
	want(v2, "annotations", `null`)

	// No finish: no annotation, in either direction.
	create("v2", `{"metadata":{"name":"c"},"spec":{"size":2}}`)
	want(h.get(t, "v2", "c"), "spec", `{"size":2,"appearance":{}}`)
	v1 = h.get(t, "v1", "c")
	want(v1, "spec", `{"size":2}`)
	want(v1, "annotations", `null`)

	_, err := h.stores["v2"].Create(ctx, "default", registry.Object{"metadata": map[string]any{"name": "d",
		"annotations": map[string]any{finishAnnotation: "matte"}}, "spec": map[string]any{"size": 1}}, registry.WriteOptions{})
	if se, ok := err.(*meta.StatusError); !ok || meta.ReasonOf(err) != meta.StatusReasonInvalid ||
		len(se.Status.Details.Causes) != 1 || se.Status.Details.Causes[0].Field != "metadata.annotations[example.dev/finish]" {
		t.Errorf("v2 create with the annotation %s: %v, want 422 Invalid for metadata.annotations[example.dev/finish]", finishAnnotation, err)
	}
}
