package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// Null or empty labels, annotations, finalizers, ownerReferences and
// generateName are left out of every object written, and so are a
// ConfigMap's empty data and binaryData, as kube-apiserver leaves them out
// (it decodes into Go structs whose fields are omitempty): after a create,
// a patch that removes the last label, a PUT, and for custom resources too.
// The managedFields are computed on what is stored, so a create of empty
// values alone records no entry.
func TestOmitEmptyAsKube(t *testing.T) {
	_, ts := newTestServer(t)
	emptyMeta := `"labels":null,"annotations":{},"finalizers":[],"ownerReferences":null,"generateName":""`
	noEmpties := func(what string, o map[string]any, fields ...string) {
		t.Helper()
		md, _ := o["metadata"].(map[string]any)
		for _, k := range []string{"labels", "annotations", "finalizers", "ownerReferences", "generateName"} {
			if v, ok := md[k]; ok {
				t.Errorf("%s: metadata.%s = %#v, want it left out", what, k, v)
			}
		}
		for _, k := range fields {
			if v, ok := o[k]; ok {
				t.Errorf("%s: %s = %#v, want it left out", what, k, v)
			}
		}
	}
	r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"e",`+emptyMeta+`},"data":{},"binaryData":null}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	created := r.object(t)
	noEmpties("create", created, "data", "binaryData")
	if mf, ok := created["metadata"].(map[string]any)["managedFields"]; ok {
		t.Errorf("create of empty values only: managedFields %v, want none (an empty field set)", mf)
	}
	noEmpties("get", do(t, ts, "GET", cmPath+"/e", "").object(t), "data", "binaryData")

	merge := []string{"Content-Type", "application/merge-patch+json"}
	if r := do(t, ts, "PATCH", cmPath+"/e", `{"metadata":{"labels":{"a":"b"}},"data":{"k":"v"}}`, merge...); r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PATCH", cmPath+"/e", `{"metadata":{"labels":{"a":null}},"data":{"k":null}}`, merge...)
	noEmpties("the last label and key removed", r.object(t), "data")
	r = do(t, ts, "PUT", cmPath+"/e", `{"metadata":{"name":"e","labels":{},"finalizers":[]},"data":{}}`)
	noEmpties("put", r.object(t), "data")

	r = do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w",`+emptyMeta+`},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create widget: %d %s", r.code, r.body)
	}
	noEmpties("custom resource", r.object(t))
	// A PUT whose only differences are empty metadata values writes
	// nothing.
	w := r.object(t)
	r = do(t, ts, "PUT", wdPath+"/w", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"`+
		str(w, "metadata", "resourceVersion")+`","labels":{},"finalizers":[]},"spec":{"size":1}}`)
	if got := r.object(t); str(got, "metadata", "resourceVersion") != str(w, "metadata", "resourceVersion") || got["metadata"].(map[string]any)["generation"] != w["metadata"].(map[string]any)["generation"] {
		t.Errorf("a PUT of empty values only wrote: %s", r.body)
	}
}

// A namespace gets kube-apiserver's finalizer whatever finalizers its
// creator asked for, and /finalize with none leaves spec.finalizers out.
func TestNamespaceFinalizersAsKube(t *testing.T) {
	_, ts := newTestServer(t)
	for body, want := range map[string]string{
		`{"metadata":{"name":"a"},"spec":{"finalizers":["example.com/x"]}}`: `["example.com/x","kubernetes"]`,
		`{"metadata":{"name":"b"},"spec":{"finalizers":[]}}`:                `["kubernetes"]`,
		`{"metadata":{"name":"c"}}`:                                         `["kubernetes"]`,
	} {
		r := do(t, ts, "POST", "/api/v1/namespaces", body)
		if r.code != 201 {
			t.Fatalf("create %s: %d %s", body, r.code, r.body)
		}
		got, _ := json.Marshal(r.object(t)["spec"].(map[string]any)["finalizers"])
		if string(got) != want {
			t.Errorf("create %s: spec.finalizers %s, want %s", body, got, want)
		}
	}
	r := do(t, ts, "PUT", "/api/v1/namespaces/c/finalize", `{"metadata":{"name":"c"},"spec":{"finalizers":[]}}`)
	if r.code != 200 {
		t.Fatalf("finalize: %d %s", r.code, r.body)
	}
	if spec := r.object(t)["spec"].(map[string]any); len(spec) != 0 {
		t.Errorf("after /finalize with no finalizers: spec %v, want {}", spec)
	}
}

// A server-side apply whose configuration sets empty labels and data keeps
// them in its managedFields, as kube-apiserver does, while the object
// leaves them out; applying it again to a ConfigMap, a second later
// (managedFields times are in seconds), changes nothing, while a custom
// resource is written again, as kube-apiserver writes it.
func TestOmitEmptyApplyIsNoop(t *testing.T) {
	_, ts := newTestServer(t)
	apply := []string{"Content-Type", "application/apply-patch+yaml"}
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{}},"data":{},"binaryData":{"k":"dg=="}}`
	var rvs, wrvs []string
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		r := do(t, ts, "PATCH", cmPath+"/a?fieldManager=m", body, apply...)
		// A custom resource's re-apply writes, as kube-apiserver's does:
		// it compares the objects as they are, empty labels included.
		w := do(t, ts, "PATCH", wdPath+"/w?fieldManager=m", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{}},"spec":{"size":1}}`, apply...)
		if w.code != 200 && w.code != 201 {
			t.Fatalf("apply widget: %d %s", w.code, w.body)
		}
		wrvs = append(wrvs, str(w.object(t), "metadata", "resourceVersion"))
		if r.code != 200 && r.code != 201 {
			t.Fatalf("apply: %d %s", r.code, r.body)
		}
		o := r.object(t)
		if _, ok := o["data"]; ok {
			t.Errorf("data = %v, want it left out", o["data"])
		}
		if _, ok := o["metadata"].(map[string]any)["labels"]; ok {
			t.Errorf("labels kept: %v", o["metadata"])
		}
		rvs = append(rvs, str(o, "metadata", "resourceVersion"))
		mf, _ := o["metadata"].(map[string]any)["managedFields"].([]any)
		if len(mf) != 1 {
			t.Fatalf("managedFields %v, want the applier's entry", mf)
		}
		fields, _ := mf[0].(map[string]any)["fieldsV1"].(map[string]any)
		if _, ok := fields["f:data"]; !ok {
			t.Errorf("the applier's fields %v lack f:data", fields)
		}
	}
	if rvs[1] != rvs[0] {
		t.Errorf("resourceVersions %v: a re-apply of the same configuration wrote", rvs)
	}
	if wrvs[1] == wrvs[0] {
		t.Errorf("custom resource: resourceVersions %v, want a write (its applier's time moves), as kube-apiserver", wrvs)
	}
}

// A type's own OmitEmpty fields are left out before its prepare hooks
// compare the update with the stored object: a PUT that differs only by an
// empty one neither writes nor moves the generation.
func TestOmitEmptyFieldsBeforeGeneration(t *testing.T) {
	api, ts := newTestServer(t)
	res := widgetResource(t)
	res.Resource, res.Kind, res.ShortNames = "gadgets", "Gadget", nil
	res.Schema.Properties["extra"] = &schema.Schema{Type: "object", AdditionalProperties: &schema.SchemaOrBool{Allows: true, Schema: &schema.Schema{Type: "string"}}}
	res.Options.OmitEmpty = []string{"extra"}
	if err := api.Register(res); err != nil {
		t.Fatal(err)
	}
	path := "/apis/example.dev/v1/namespaces/default/gadgets"
	r := do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1},"extra":{}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	g := r.object(t)
	if _, ok := g["extra"]; ok {
		t.Errorf("extra: {} kept: %s", r.body)
	}
	rv := str(g, "metadata", "resourceVersion")
	r = do(t, ts, "PUT", path+"/g", `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g","resourceVersion":"`+rv+`"},"spec":{"size":1},"extra":{}}`)
	if got := r.object(t); str(got, "metadata", "resourceVersion") != rv || str(got, "metadata", "generation") != "1" {
		t.Errorf("a PUT differing by an empty extra wrote or moved the generation: %s", r.body)
	}
}

// A conversion that leaves labels or annotations empty stores neither.
func TestOmitEmptyAfterConversion(t *testing.T) {
	def := (&versionedWidgets{}).definition(t)
	spoke := def.Conversion.Spokes["v2"]
	toHub := spoke.ToHub
	spoke.ToHub = func(obj registry.Object) (registry.Object, error) {
		out, err := toHub(obj)
		if md, ok := out["metadata"].(map[string]any); ok && err == nil {
			md["annotations"] = map[string]any{} // a conversion that empties them
		}
		return out, err
	}
	def.Conversion.Spokes["v2"] = spoke
	_, ts := serveVersions(t, def)
	r := do(t, ts, "POST", vwPathOf("v2"), `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"c","annotations":{"a":"b"}},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create through v2: %d %s", r.code, r.body)
	}
	stored := do(t, ts, "GET", vwPathOf("v1")+"/c", "").object(t)
	if v, ok := stored["metadata"].(map[string]any)["annotations"]; ok {
		t.Errorf("stored through the conversion: annotations %#v, want them left out", v)
	}
}

// A type registered in several versions keeps the typed re-apply: with
// TypedDecoding, applying again a configuration with labels: {} a second
// later writes nothing, through every version's field manager.
func TestOmitEmptyApplyIsNoopAcrossVersions(t *testing.T) {
	def := (&versionedWidgets{}).definition(t)
	for i := range def.Versions {
		def.Versions[i].Options.TypedDecoding = true
	}
	_, ts := serveVersions(t, def)
	apply := []string{"Content-Type", "application/apply-patch+yaml"}
	body := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{}},"spec":{"size":1}}`
	var rvs []string
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		r := do(t, ts, "PATCH", vwPathOf("v1")+"/a?fieldManager=m", body, apply...)
		if r.code != 200 && r.code != 201 {
			t.Fatalf("apply: %d %s", r.code, r.body)
		}
		rvs = append(rvs, str(r.object(t), "metadata", "resourceVersion"))
	}
	if rvs[1] != rvs[0] {
		t.Errorf("resourceVersions %v: the re-apply wrote", rvs)
	}
}
