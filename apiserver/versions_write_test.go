package apiserver

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/codec"
)

// vwGet reads a widget through version v.
func vwGet(t *testing.T, ts *httptest.Server, v, name string) map[string]any {
	t.Helper()
	r := do(t, ts, "GET", vwPathOf(v)+"/"+name, "")
	if r.code != 200 {
		t.Fatalf("get %s through %s: %d %s", name, v, r.code, r.body)
	}
	return r.object(t)
}

// Creates, updates and both kinds of patch through the version that is not
// stored are stored in the storage version, and read back in either.
func TestVersionsWritesThroughNonStorageVersion(t *testing.T) {
	vw := &versionedWidgets{}
	api, ts := newVersionsServer(t, vw)
	r := do(t, ts, "POST", vwPathOf("v2"), `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"paint":{"color":"red"},"scale":{"replicas":3}}}`)
	if o := r.object(t); r.code != 201 || o["apiVersion"] != "example.dev/v2" || paint(o) != "red" || str(o, "spec", "scale", "replicas") != "3" {
		t.Fatalf("create through v2: %d %s", r.code, r.body)
	}
	kv, err := api.Registry().Storage().Get(t.Context(), []byte("/registry/example.dev/widgets/default/a"), 0)
	if err != nil || !containsAll(string(kv.Value), `"apiVersion":"example.dev/v1"`, `"color":"red"`, `"replicas":3`) {
		t.Errorf("stored %q, %v; want it in v1", kv.Value, err)
	}
	if o := vwGet(t, ts, "v1", "a"); str(o, "spec", "color") != "red" || str(o, "spec", "replicas") != "3" {
		t.Errorf("a through v1: %v", o)
	}

	// PUT through v2 of what a GET through v2 returned.
	o := vwGet(t, ts, "v2", "a")
	o["spec"].(map[string]any)["paint"] = map[string]any{"color": "green"}
	r = do(t, ts, "PUT", vwPathOf("v2")+"/a", string(mustJSON(t, o)))
	if r.code != 200 || paint(r.object(t)) != "green" {
		t.Fatalf("update through v2: %d %s", r.code, r.body)
	}
	if o := vwGet(t, ts, "v1", "a"); str(o, "spec", "color") != "green" || str(o, "metadata", "generation") != "2" {
		t.Errorf("a through v1 after the update: %v", o)
	}
	// A PUT with a stale resourceVersion is a conflict in either version.
	r = do(t, ts, "PUT", vwPathOf("v2")+"/a", string(mustJSON(t, o)))
	r.status(t, 409, "Conflict")

	// JSON patch and merge patch through v2 apply to the v2 form.
	r = do(t, ts, "PATCH", vwPathOf("v2")+"/a", `[{"op":"test","path":"/spec/paint/color","value":"green"},{"op":"replace","path":"/spec/paint/color","value":"blue"}]`, "Content-Type", "application/json-patch+json")
	if r.code != 200 || paint(r.object(t)) != "blue" {
		t.Fatalf("JSON patch through v2: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PATCH", vwPathOf("v2")+"/a", `{"spec":{"scale":{"replicas":7}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || str(r.object(t), "spec", "scale", "replicas") != "7" || paint(r.object(t)) != "blue" {
		t.Fatalf("merge patch through v2: %d %s", r.code, r.body)
	}
	if o := vwGet(t, ts, "v1", "a"); str(o, "spec", "color") != "blue" || str(o, "spec", "replicas") != "7" {
		t.Errorf("a through v1 after the patches: %v", o)
	}
	// A JSON patch of a v1 path does not apply to the v2 form.
	r = do(t, ts, "PATCH", vwPathOf("v2")+"/a", `[{"op":"test","path":"/spec/color","value":"blue"}]`, "Content-Type", "application/json-patch+json")
	if r.code != 422 {
		t.Errorf("JSON patch of a v1 path through v2: %d %s", r.code, r.body)
	}
	// A body in the other version is refused, as kube-apiserver refuses it.
	r = do(t, ts, "POST", vwPathOf("v2"), `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1,"color":"red"}}`)
	if r.code != 400 {
		t.Errorf("a v1 body posted to v2: %d %s", r.code, r.body)
	}
}

// The status and scale subresources work through each version, the scale
// at each version's own replicas path.
func TestVersionsStatusAndScale(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "a", "red", "")
	for i, v := range []string{"v1", "v2"} {
		want := []string{"4", "6"}[i]
		r := do(t, ts, "PATCH", vwPathOf(v)+"/a/scale", `{"spec":{"replicas":`+want+`}}`, "Content-Type", "application/merge-patch+json")
		if o := r.object(t); r.code != 200 || o["kind"] != "Scale" || o["apiVersion"] != "autoscaling/v1" || str(o, "spec", "replicas") != want {
			t.Fatalf("scale through %s: %d %s", v, r.code, r.body)
		}
		if o := vwGet(t, ts, "v1", "a"); str(o, "spec", "replicas") != want {
			t.Errorf("after scaling through %s, v1 spec.replicas: %v", v, o["spec"])
		}
		if o := vwGet(t, ts, "v2", "a"); str(o, "spec", "scale", "replicas") != want || str(o, "spec", "replicas") != "" {
			t.Errorf("after scaling through %s, v2 spec: %v", v, o["spec"])
		}
		r = do(t, ts, "GET", vwPathOf(v)+"/a/scale", "")
		if r.code != 200 || str(r.object(t), "spec", "replicas") != want {
			t.Errorf("get scale through %s: %d %s", v, r.code, r.body)
		}

		phase := "Ready" + v
		r = do(t, ts, "PATCH", vwPathOf(v)+"/a/status", `{"status":{"phase":"`+phase+`","replicas":1},"spec":{"size":99}}`, "Content-Type", "application/merge-patch+json")
		if o := r.object(t); r.code != 200 || o["apiVersion"] != "example.dev/"+v || str(o, "status", "phase") != phase || str(o, "spec", "size") != "1" {
			t.Fatalf("status through %s: %d %s", v, r.code, r.body)
		}
		o := vwGet(t, ts, v, "a")
		o["status"] = map[string]any{"phase": "Put" + v, "replicas": 2}
		r = do(t, ts, "PUT", vwPathOf(v)+"/a/status", string(mustJSON(t, o)))
		if r.code != 200 || str(r.object(t), "status", "phase") != "Put"+v {
			t.Fatalf("status PUT through %s: %d %s", v, r.code, r.body)
		}
		other := map[string]string{"v1": "v2", "v2": "v1"}[v]
		if o := vwGet(t, ts, other, "a"); str(o, "status", "phase") != "Put"+v || str(o, "status", "replicas") != "2" {
			t.Errorf("status through %s read through %s: %v", v, other, o["status"])
		}
		if r := do(t, ts, "GET", vwPathOf(v)+"/a/scale", ""); str(r.object(t), "status", "replicas") != "2" {
			t.Errorf("scale status through %s: %s", v, r.body)
		}
	}
}

// Dry runs through v2 write nothing; deletecollection through v2 deletes
// what its selectors select, by v2's selectable field.
func TestVersionsDryRunAndDeleteCollection(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "a", "red", "")
	vwCreate(t, ts, "b", "blue", "")
	vwCreate(t, ts, "c", "red", "")
	rv := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion")

	r := do(t, ts, "POST", vwPathOf("v2")+"?dryRun=All", `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"dry"},"spec":{"size":1,"paint":{"color":"red"}}}`)
	if r.code != 201 || paint(r.object(t)) != "red" {
		t.Fatalf("dry-run create through v2: %d %s", r.code, r.body)
	}
	o := vwGet(t, ts, "v2", "a")
	o["spec"].(map[string]any)["paint"] = map[string]any{"color": "black"}
	r = do(t, ts, "PUT", vwPathOf("v2")+"/a?dryRun=All", string(mustJSON(t, o)))
	if r.code != 200 || paint(r.object(t)) != "black" {
		t.Fatalf("dry-run update through v2: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PATCH", vwPathOf("v2")+"/a?dryRun=All", `{"spec":{"paint":{"color":"white"}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || paint(r.object(t)) != "white" {
		t.Fatalf("dry-run patch through v2: %d %s", r.code, r.body)
	}
	if got := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion"); got != rv {
		t.Errorf("dry runs wrote: the list's resourceVersion went from %s to %s", rv, got)
	}
	do(t, ts, "GET", vwPathOf("v1")+"/dry", "").status(t, 404, "NotFound")
	if o := vwGet(t, ts, "v1", "a"); str(o, "spec", "color") != "red" {
		t.Errorf("a after dry runs: %v", o["spec"])
	}

	r = do(t, ts, "DELETE", vwPathOf("v2")+"?fieldSelector=spec.paint.color%3Dred", "")
	l := r.object(t)
	items, _ := l["items"].([]any)
	if r.code != 200 || l["apiVersion"] != "example.dev/v2" || len(items) != 2 {
		t.Fatalf("deletecollection through v2: %d %s", r.code, r.body)
	}
	for _, it := range items {
		if o := it.(map[string]any); o["apiVersion"] != "example.dev/v2" || paint(o) != "red" {
			t.Errorf("deleted item: %v", o)
		}
	}
	l = do(t, ts, "GET", vwPathOf("v1"), "").object(t)
	if items, _ := l["items"].([]any); len(items) != 1 || str(items[0].(map[string]any), "metadata", "name") != "b" {
		t.Errorf("left after deletecollection: %v", l["items"])
	}
}

// Field selectors name each version's own path of the same field, in
// lists, lists from the cache and watches; the other version's path is
// refused.
func TestVersionsFieldSelectors(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "a", "red", "")
	vwCreate(t, ts, "b", "blue", "")
	for v, field := range map[string]string{"v1": "spec.color", "v2": "spec.paint.color"} {
		for _, rv := range []string{"", "&resourceVersion=0"} {
			r := do(t, ts, "GET", vwPathOf(v)+"?fieldSelector="+field+"%3Dblue"+rv, "")
			items, _ := r.object(t)["items"].([]any)
			if r.code != 200 || len(items) != 1 || str(items[0].(map[string]any), "metadata", "name") != "b" {
				t.Errorf("%s=blue through %s%s: %d %s", field, v, rv, r.code, r.body)
			}
		}
		other := map[string]string{"v1": "spec.paint.color", "v2": "spec.color"}[v]
		r := do(t, ts, "GET", vwPathOf(v)+"?fieldSelector="+other+"%3Dblue", "")
		r.status(t, 400, "BadRequest")
	}
	rv := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion")
	w := startWatch(t, ts, vwPathOf("v2")+"?watch=1&fieldSelector=spec.paint.color%3Dred&resourceVersion="+rv)
	vwCreate(t, ts, "c", "blue", "")
	vwCreate(t, ts, "d", "red", "")
	if e, o := vwEvent(w.next(t)); e[:8] != "ADDED d " || paint(o) != "red" {
		t.Errorf("watch of red through v2: %s %v", e, o)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A version with a protobuf message is served in protobuf (gets and
// lists, objects in that version); a version without one answers JSON.
func TestVersionsProtobuf(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "a", "red", "")
	const pb = "application/vnd.kubernetes.protobuf"
	r := do(t, ts, "GET", vwPathOf("v2")+"/a", "", "Accept", pb)
	u, err := codec.DecodeEnvelope(r.body)
	if err != nil || r.code != 200 || r.header.Get("Content-Type") != pb || u.APIVersion != "example.dev/v2" || u.Kind != "Widget" {
		t.Fatalf("protobuf get through v2: %d %q %v %+v", r.code, r.header.Get("Content-Type"), err, u)
	}
	obj, err := vwV2Message.Unmarshal(u.Raw)
	if err != nil || paint(obj) != "red" || str(obj, "spec", "scale", "replicas") != "2" || str(obj, "metadata", "name") != "a" {
		t.Errorf("protobuf get through v2: %v %v", obj, err)
	}
	r = do(t, ts, "GET", vwPathOf("v2"), "", "Accept", pb)
	if u, err = codec.DecodeEnvelope(r.body); err != nil || u.Kind != "WidgetList" || u.APIVersion != "example.dev/v2" {
		t.Fatalf("protobuf list through v2: %d %v %+v", r.code, err, u)
	}
	list, err := codec.ListOf(vwV2Message).Unmarshal(u.Raw)
	if items, _ := list["items"].([]any); err != nil || len(items) != 1 || paint(items[0].(map[string]any)) != "red" {
		t.Errorf("protobuf list through v2: %v %v", list, err)
	}
	r = do(t, ts, "GET", vwPathOf("v1")+"/a", "", "Accept", pb+", application/json")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || str(r.object(t), "spec", "color") != "red" {
		t.Errorf("protobuf or JSON get through v1: %d %q %s", r.code, r.header.Get("Content-Type"), r.body)
	}
}
