package apiserver

import (
	"testing"
	"time"
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
}

// A server-side apply whose configuration sets empty labels and data keeps
// them in its managedFields, as kube-apiserver does, while the object
// leaves them out; applying it again, a second later (managedFields times
// are in seconds), changes nothing.
func TestOmitEmptyApplyIsNoop(t *testing.T) {
	_, ts := newTestServer(t)
	apply := []string{"Content-Type", "application/apply-patch+yaml"}
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{}},"data":{},"binaryData":{"k":"dg=="}}`
	var rvs []string
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		r := do(t, ts, "PATCH", cmPath+"/a?fieldManager=m", body, apply...)
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
}
