package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

const cmPath = "/api/v1/namespaces/default/configmaps"
const wdPath = "/apis/example.dev/v1/namespaces/default/widgets"

func TestConfigMapCRUD(t *testing.T) {
	_, ts := newTestServer(t)

	r := do(t, ts, "POST", cmPath, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"app":"x"}},"data":{"k":"v"}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	created := r.object(t)
	rv1 := str(created, "metadata", "resourceVersion")
	if rv1 == "" || str(created, "metadata", "uid") == "" || str(created, "metadata", "creationTimestamp") == "" {
		t.Fatalf("create did not fill metadata: %s", r.body)
	}
	if str(created, "metadata", "namespace") != "default" || str(created, "data", "k") != "v" {
		t.Fatalf("created object wrong: %s", r.body)
	}
	if _, ok := created["metadata"].(map[string]any)["generation"]; ok {
		t.Fatalf("configmaps have no generation: %s", r.body)
	}

	r = do(t, ts, "GET", cmPath+"/c1", "")
	if r.code != http.StatusOK || string(r.body) != string(do(t, ts, "GET", cmPath+"/c1", "").body) {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	if got := r.object(t); str(got, "metadata", "resourceVersion") != rv1 || str(got, "kind") != "ConfigMap" || str(got, "apiVersion") != "v1" {
		t.Fatalf("get returned %s", r.body)
	}

	// Items of built-in lists carry no kind/apiVersion.
	r = do(t, ts, "GET", cmPath, "")
	list := r.object(t)
	if str(list, "kind") != "ConfigMapList" || str(list, "apiVersion") != "v1" {
		t.Fatalf("list: %s", r.body)
	}
	items := list["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["kind"] != nil {
		t.Fatalf("list items: %s", r.body)
	}

	// Update with the current resourceVersion.
	r = do(t, ts, "PUT", cmPath+"/c1", fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","resourceVersion":%q},"data":{"k":"v2"}}`, rv1))
	if r.code != http.StatusOK {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	updated := r.object(t)
	rv2 := str(updated, "metadata", "resourceVersion")
	if rv2 == rv1 || str(updated, "data", "k") != "v2" || str(updated, "metadata", "uid") != str(created, "metadata", "uid") ||
		str(updated, "metadata", "creationTimestamp") != str(created, "metadata", "creationTimestamp") {
		t.Fatalf("update result: %s", r.body)
	}

	// A stale resourceVersion is a 409 Conflict.
	r = do(t, ts, "PUT", cmPath+"/c1", fmt.Sprintf(`{"metadata":{"name":"c1","resourceVersion":%q},"data":{"k":"v3"}}`, rv1))
	st := r.status(t, http.StatusConflict, meta.StatusReasonConflict)
	if !strings.Contains(st.Message, "the object has been modified") {
		t.Fatalf("conflict message: %q", st.Message)
	}

	// Configmaps allow an unconditional update.
	r = do(t, ts, "PUT", cmPath+"/c1", `{"metadata":{"name":"c1"},"data":{"k":"v4"}}`)
	if r.code != http.StatusOK || str(r.object(t), "data", "k") != "v4" {
		t.Fatalf("unconditional update: %d %s", r.code, r.body)
	}

	// An update that changes nothing writes nothing.
	cur := do(t, ts, "GET", cmPath+"/c1", "").object(t)
	r = do(t, ts, "PUT", cmPath+"/c1", string(do(t, ts, "GET", cmPath+"/c1", "").body))
	if r.code != http.StatusOK || str(r.object(t), "metadata", "resourceVersion") != str(cur, "metadata", "resourceVersion") {
		t.Fatalf("no-op update changed the resourceVersion: %s", r.body)
	}

	// PUT to a missing object is a 404 and creates nothing.
	r = do(t, ts, "PUT", cmPath+"/missing", `{"metadata":{"name":"missing"},"data":{}}`)
	r.status(t, http.StatusNotFound, meta.StatusReasonNotFound)
	do(t, ts, "GET", cmPath+"/missing", "").status(t, http.StatusNotFound, meta.StatusReasonNotFound)

	// Delete answers a Success Status with details.
	r = do(t, ts, "DELETE", cmPath+"/c1", "")
	st = r.status(t, http.StatusOK, "")
	if st.Status != meta.StatusSuccess || st.Details == nil || st.Details.Name != "c1" || st.Details.Kind != "configmaps" || st.Details.UID != str(created, "metadata", "uid") {
		t.Fatalf("delete status: %s", r.body)
	}
	st = do(t, ts, "GET", cmPath+"/c1", "").status(t, http.StatusNotFound, meta.StatusReasonNotFound)
	if st.Message != `configmaps "c1" not found` || st.Details.Name != "c1" || st.Details.Kind != "configmaps" {
		t.Fatalf("not found status: %+v", st)
	}
	do(t, ts, "DELETE", cmPath+"/c1", "").status(t, http.StatusNotFound, meta.StatusReasonNotFound)
}

func TestCreateErrors(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"dup"}}`)
	tests := []struct {
		name, method, path, body string
		headers                  []string
		code                     int
		reason                   meta.StatusReason
		contains                 string
	}{
		{"duplicate", "POST", cmPath, `{"metadata":{"name":"dup"}}`, nil, 409, meta.StatusReasonAlreadyExists, `configmaps "dup" already exists`},
		{"malformed json", "POST", cmPath, `{"metadata":`, nil, 400, meta.StatusReasonBadRequest, ""},
		{"not an object", "POST", cmPath, `[1,2]`, nil, 400, meta.StatusReasonBadRequest, ""},
		{"wrong kind", "POST", cmPath, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}}`, nil, 400, meta.StatusReasonBadRequest, "Secret"},
		{"wrong apiVersion", "POST", cmPath, `{"kind":"ConfigMap","apiVersion":"v2","metadata":{"name":"x"}}`, nil, 400, meta.StatusReasonBadRequest, "v2"},
		{"invalid name", "POST", cmPath, `{"metadata":{"name":"Bad_Name"}}`, nil, 422, meta.StatusReasonInvalid, "metadata.name"},
		{"no name", "POST", cmPath, `{"metadata":{}}`, nil, 422, meta.StatusReasonInvalid, "name or generateName is required"},
		{"missing namespace", "POST", "/api/v1/namespaces/nope/configmaps", `{"metadata":{"name":"x"}}`, nil, 404, meta.StatusReasonNotFound, `namespaces "nope" not found`},
		{"namespace mismatch", "POST", cmPath, `{"metadata":{"name":"x","namespace":"other"}}`, nil, 400, meta.StatusReasonBadRequest, "namespace"},
		{"bad configmap key", "POST", cmPath, `{"metadata":{"name":"x"},"data":{"a b":"c"}}`, nil, 422, meta.StatusReasonInvalid, "data[a b]"},
		{"unsupported media type", "POST", cmPath, `x`, []string{"Content-Type", "text/plain"}, 415, meta.StatusReasonUnsupportedMediaType, ""},
		{"too large", "POST", cmPath, `{"metadata":{"name":"x"},"data":{"k":"` + strings.Repeat("a", 2<<20) + `"}}`, nil, 413, meta.StatusReasonRequestEntityTooLarge, ""},
		{"bad dryRun", "POST", cmPath + "?dryRun=Some", `{"metadata":{"name":"x"}}`, nil, 422, meta.StatusReasonInvalid, "dryRun"},
		{"bad fieldValidation", "POST", cmPath + "?fieldValidation=Loud", `{"metadata":{"name":"x"}}`, nil, 422, meta.StatusReasonInvalid, "fieldValidation"},
		{"strict unknown field", "POST", cmPath + "?fieldValidation=Strict", `{"metadata":{"name":"x"},"bogus":1}`, nil, 400, meta.StatusReasonBadRequest, `unknown field "bogus"`},
		{"strict duplicate field", "POST", cmPath + "?fieldValidation=Strict", `{"metadata":{"name":"x"},"data":{"a":"1","a":"2"}}`, nil, 400, meta.StatusReasonBadRequest, `duplicate field "data.a"`},
		{"resourceVersion on create", "POST", cmPath, `{"metadata":{"name":"x","resourceVersion":"5"}}`, nil, 400, meta.StatusReasonBadRequest, "resourceVersion"},
		{"unknown resource", "GET", "/api/v1/namespaces/default/bogus", "", nil, 404, meta.StatusReasonNotFound, ""},
		{"unknown group", "GET", "/apis/nope.dev/v1/things", "", nil, 404, meta.StatusReasonNotFound, ""},
		{"post on named object", "POST", cmPath + "/dup", `{}`, nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"put on collection", "PUT", cmPath, `{}`, nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"patch on collection", "PATCH", cmPath, `{}`, []string{"Content-Type", "application/merge-patch+json"}, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"deletecollection of namespaces", "DELETE", "/api/v1/namespaces", "", nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"deletecollection across namespaces", "DELETE", "/api/v1/configmaps", "", nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"custom deletecollection across namespaces", "DELETE", "/apis/example.dev/v1/widgets", "", nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"create across namespaces", "POST", "/api/v1/configmaps", `{"metadata":{"name":"x","namespace":"default"}}`, nil, 405, meta.StatusReasonMethodNotAllowed, ""},
		{"namespaced name without namespace", "GET", "/api/v1/configmaps/dup", "", nil, 404, meta.StatusReasonNotFound, ""},
		{"cluster type under a namespace", "GET", "/api/v1/namespaces/default/namespaces/x", "", nil, 404, meta.StatusReasonNotFound, ""},
		{"not acceptable", "GET", cmPath, "", []string{"Accept", "text/html"}, 406, meta.StatusReasonNotAcceptable, ""},
		{"bad label selector", "GET", cmPath + "?labelSelector=a%20in%20(", "", nil, 400, meta.StatusReasonBadRequest, ""},
		{"unsupported field selector", "GET", cmPath + "?fieldSelector=data.k%3Dv", "", nil, 400, meta.StatusReasonBadRequest, `"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, ts, tt.method, tt.path, tt.body, tt.headers...)
			st := r.status(t, tt.code, tt.reason)
			if !strings.Contains(st.Message, tt.contains) {
				t.Fatalf("message %q does not contain %q", st.Message, tt.contains)
			}
		})
	}
	// Nothing above was written.
	list := do(t, ts, "GET", cmPath, "").object(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("%d configmaps exist after failed creates, want 1", n)
	}
}

func TestWidgetLifecycle(t *testing.T) {
	_, ts := newTestServer(t)
	r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"generateName":"w-"},"spec":{"size":1,"color":"red","bogus":true},"status":{"phase":"Ignored"}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if w := r.header.Get("Warning"); !strings.Contains(w, `unknown field \"spec.bogus\"`) {
		t.Fatalf("missing unknown-field warning, got %q", w)
	}
	w := r.object(t)
	name := str(w, "metadata", "name")
	if !strings.HasPrefix(name, "w-") || len(name) != 7 {
		t.Fatalf("generated name %q", name)
	}
	if str(w, "metadata", "generation") != "1" || w["status"] != nil || str(w, "spec", "bogus") != "" {
		t.Fatalf("create: generation 1, status dropped, unknown field pruned; got %s", r.body)
	}
	path := wdPath + "/" + name

	// A PUT without resourceVersion is refused for custom resources.
	r = do(t, ts, "PUT", path, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":2}}`, name))
	st := r.status(t, 422, meta.StatusReasonInvalid)
	if len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "metadata.resourceVersion" {
		t.Fatalf("causes: %+v", st.Details.Causes)
	}

	// Spec changes bump the generation; label changes do not; the main
	// resource ignores status.
	rv := str(w, "metadata", "resourceVersion")
	r = do(t, ts, "PUT", path, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q,"resourceVersion":%q},"spec":{"size":2},"status":{"phase":"X"}}`, name, rv))
	w = r.object(t)
	if r.code != 200 || str(w, "metadata", "generation") != "2" || w["status"] != nil {
		t.Fatalf("spec update: %d %s", r.code, r.body)
	}
	rv = str(w, "metadata", "resourceVersion")
	r = do(t, ts, "PUT", path, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q,"resourceVersion":%q,"labels":{"a":"b"}},"spec":{"size":2}}`, name, rv))
	w = r.object(t)
	if r.code != 200 || str(w, "metadata", "generation") != "2" || str(w, "metadata", "labels", "a") != "b" {
		t.Fatalf("label update: %d %s", r.code, r.body)
	}

	// The status subresource changes only status.
	rv = str(w, "metadata", "resourceVersion")
	r = do(t, ts, "PUT", path+"/status", fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q,"resourceVersion":%q},"spec":{"size":99},"status":{"phase":"Ready","replicas":3}}`, name, rv))
	w = r.object(t)
	if r.code != 200 || str(w, "status", "phase") != "Ready" || str(w, "spec", "size") != "2" || str(w, "metadata", "generation") != "2" {
		t.Fatalf("status update: %d %s", r.code, r.body)
	}
	if got := do(t, ts, "GET", path+"/status", "").object(t); str(got, "status", "phase") != "Ready" {
		t.Fatalf("get status: %v", got)
	}

	// Schema validation: 422 with causes on the fields.
	for body, field := range map[string]string{
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad1"},"spec":{"size":-1}}`:                                                      "spec.size",
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad2"},"spec":{"color":"red"}}`:                                                  "spec.size",
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad3"},"spec":{"size":"big"}}`:                                                   "spec.size",
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad4"},"spec":{"size":1,"tags":["a","a"]}}`:                                      "spec.tags[1]",
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad5"},"spec":{"size":1,"ports":[{"name":"a","port":1},{"name":"a","port":2}]}}`: "spec.ports[1]",
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"bad6"}}`:                                                                         "spec",
	} {
		st := do(t, ts, "POST", wdPath, body).status(t, 422, meta.StatusReasonInvalid)
		found := false
		for _, c := range st.Details.Causes {
			found = found || c.Field == field
		}
		if !found || st.Details.Kind != "Widget" || st.Details.Group != "example.dev" {
			t.Errorf("body %s: want a cause on %s, got %+v", body, field, st.Details)
		}
	}

	// Dry-run create writes nothing.
	r = do(t, ts, "POST", wdPath+"?dryRun=All", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"dry"},"spec":{"size":1}}`)
	if r.code != http.StatusCreated || str(r.object(t), "metadata", "name") != "dry" {
		t.Fatalf("dry-run create: %d %s", r.code, r.body)
	}
	do(t, ts, "GET", wdPath+"/dry", "").status(t, 404, meta.StatusReasonNotFound)

	// Custom resource lists carry kind and apiVersion on items.
	list := do(t, ts, "GET", wdPath, "").object(t)
	items := list["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["kind"] != "Widget" || items[0].(map[string]any)["apiVersion"] != "example.dev/v1" {
		t.Fatalf("widget list: %v", list)
	}
}

func TestPatch(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"p"},"spec":{"size":1,"color":"red"}}`)
	r := do(t, ts, "PATCH", wdPath+"/p", `{"spec":{"color":"blue"},"metadata":{"labels":{"x":"y"}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || str(r.object(t), "spec", "color") != "blue" || str(r.object(t), "metadata", "labels", "x") != "y" {
		t.Fatalf("merge patch: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PATCH", wdPath+"/p", `[{"op":"replace","path":"/spec/size","value":5}]`, "Content-Type", "application/json-patch+json")
	if r.code != 200 || str(r.object(t), "spec", "size") != "5" || str(r.object(t), "metadata", "generation") != "3" {
		t.Fatalf("json patch: %d %s", r.code, r.body)
	}
	before := do(t, ts, "GET", wdPath+"/p", "")
	r = do(t, ts, "PATCH", wdPath+"/p", `[{"op":"test","path":"/spec/size","value":6},{"op":"replace","path":"/spec/size","value":7}]`, "Content-Type", "application/json-patch+json")
	r.status(t, 422, meta.StatusReasonInvalid)
	if after := do(t, ts, "GET", wdPath+"/p", ""); string(after.body) != string(before.body) {
		t.Fatalf("failed test op changed the object")
	}
	do(t, ts, "PATCH", wdPath+"/p", `{"op":"x"}`, "Content-Type", "application/json-patch+json").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "PATCH", wdPath+"/p", `{"spec":{"size":-4}}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "PATCH", wdPath+"/missing", `{}`, "Content-Type", "application/merge-patch+json").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "PATCH", wdPath+"/p", `{}`, "Content-Type", "application/strategic-merge-patch+json").status(t, 415, meta.StatusReasonUnsupportedMediaType)
	do(t, ts, "PATCH", wdPath+"/p?force=true", `{}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)
}

func TestDeleteCollectionAndPreconditions(t *testing.T) {
	_, ts := newTestServer(t)
	for i := 0; i < 4; i++ {
		color := "red"
		if i%2 == 1 {
			color = "blue"
		}
		do(t, ts, "POST", wdPath, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w%d","labels":{"color":%q}},"spec":{"size":%d}}`, i, color, i))
	}
	r := do(t, ts, "DELETE", wdPath+"?labelSelector=color%3Dred", "")
	if r.code != 200 {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	deleted := r.object(t)
	if str(deleted, "kind") != "WidgetList" || len(deleted["items"].([]any)) != 2 {
		t.Fatalf("deletecollection answer: %s", r.body)
	}
	left := do(t, ts, "GET", wdPath, "").object(t)["items"].([]any)
	if len(left) != 2 {
		t.Fatalf("%d widgets left, want 2", len(left))
	}
	r = do(t, ts, "DELETE", wdPath+"/w1", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"nope"}}`)
	r.status(t, 409, meta.StatusReasonConflict)
	// A body of another kind is no DeleteOptions: 400, nothing deleted.
	r = do(t, ts, "DELETE", wdPath+"/w1", `{"kind":"Foo","apiVersion":"v1"}`)
	if st := r.status(t, 400, meta.StatusReasonBadRequest); !strings.Contains(st.Message, `no kind "Foo"`) {
		t.Fatalf("message %q", st.Message)
	}
	r = do(t, ts, "DELETE", wdPath+"/w1?dryRun=All", "")
	if r.code != 200 {
		t.Fatalf("dry-run delete: %d %s", r.code, r.body)
	}
	if do(t, ts, "GET", wdPath+"/w1", "").code != 200 {
		t.Fatal("dry-run delete removed the object")
	}
	// A negative grace period deletes, as in kube-apiserver for every type
	// but pods.
	if r = do(t, ts, "DELETE", wdPath+"/w1?gracePeriodSeconds=-5", ""); r.code != 200 {
		t.Fatalf("delete with a negative grace period: %d %s", r.code, r.body)
	}
	do(t, ts, "GET", wdPath+"/w1", "").status(t, 404, meta.StatusReasonNotFound)
}

// TestLongNames: a name too long for any storage key names no object: reads,
// updates and deletes are 404 (as in kube-apiserver, whose etcd just finds
// nothing) and an apply that would create it is 422, never a 500.
func TestLongNames(t *testing.T) {
	_, ts := newTestServer(t)
	long := strings.Repeat("a", 5000)
	for _, c := range []struct{ method, path, body, ctype string }{
		{"GET", cmPath + "/" + long, "", ""},
		{"DELETE", cmPath + "/" + long, "", ""},
		{"PUT", cmPath + "/" + long, `{"metadata":{"name":"` + long + `","resourceVersion":"1"}}`, ""},
		{"PATCH", cmPath + "/" + long, `{"data":{"a":"b"}}`, "application/merge-patch+json"},
		{"GET", "/api/v1/namespaces/" + long + "/configmaps/x", "", ""},
		{"GET", wdPath + "/" + long, "", ""},
	} {
		var h []string
		if c.ctype != "" {
			h = []string{"Content-Type", c.ctype}
		}
		do(t, ts, c.method, c.path, c.body, h...).status(t, 404, meta.StatusReasonNotFound)
	}
	apply := do(t, ts, "PATCH", cmPath+"/"+long+"?fieldManager=m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+long+`"}}`, "Content-Type", "application/apply-patch+yaml")
	apply.status(t, 422, meta.StatusReasonInvalid)
	// A type whose names have no length rule (events) gets to the storage's
	// key limit: a create is an invalid name, not a missing object.
	ets := newEventServer(t, registry.EventOptions{})
	for _, q := range []string{"", "?dryRun=All"} {
		st := do(t, ets, "POST", coreEvents+q, `{"metadata":{"name":"`+long+`"},"involvedObject":{"namespace":"default"}}`).status(t, 422, meta.StatusReasonInvalid)
		if len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "metadata.name" || st.Details.Causes[0].Type != meta.CauseTypeFieldValueTooLong {
			t.Fatalf("long event name%s: %+v", q, st)
		}
	}
}

// TestUIDPrecondition: a metadata.uid in a PUT body must be the object's,
// as in kube-apiserver (409 otherwise): the write must not land on another
// object of the same name.
func TestUIDPrecondition(t *testing.T) {
	_, ts := newTestServer(t)
	cm := do(t, ts, "POST", cmPath, `{"metadata":{"name":"u1"},"data":{"a":"1"}}`).object(t)
	uid := str(cm, "metadata", "uid")
	other := "6a7bde5e-0000-4000-8000-000000000000"
	do(t, ts, "PUT", cmPath+"/u1", `{"metadata":{"name":"u1","uid":"`+other+`"},"data":{"a":"2"}}`).status(t, 409, meta.StatusReasonConflict)
	// A patch's uid is no precondition: changing it is invalid (422), as there.
	do(t, ts, "PATCH", cmPath+"/u1", `{"metadata":{"uid":"`+other+`"},"data":{"a":"3"}}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)
	if r := do(t, ts, "PUT", cmPath+"/u1", `{"metadata":{"name":"u1","uid":"`+uid+`"},"data":{"a":"4"}}`); r.code != 200 {
		t.Fatalf("PUT with the object's uid: %d %s", r.code, r.body)
	}
	got := do(t, ts, "GET", cmPath+"/u1", "").object(t)
	if str(got, "data", "a") != "4" || str(got, "metadata", "uid") != uid {
		t.Fatalf("after the refused writes: %v", got)
	}
	w := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"wu"},"spec":{"size":1}}`).object(t)
	rv := str(w, "metadata", "resourceVersion")
	st := do(t, ts, "PUT", wdPath+"/wu", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"wu","resourceVersion":"`+rv+`","uid":"`+other+`"},"spec":{"size":2}}`).status(t, 409, meta.StatusReasonConflict)
	if !strings.Contains(st.Message, "Precondition failed: UID in precondition: "+other) {
		t.Fatalf("message %q", st.Message)
	}
}

// TestUIDPreconditionCreateOnUpdate: a PUT that would create (events) does
// not when it names a uid: no object has it.
func TestUIDPreconditionCreateOnUpdate(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	ev := `{"metadata":{"name":"n.1","uid":"abc"},"involvedObject":{"namespace":"default"}}`
	do(t, ts, "PUT", coreEvents+"/n.1", ev).status(t, 409, meta.StatusReasonConflict)
	do(t, ts, "GET", coreEvents+"/n.1", "").status(t, 404, meta.StatusReasonNotFound)
}

// TestSelfLinkCleared: a selfLink a client sends is not kept, as
// kube-apiserver no longer sets or stores it.
func TestSelfLinkCleared(t *testing.T) {
	_, ts := newTestServer(t)
	if cm := do(t, ts, "POST", cmPath, `{"metadata":{"name":"s","selfLink":"/x"}}`).object(t); str(cm, "metadata", "selfLink") != "" {
		t.Fatalf("selfLink kept on create: %v", cm["metadata"])
	}
	if cm := do(t, ts, "PUT", cmPath+"/s", `{"metadata":{"name":"s","selfLink":"/y"},"data":{"a":"b"}}`).object(t); str(cm, "metadata", "selfLink") != "" {
		t.Fatalf("selfLink kept on update: %v", cm["metadata"])
	}
}

// TestWarningsWithErrors: the warnings of a request that fails validation
// come with its error, as kube-apiserver sends them whatever the outcome.
func TestWarningsWithErrors(t *testing.T) {
	_, ts := newTestServer(t)
	r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"BAD"},"bogus":1}`)
	r.status(t, 422, meta.StatusReasonInvalid)
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], `unknown field \"bogus\"`) {
		t.Fatalf("create: Warning %q", w)
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"ok"}}`)
	r = do(t, ts, "PUT", cmPath+"/ok", `{"metadata":{"name":"ok","labels":{"-bad":"x"}},"bogus":1}`)
	r.status(t, 422, meta.StatusReasonInvalid)
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], `unknown field \"bogus\"`) {
		t.Fatalf("update: Warning %q", w)
	}
	r = do(t, ts, "PATCH", cmPath+"/ok", `{"metadata":{"labels":{"-bad":"x"}},"bogus":1}`, "Content-Type", "application/merge-patch+json")
	r.status(t, 422, meta.StatusReasonInvalid)
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], `unknown field \"bogus\"`) {
		t.Fatalf("patch: Warning %q", w)
	}
	// A finalizer warning is validation's: not sent when validation fails.
	r = do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","finalizers":["baz"]},"spec":{"size":"big"}}`)
	r.status(t, 422, meta.StatusReasonInvalid)
	if w := r.header.Values("Warning"); len(w) != 0 {
		t.Fatalf("failed create: Warning %q", w)
	}
}
