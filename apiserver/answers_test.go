package apiserver

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// A PUT body must name the object of its URL: kube-apiserver's update
// handler answers 400 for a body without metadata.name (or with another).
// Built-in types take a missing kind and apiVersion from the URL, as
// kube-apiserver's typed decoding does, on POST and PUT alike.
func TestPutBodyMustNameTheObject(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"a"}}`)
	for _, body := range []string{`{}`, `{"data":{"k":"v"}}`, `{"metadata":{}}`, `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}`} {
		for _, path := range []string{cmPath + "/a", "/api/v1/namespaces/default"} {
			st := do(t, ts, "PUT", path, body).status(t, 400, meta.StatusReasonBadRequest)
			if !strings.Contains(st.Message, "does not match the name on the URL") {
				t.Fatalf("PUT %s %s: %q", path, body, st.Message)
			}
		}
	}
	if got := do(t, ts, "GET", cmPath+"/a", "").object(t); str(got, "data") != "" {
		t.Fatalf("a refused PUT wrote: %v", got)
	}
	// Named, without kind and apiVersion: the built-in type's.
	if r := do(t, ts, "PUT", cmPath+"/a", `{"metadata":{"name":"a"},"data":{"k":"v"}}`); r.code != 200 || str(r.object(t), "kind") != "ConfigMap" {
		t.Fatalf("PUT without kind: %d %s", r.code, r.body)
	}
}

// A custom resource's body must carry kind and apiVersion: kube-apiserver
// decodes custom resources without the URL's defaults and answers 400
// ("Object 'Kind' is missing in ..."), for a create as for an update.
func TestCustomResourceBodyNeedsKind(t *testing.T) {
	_, ts := newTestServer(t)
	const tm = `"apiVersion":"example.dev/v1","kind":"Widget",`
	if r := do(t, ts, "POST", wdPath, `{`+tm+`"metadata":{"name":"w"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	rv := str(do(t, ts, "GET", wdPath+"/w", "").object(t), "metadata", "resourceVersion")
	for _, c := range []struct{ method, path, body, msg string }{
		{"POST", wdPath, `{"metadata":{"name":"x"},"spec":{"size":1}}`, "Object 'Kind' is missing in '{\"metadata\""},
		{"POST", wdPath, `{}`, "Object 'Kind' is missing in '{}'"},
		{"POST", wdPath, `{"apiVersion":"example.dev/v1","metadata":{"name":"x"},"spec":{"size":1}}`, "Object 'Kind' is missing"},
		{"POST", wdPath, `{"kind":"Widget","metadata":{"name":"x"},"spec":{"size":1}}`, "the API version in the data () does not match the expected API version (example.dev/v1)"},
		{"PUT", wdPath + "/w", `{}`, "Object 'Kind' is missing"},
		{"PUT", wdPath + "/w", `{"metadata":{"name":"w","resourceVersion":"` + rv + `"},"spec":{"size":2}}`, "Object 'Kind' is missing"},
		{"PUT", wdPath + "/w/status", `{"metadata":{"name":"w","resourceVersion":"` + rv + `"},"status":{"phase":"x"}}`, "Object 'Kind' is missing"},
		{"PUT", wdPath + "/w", `{` + tm + `"spec":{"size":2}}`, "does not match the name on the URL"},
	} {
		st := do(t, ts, c.method, c.path, c.body).status(t, 400, meta.StatusReasonBadRequest)
		if !strings.Contains(st.Message, c.msg) {
			t.Fatalf("%s %s %s: message %q, want %q", c.method, c.path, c.body, st.Message, c.msg)
		}
	}
	if r := do(t, ts, "GET", wdPath+"/x", ""); r.code != 404 {
		t.Fatalf("a refused create wrote x: %d", r.code)
	}
	// What kubectl and client-go send is unaffected.
	if r := do(t, ts, "PUT", wdPath+"/w", `{`+tm+`"metadata":{"name":"w","resourceVersion":"`+rv+`"},"spec":{"size":2}}`); r.code != 200 {
		t.Fatalf("full PUT: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "POST", wdPath, "apiVersion: example.dev/v1\nkind: Widget\nmetadata:\n  name: yw\nspec:\n  size: 1\n", "Content-Type", "application/yaml"); r.code != 201 {
		t.Fatalf("YAML create: %d %s", r.code, r.body)
	}
}

// autoscaling/v1 Scale's spec.replicas is an int32: a number beyond it, one
// that is not an integer literal (2.0), or no number, fails kube-apiserver's
// typed decoding (400) on PUT and PATCH alike; a negative one is 422.
// Nothing is written either way.
func TestScaleReplicasInt32(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"s"},"spec":{"size":1,"replicas":2}}`)
	scale := func(replicas string) string {
		return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"s"},"spec":{"replicas":` + replicas + `}}`
	}
	for _, n := range []string{"1099511627776", "2147483648", "-2147483649", `"3"`, "true", "2.0", "2e0"} {
		st := do(t, ts, "PUT", wdPath+"/s/scale", scale(n)).status(t, 400, meta.StatusReasonBadRequest)
		if !strings.Contains(st.Message, "ScaleSpec.spec.replicas of type int32") {
			t.Fatalf("replicas %s: %q", n, st.Message)
		}
		do(t, ts, "PATCH", wdPath+"/s/scale", `{"spec":{"replicas":`+n+`}}`, "Content-Type", "application/merge-patch+json").status(t, 400, meta.StatusReasonBadRequest)
	}
	do(t, ts, "PUT", wdPath+"/s/scale", scale("-1")).status(t, 422, meta.StatusReasonInvalid)
	if got := str(do(t, ts, "GET", wdPath+"/s", "").object(t), "spec", "replicas"); got != "2" {
		t.Fatalf("replicas after refused scales: %s", got)
	}
	if r := do(t, ts, "PUT", wdPath+"/s/scale", scale("2147483647")); r.code != 200 || str(r.object(t), "spec", "replicas") != "2147483647" {
		t.Fatalf("largest int32: %d %s", r.code, r.body)
	}
}

// bigConfigMap is a ConfigMap body of n keys with value v.
func bigConfigMap(name string, n int, v string) string {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%05d":%q`, i, v)
	}
	b.WriteString("}}")
	return b.String()
}

// An object within the size limit without its managedFields, over it with
// them, is stored without them, as kube-apiserver retries a create or update
// that storage refuses as too large; over the limit even so is 413, and a
// server-side apply (whose managedFields are the point) is not retried so.
func TestManagedFieldsDroppedForSize(t *testing.T) {
	api := newConfigMapServer(t, Config{})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	body := bigConfigMap("big", 60000, "v") // ~0.8 MB of data, ~0.85 MB of managedFields
	r := do(t, ts, "POST", cmPath, body)
	if r.code != 201 {
		t.Fatalf("create: %d %.300s", r.code, r.body)
	}
	got := do(t, ts, "GET", cmPath+"/big", "").object(t)
	if str(got, "metadata", "managedFields") != "" || str(got, "data", "k59999") != "v" {
		t.Fatalf("stored: managedFields %.100q, k59999 %q", str(got, "metadata", "managedFields"), str(got, "data", "k59999"))
	}
	put := strings.Replace(bigConfigMap("big", 60000, "w"), `"name":"big"`, `"name":"big","resourceVersion":"`+str(got, "metadata", "resourceVersion")+`"`, 1)
	if r := do(t, ts, "PUT", cmPath+"/big", put); r.code != 200 {
		t.Fatalf("update: %d %.300s", r.code, r.body)
	}
	// Too large without managedFields (a ConfigMap's data cannot be: 1 MiB).
	if err := api.Register(widgetResource(t)); err != nil {
		t.Fatal(err)
	}
	huge := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"huge"},"spec":{"size":1,"color":"` + strings.Repeat("x", 1700000) + `"}}`
	do(t, ts, "POST", wdPath, huge).status(t, 413, meta.StatusReasonRequestEntityTooLarge)
	do(t, ts, "PATCH", cmPath+"/applied?fieldManager=m", bigConfigMap("applied", 60000, "v"), "Content-Type", applyPatchType).status(t, 413, meta.StatusReasonRequestEntityTooLarge)
	// A small object keeps its managedFields.
	if r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"small"},"data":{"a":"b"}}`); !strings.Contains(string(r.body), "managedFields") {
		t.Fatalf("small create: %d %s", r.code, r.body)
	}
}

// A PUT without resourceVersion to a custom resource that does not exist
// is a 404, as kube-apiserver answers: the resourceVersion is required only
// to update an object that exists (422 then).
func TestPutMissingCustomResourceIsNotFound(t *testing.T) {
	_, ts := newTestServer(t)
	const body = `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`
	do(t, ts, "PUT", wdPath+"/w", body).status(t, 404, meta.StatusReasonNotFound)
	if r := do(t, ts, "POST", wdPath, body); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	st := do(t, ts, "PUT", wdPath+"/w", body).status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, "must be specified for an update") {
		t.Fatalf("PUT without resourceVersion: %q", st.Message)
	}
}

// A value of the wrong JSON type is a decoding error (400) for a built-in
// type, whatever the fieldValidation level, and a 422 for a custom one, as
// kube-apiserver answers.
func TestWrongTypeIsBadRequestForBuiltins(t *testing.T) {
	_, ts := newTestServer(t)
	for _, q := range []string{"", "?fieldValidation=Ignore", "?fieldValidation=Strict"} {
		st := do(t, ts, "POST", cmPath+q, `{"metadata":{"name":"a"},"data":{"a":1}}`).status(t, 400, meta.StatusReasonBadRequest)
		if !strings.Contains(st.Message, `ConfigMap in version "v1" cannot be handled as a ConfigMap`) {
			t.Fatalf("POST%s: %q", q, st.Message)
		}
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"a"},"data":{"a":"1"}}`)
	do(t, ts, "PUT", cmPath+"/a", `{"metadata":{"name":"a"},"data":{"a":true}}`).status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "PATCH", cmPath+"/a", `{"data":{"a":[1]}}`, "Content-Type", "application/merge-patch+json").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"big"}}`).status(t, 422, meta.StatusReasonInvalid)
}
