package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

const (
	ctJSONPatch  = "application/json-patch+json"
	ctMergePatch = "application/merge-patch+json"
	ctStrategic  = "application/strategic-merge-patch+json"
	ctApply      = "application/apply-patch+yaml"
)

// gadgetSchema declares strategic merge metadata, so that kapi serves
// strategic merge patch for this custom type.
const gadgetSchema = `{"type":"object","properties":{"spec":{"type":"object","properties":{
 "size":{"type":"integer"},
 "tags":{"type":"array","x-kubernetes-patch-strategy":"merge","items":{"type":"string"}},
 "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name",
  "items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string"}}}},
 "color":{"type":"string"}}}}}`

const gdPath = "/apis/example.dev/v1/namespaces/default/gadgets"

func newPatchServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	api, ts := newTestServer(t)
	var s schema.Schema
	if err := json.Unmarshal([]byte(gadgetSchema), &s); err != nil {
		t.Fatal(err)
	}
	if err := api.Register(registry.Resource{Group: "example.dev", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true, Schema: &s}); err != nil {
		t.Fatal(err)
	}
	return api, ts
}

func mustCode(t *testing.T, r response, code int) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("code = %d, want %d; body %s", r.code, code, r.body)
	}
	return r.object(t)
}

func managedFieldsOf(t *testing.T, o map[string]any) []map[string]any {
	t.Helper()
	md, _ := o["metadata"].(map[string]any)
	list, _ := md["managedFields"].([]any)
	out := make([]map[string]any, len(list))
	for i, e := range list {
		out[i] = e.(map[string]any)
	}
	return out
}

// entry returns the managedFields entry of manager with operation.
func entry(t *testing.T, o map[string]any, manager, op string) map[string]any {
	t.Helper()
	for _, e := range managedFieldsOf(t, o) {
		if e["manager"] == manager && e["operation"] == op {
			return e
		}
	}
	return nil
}

func jsonEq(t *testing.T, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	var g any
	_ = json.Unmarshal(gb, &g)
	return meta.DeepEqual(g, w)
}

func TestJSONPatch(t *testing.T) {
	_, ts := newPatchServer(t)
	cur := mustCode(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`), 201)
	rv := str(cur, "metadata", "resourceVersion")
	p := func(body string, q ...string) response {
		path := wdPath + "/w"
		if len(q) > 0 {
			path += "?" + q[0]
		}
		return do(t, ts, "PATCH", path, body, "Content-Type", ctJSONPatch)
	}
	got := mustCode(t, p(`[{"op":"test","path":"/spec/size","value":1},{"op":"replace","path":"/spec/size","value":2},{"op":"add","path":"/spec/tags","value":["a"]},{"op":"remove","path":"/spec/color"}]`), 200)
	if str(got, "spec", "size") != "2" || str(got, "spec", "tags") != `["a"]` || str(got, "spec", "color") != "" {
		t.Fatalf("patched: %v", got["spec"])
	}
	rv = str(got, "metadata", "resourceVersion")

	for _, tc := range []struct {
		name, body string
		code       int
		reason     meta.StatusReason
	}{
		{"failed test", `[{"op":"test","path":"/spec/size","value":9},{"op":"replace","path":"/spec/size","value":3}]`, 422, meta.StatusReasonInvalid},
		{"missing path", `[{"op":"replace","path":"/spec/nothing/deeper","value":1}]`, 422, meta.StatusReasonInvalid},
		{"remove missing", `[{"op":"remove","path":"/spec/color"}]`, 422, meta.StatusReasonInvalid},
		{"not an array", `{"op":"add"}`, 400, meta.StatusReasonBadRequest},
		{"not JSON", `[{"op":`, 400, meta.StatusReasonBadRequest},
		{"unknown op", `[{"op":"frobnicate","path":"/spec/size"}]`, 400, meta.StatusReasonBadRequest},
		{"no op", `[{"path":"/spec/size"}]`, 400, meta.StatusReasonBadRequest},
		{"rename", `[{"op":"replace","path":"/metadata/name","value":"other"}]`, 400, meta.StatusReasonBadRequest},
		{"other namespace", `[{"op":"replace","path":"/metadata/namespace","value":"kube-system"}]`, 400, meta.StatusReasonBadRequest},
		{"change uid", `[{"op":"replace","path":"/metadata/uid","value":"00000000-0000-0000-0000-000000000000"}]`, 422, meta.StatusReasonInvalid},
		{"invalid result", `[{"op":"replace","path":"/spec/size","value":-1}]`, 422, meta.StatusReasonInvalid},
		{"type error", `[{"op":"replace","path":"/spec/size","value":"big"}]`, 422, meta.StatusReasonInvalid},
		{"remove required", `[{"op":"remove","path":"/spec/size"}]`, 422, meta.StatusReasonInvalid},
		{"stale resourceVersion", `[{"op":"replace","path":"/metadata/resourceVersion","value":"1"},{"op":"replace","path":"/spec/size","value":3}]`, 409, meta.StatusReasonConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p(tc.body).status(t, tc.code, tc.reason)
			if now := str(do(t, ts, "GET", wdPath+"/w", "").object(t), "metadata", "resourceVersion"); now != rv {
				t.Fatalf("resourceVersion changed from %s to %s: something was written", rv, now)
			}
		})
	}

	// kube-apiserver's limit on operations.
	ops := make([]string, patchOpsLimit+1)
	for i := range ops {
		ops[i] = `{"op":"test","path":"/spec/size","value":2}`
	}
	p("["+strings.Join(ops, ",")+"]").status(t, 413, meta.StatusReasonRequestEntityTooLarge)
	// A copy bomb: each copy doubles the document.
	bomb := []string{`{"op":"add","path":"/spec/tags","value":["` + strings.Repeat("x", 1000) + `"]}`}
	for i := 0; i < 40; i++ {
		bomb = append(bomb, `{"op":"copy","from":"/spec/tags","path":"/spec/t`+fmt.Sprint(i)+`"}`, `{"op":"copy","from":"/spec","path":"/spec/tags/-"}`)
	}
	if r := p("[" + strings.Join(bomb, ",") + "]"); r.code != 413 && r.code != 422 {
		t.Fatalf("copy bomb: %d %.300s", r.code, r.body)
	}

	// Unknown members of operations and duplicate keys are field validation
	// problems.
	r := p(`[{"op":"replace","path":"/spec/size","value":3,"valeu":4}]`, "fieldValidation=Strict")
	st := r.status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, `json patch unknown field \"[0].valeu\"`) && !strings.Contains(st.Message, `json patch unknown field "[0].valeu"`) {
		t.Fatalf("strict json patch: %s", st.Message)
	}
	r = p(`[{"op":"replace","path":"/spec/size","value":3,"valeu":4}]`)
	if r.code != 200 || len(r.header.Values("Warning")) != 1 {
		t.Fatalf("warn json patch: %d %v", r.code, r.header.Values("Warning"))
	}
}

const patchOpsLimit = 10000

func TestMergePatchFieldValidation(t *testing.T) {
	_, ts := newPatchServer(t)
	mustCode(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`), 201)
	p := func(body, q string) response {
		return do(t, ts, "PATCH", wdPath+"/w?"+q, body, "Content-Type", ctMergePatch)
	}
	got := mustCode(t, p(`{"spec":{"color":null,"size":2}}`, ""), 200)
	if str(got, "spec", "color") != "" || str(got, "spec", "size") != "2" {
		t.Fatalf("merge patch: %v", got["spec"])
	}
	bad := `{"spec":{"size":3,"bogus":1,"Size":2,"size":4},"extra":true}`
	// Strict: 422 with one cause on "patch" naming every problem.
	st := p(bad, "fieldValidation=Strict").status(t, 422, meta.StatusReasonInvalid)
	if len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "patch" {
		t.Fatalf("causes = %+v", st.Details.Causes)
	}
	for _, want := range []string{`duplicate field \"spec.size\"`, `unknown field \"extra\"`, `unknown field \"spec.Size\"`, `unknown field \"spec.bogus\"`} {
		if !strings.Contains(st.Details.Causes[0].Message, strings.ReplaceAll(want, `\"`, `"`)) {
			t.Errorf("strict message %q lacks %s", st.Details.Causes[0].Message, want)
		}
	}
	if str(do(t, ts, "GET", wdPath+"/w", "").object(t), "spec", "size") != "2" {
		t.Fatal("a refused patch was written")
	}
	// Warn (the default): one Warning per problem.
	r := p(bad, "")
	got = mustCode(t, r, 200)
	warnings := r.header.Values("Warning")
	if len(warnings) != 4 || !strings.Contains(strings.Join(warnings, "\n"), `299 - "unknown field \"spec.bogus\""`) {
		t.Fatalf("warnings = %q", warnings)
	}
	if str(got, "spec", "size") != "4" || str(got, "spec", "bogus") != "" {
		t.Fatalf("warn: %v", got["spec"])
	}
	// Ignore: silent.
	if r := p(bad, "fieldValidation=Ignore"); r.code != 200 || len(r.header.Values("Warning")) != 0 {
		t.Fatalf("ignore: %d %v", r.code, r.header.Values("Warning"))
	}
	p(bad, "fieldValidation=Loud").status(t, 422, meta.StatusReasonInvalid)
	p(`{"spec":`, "").status(t, 400, meta.StatusReasonBadRequest)
	p(`[1,2]`, "").status(t, 400, meta.StatusReasonBadRequest)
	p(`{"spec":{"size":"big"}}`, "fieldValidation=Ignore").status(t, 422, meta.StatusReasonInvalid)
	p(`{"spec":{"size":1}}`, "force=true").status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "PATCH", wdPath+"/nope", `{}`, "Content-Type", ctMergePatch).status(t, 404, meta.StatusReasonNotFound)
	// Deeply nested input is refused, not a crash.
	deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	p(`{"spec":{"extra":`+deep+`}}`, "").status(t, 400, meta.StatusReasonBadRequest)
	// Bodies beyond the limit are a 413.
	if r := p(`{"metadata":{"annotations":{"a":"`+strings.Repeat("x", 2<<20)+`"}}}`, ""); r.code != 413 {
		t.Fatalf("huge patch: %d", r.code)
	}
}

func TestStrategicMergePatch(t *testing.T) {
	_, ts := newPatchServer(t)
	// Built-in types: served.
	mustCode(t, do(t, ts, "POST", cmPath, `{"metadata":{"name":"c","labels":{"a":"1"}},"data":{"k":"v"}}`), 201)
	got := mustCode(t, do(t, ts, "PATCH", cmPath+"/c", `{"metadata":{"labels":{"b":"2"}},"data":{"k":null,"k2":"v2"}}`, "Content-Type", ctStrategic), 200)
	if str(got, "metadata", "labels") != `{"a":"1","b":"2"}` || str(got, "data") != `{"k2":"v2"}` {
		t.Fatalf("strategic on a configmap: %s", got)
	}
	// Custom types without strategic merge metadata: 415, as kube-apiserver.
	mustCode(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`), 201)
	st := do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":2}}`, "Content-Type", ctStrategic).status(t, 415, meta.StatusReasonUnsupportedMediaType)
	if !strings.Contains(st.Message, ctMergePatch) || !strings.Contains(st.Message, ctApply) || strings.Contains(st.Message, ctStrategic) {
		t.Fatalf("415 message: %s", st.Message)
	}
	// Custom types that declare it: served, driven by the schema.
	mustCode(t, do(t, ts, "POST", gdPath, `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g","finalizers":["a/b"]},"spec":{"size":1,"tags":["x"],"ports":[{"name":"http","port":80},{"name":"https","port":443}]}}`), 201)
	got = mustCode(t, do(t, ts, "PATCH", gdPath+"/g", `{"metadata":{"finalizers":["c/d"]},"spec":{"tags":["y"],"ports":[{"name":"https","port":8443},{"name":"http","$patch":"delete"},{"name":"admin","port":9000}]}}`, "Content-Type", ctStrategic), 200)
	if str(got, "spec", "tags") != `["y","x"]` || str(got, "spec", "ports") != `[{"name":"https","port":8443},{"name":"admin","port":9000}]` ||
		str(got, "metadata", "finalizers") != `["c/d","a/b"]` {
		t.Fatalf("strategic on a gadget: %v %v", got["spec"], got["metadata"])
	}
	got = mustCode(t, do(t, ts, "PATCH", gdPath+"/g", `{"spec":{"$setElementOrder/ports":[{"name":"admin"},{"name":"https"}],"$deleteFromPrimitiveList/tags":["x"]}}`, "Content-Type", ctStrategic), 200)
	if str(got, "spec", "tags") != `["y"]` || str(got, "spec", "ports") != `[{"name":"admin","port":9000},{"name":"https","port":8443}]` {
		t.Fatalf("directives: %v", got["spec"])
	}
	do(t, ts, "PATCH", gdPath+"/g", `{"spec":{"ports":[{"port":1}]}}`, "Content-Type", ctStrategic).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "PATCH", gdPath+"/g", `{"spec":{"$patch":"explode"}}`, "Content-Type", ctStrategic).status(t, 400, meta.StatusReasonBadRequest)
	mustCode(t, do(t, ts, "PATCH", gdPath+"/g", `{"spec":{"bogus":1}}`, "Content-Type", ctStrategic), 200)
	st = do(t, ts, "PATCH", gdPath+"/g?fieldValidation=Strict", `{"spec":{"bogus":1}}`, "Content-Type", ctStrategic).status(t, 422, meta.StatusReasonInvalid)
	if st.Details.Causes[0].Field != "patch" || !strings.Contains(st.Message, `unknown field "spec.bogus"`) {
		t.Fatalf("strict strategic: %+v", st)
	}
	// Scale is a built-in kind.
	mustCode(t, do(t, ts, "PATCH", wdPath+"/w/scale", `{"spec":{"replicas":3}}`, "Content-Type", ctStrategic), 200)
	// Unknown patch types.
	do(t, ts, "PATCH", cmPath+"/c", `{}`, "Content-Type", "text/plain").status(t, 415, meta.StatusReasonUnsupportedMediaType)
}

func TestApplyHTTP(t *testing.T) {
	_, ts := newPatchServer(t)
	apply := func(name, manager, body string, q ...string) response {
		path := wdPath + "/" + name + "?fieldManager=" + manager
		for _, x := range q {
			path += "&" + x
		}
		return do(t, ts, "PATCH", path, body, "Content-Type", ctApply)
	}
	cfg := `apiVersion: example.dev/v1
kind: Widget
metadata:
  name: w
spec:
  size: 1
  color: red
  ports:
  - name: http
    port: 80
`
	// Apply creates.
	created := mustCode(t, apply("w", "alice", cfg), 201)
	rv := str(created, "metadata", "resourceVersion")
	a := entry(t, created, "alice", "Apply")
	if a == nil || a["apiVersion"] != "example.dev/v1" || a["fieldsType"] != "FieldsV1" || a["time"] == nil ||
		!jsonEq(t, a["fieldsV1"], `{"f:spec":{"f:color":{},"f:size":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}`) {
		t.Fatalf("managedFields after create: %v", created["metadata"])
	}
	// A no-op re-apply writes nothing.
	again := mustCode(t, apply("w", "alice", cfg), 200)
	if str(again, "metadata", "resourceVersion") != rv {
		t.Fatalf("no-op apply wrote a new resourceVersion %s (was %s)", str(again, "metadata", "resourceVersion"), rv)
	}
	// A second manager conflicts on the fields it would change.
	st := apply("w", "bob", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"color":"red"}}`).status(t, 409, meta.StatusReasonConflict)
	if len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".spec.size" || st.Details.Causes[0].Type != meta.CauseTypeFieldManagerConflict ||
		st.Details.Causes[0].Message != `conflict with "alice"` || st.Message != `Apply failed with 1 conflict: conflict with "alice": .spec.size` {
		t.Fatalf("conflict: %+v", st)
	}
	// ... and shares the ones whose values agree; force takes ownership.
	got := mustCode(t, apply("w", "bob", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"color":"red"}}`, "force=true"), 200)
	if str(got, "spec", "size") != "2" || !jsonEq(t, entry(t, got, "bob", "Apply")["fieldsV1"], `{"f:spec":{"f:color":{},"f:size":{}}}`) ||
		!jsonEq(t, entry(t, got, "alice", "Apply")["fieldsV1"], `{"f:spec":{"f:color":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}`) {
		t.Fatalf("after force: %v", got["metadata"])
	}
	// alice drops color: bob still owns it, so it stays; she drops ports:
	// nobody else owns them, so they go.
	got = mustCode(t, apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{}}`), 200)
	if str(got, "spec", "color") != "red" || str(got, "spec", "ports") != "" {
		t.Fatalf("after alice's removal: %v", got["spec"])
	}

	// Bad applies.
	apply("w", "", cfg).status(t, 422, meta.StatusReasonInvalid)
	st = do(t, ts, "PATCH", wdPath+"/w", cfg, "Content-Type", ctApply).status(t, 422, meta.StatusReasonInvalid)
	if st.Details.Kind != "PatchOptions" || st.Details.Causes[0].Field != "fieldManager" || st.Details.Causes[0].Type != meta.CauseTypeFieldValueRequired {
		t.Fatalf("missing fieldManager: %+v", st)
	}
	apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","managedFields":[{"manager":"x","operation":"Apply"}]}}`).status(t, 400, meta.StatusReasonBadRequest)
	for _, level := range []string{"Strict", "Warn", "Ignore"} {
		st = apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"bogus":1}}`, "fieldValidation="+level).status(t, 400, meta.StatusReasonBadRequest)
		if !strings.Contains(st.Message, ".spec.bogus: field not declared in schema") {
			t.Fatalf("unknown field (%s): %s", level, st.Message)
		}
	}
	apply("w", "alice", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"}}`).status(t, 400, meta.StatusReasonBadRequest)
	apply("w", "alice", `{"metadata":{"name":"w"}}`).status(t, 400, meta.StatusReasonBadRequest)
	apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"other"}}`).status(t, 400, meta.StatusReasonBadRequest)
	apply("w", "alice", "apiVersion: [unclosed").status(t, 400, meta.StatusReasonBadRequest)
	apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"big"}}`).status(t, 422, meta.StatusReasonInvalid)
	apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":-5}}`, "force=true").status(t, 422, meta.StatusReasonInvalid)
	apply("w", "alice", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}`, "force=maybe").status(t, 400, meta.StatusReasonBadRequest)
	apply("w", strings.Repeat("m", 129), cfg).status(t, 422, meta.StatusReasonInvalid)
	// Duplicate keys: warned, or refused when Strict.
	dup := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"color":"red","color":"red"}}`
	if r := apply("w", "bob", dup); r.code != 200 || len(r.header.Values("Warning")) != 1 {
		t.Fatalf("duplicate (Warn): %d %v %s", r.code, r.header.Values("Warning"), r.body)
	}
	apply("w", "bob", dup, "fieldValidation=Strict").status(t, 400, meta.StatusReasonBadRequest)

	// Apply to /status: the manager owns status fields only.
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w/status?fieldManager=ctrl", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"Ready"}}`, "Content-Type", ctApply), 200)
	var status map[string]any
	for _, e := range managedFieldsOf(t, got) {
		if e["manager"] == "ctrl" {
			status = e
		}
	}
	if str(got, "status", "phase") != "Ready" || status == nil || status["subresource"] != "status" || status["operation"] != "Apply" ||
		!jsonEq(t, status["fieldsV1"], `{"f:status":{"f:phase":{}}}`) {
		t.Fatalf("status apply: %v", got)
	}
	// /status of a missing object is not created.
	do(t, ts, "PATCH", wdPath+"/nope/status?fieldManager=ctrl", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"nope"},"status":{"phase":"Ready"}}`, "Content-Type", ctApply).status(t, 404, meta.StatusReasonNotFound)

	// A YAML apply to a configmap.
	got = mustCode(t, do(t, ts, "PATCH", cmPath+"/yc?fieldManager=kubectl", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yc\ndata:\n  k: v\n", "Content-Type", ctApply), 201)
	if str(got, "data", "k") != "v" {
		t.Fatalf("yaml apply: %v", got)
	}
}

// The spec's example: a ConfigMap applied by kubectl has exactly this
// managedFields entry; an update by another manager moves the field.
func TestManagedFieldsSpecExampleHTTP(t *testing.T) {
	_, ts := newPatchServer(t)
	got := mustCode(t, do(t, ts, "PATCH", cmPath+"/test-cm?fieldManager=kubectl", `apiVersion: v1
kind: ConfigMap
metadata:
  name: test-cm
  namespace: default
  labels:
    test-label: test
data:
  key: some value
`, "Content-Type", ctApply), 201)
	mf := managedFieldsOf(t, got)
	if len(mf) != 1 {
		t.Fatalf("managedFields: %v", mf)
	}
	e := mf[0]
	if e["manager"] != "kubectl" || e["operation"] != "Apply" || e["apiVersion"] != "v1" || e["fieldsType"] != "FieldsV1" || e["time"] == nil || e["subresource"] != nil ||
		!jsonEq(t, e["fieldsV1"], `{"f:metadata":{"f:labels":{"f:test-label":{}}},"f:data":{"f:key":{}}}`) {
		t.Fatalf("managedFields entry: %v", e)
	}
	got = mustCode(t, do(t, ts, "PUT", cmPath+"/test-cm", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"test-cm","labels":{"test-label":"test"}},"data":{"key":"new value"}}`,
		"User-Agent", "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abcdef"), 200)
	kcm := entry(t, got, "kube-controller-manager", "Update")
	kubectl := entry(t, got, "kubectl", "Apply")
	if kcm == nil || kcm["apiVersion"] != "v1" || !jsonEq(t, kcm["fieldsV1"], `{"f:data":{"f:key":{}}}`) ||
		kubectl == nil || !jsonEq(t, kubectl["fieldsV1"], `{"f:metadata":{"f:labels":{"f:test-label":{}}}}`) {
		t.Fatalf("after the update: %v", managedFieldsOf(t, got))
	}
}

func TestManagedFieldsOnWrites(t *testing.T) {
	_, ts := newPatchServer(t)
	// POST: an Update by the fieldManager.
	got := mustCode(t, do(t, ts, "POST", wdPath+"?fieldManager=creator", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`), 201)
	if e := entry(t, got, "creator", "Update"); e == nil || !jsonEq(t, e["fieldsV1"], `{"f:spec":{".":{},"f:size":{}}}`) {
		t.Fatalf("create: %v", managedFieldsOf(t, got))
	}
	// Without fieldManager: the User-Agent's product.
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"color":"red"}}`, "Content-Type", ctMergePatch, "User-Agent", "kubectl/v1.36.3 (linux/amd64) kubernetes/x"), 200)
	if e := entry(t, got, "kubectl", "Update"); e == nil || !jsonEq(t, e["fieldsV1"], `{"f:spec":{"f:color":{}}}`) {
		t.Fatalf("patch: %v", managedFieldsOf(t, got))
	}
	// An empty list does not clear.
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w?fieldManager=x", `{"metadata":{"managedFields":[]}}`, "Content-Type", ctMergePatch), 200)
	if len(managedFieldsOf(t, got)) != 2 {
		t.Fatalf("after []: %v", managedFieldsOf(t, got))
	}
	// [{}] clears; then an apply conflicts with before-first-apply.
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w", `[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]`, "Content-Type", ctJSONPatch), 200)
	if len(managedFieldsOf(t, got)) != 0 {
		t.Fatalf("after [{}]: %v", managedFieldsOf(t, got))
	}
	st := do(t, ts, "PATCH", wdPath+"/w?fieldManager=applier", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5}}`, "Content-Type", ctApply).
		status(t, 409, meta.StatusReasonConflict)
	if !strings.Contains(st.Message, `"before-first-apply"`) {
		t.Fatalf("apply after reset: %s", st.Message)
	}
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w?fieldManager=applier&force=true", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5}}`, "Content-Type", ctApply), 200)
	if e := entry(t, got, "before-first-apply", "Update"); e == nil || !jsonEq(t, e["fieldsV1"], `{"f:spec":{".":{},"f:color":{}}}`) {
		t.Fatalf("before-first-apply: %v", managedFieldsOf(t, got))
	}
	// Status writes record the subresource.
	got = mustCode(t, do(t, ts, "PATCH", wdPath+"/w/status?fieldManager=ctrl", `{"status":{"phase":"Ready"}}`, "Content-Type", ctMergePatch), 200)
	if e := entry(t, got, "ctrl", "Update"); e == nil || e["subresource"] != "status" || !jsonEq(t, e["fieldsV1"], `{"f:status":{".":{},"f:phase":{}}}`) {
		t.Fatalf("status update: %v", managedFieldsOf(t, got))
	}
	// Bad fieldManager values.
	do(t, ts, "POST", wdPath+"?fieldManager="+strings.Repeat("m", 129), `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":1}}`).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "POST", wdPath+"?fieldManager=a%07b", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":1}}`).status(t, 422, meta.StatusReasonInvalid)
}

func TestDryRun(t *testing.T) {
	_, ts := newPatchServer(t)
	mustCode(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`), 201)
	cur := do(t, ts, "GET", wdPath+"/w", "").object(t)
	rv := str(cur, "metadata", "resourceVersion")
	ws := startWatch(t, ts, wdPath+"?watch=true&resourceVersion="+rv)

	// POST: the would-be object, generated values included; nothing stored.
	got := mustCode(t, do(t, ts, "POST", wdPath+"?dryRun=All", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"generateName":"gen-"},"spec":{"size":1}}`), 201)
	name := str(got, "metadata", "name")
	if !strings.HasPrefix(name, "gen-") || str(got, "metadata", "uid") == "" || str(got, "metadata", "creationTimestamp") == "" || len(managedFieldsOf(t, got)) != 1 {
		t.Fatalf("dry-run create: %s", got)
	}
	do(t, ts, "GET", wdPath+"/"+name, "").status(t, 404, meta.StatusReasonNotFound)
	// Validation still runs.
	do(t, ts, "POST", wdPath+"?dryRun=All", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"x"},"spec":{"size":-1}}`).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "POST", wdPath+"?dryRun=All", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`).status(t, 409, meta.StatusReasonAlreadyExists)
	// PUT, PATCH (every type) and apply.
	put := fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":%q},"spec":{"size":7}}`, rv)
	if g := mustCode(t, do(t, ts, "PUT", wdPath+"/w?dryRun=All", put), 200); str(g, "spec", "size") != "7" {
		t.Fatalf("dry-run put: %v", g["spec"])
	}
	for _, tc := range []struct{ ct, q, body string }{
		{ctMergePatch, "", `{"spec":{"size":8}}`},
		{ctJSONPatch, "", `[{"op":"replace","path":"/spec/size","value":8}]`},
		{ctApply, "&fieldManager=m&force=true", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":8}}`},
	} {
		g := mustCode(t, do(t, ts, "PATCH", wdPath+"/w?dryRun=All"+tc.q, tc.body, "Content-Type", tc.ct), 200)
		if str(g, "spec", "size") != "8" {
			t.Fatalf("dry-run %s: %v", tc.ct, g["spec"])
		}
	}
	mustCode(t, do(t, ts, "PATCH", wdPath+"/new?dryRun=All&fieldManager=m", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"new"},"spec":{"size":1}}`, "Content-Type", ctApply), 201)
	do(t, ts, "GET", wdPath+"/new", "").status(t, 404, meta.StatusReasonNotFound)
	// Conflicts are still detected.
	mustCode(t, do(t, ts, "PATCH", wdPath+"/w?fieldManager=owner&force=true", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`, "Content-Type", ctApply), 200)
	do(t, ts, "PATCH", wdPath+"/w?dryRun=All&fieldManager=other", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`, "Content-Type", ctApply).status(t, 409, meta.StatusReasonConflict)
	// DELETE.
	r := do(t, ts, "DELETE", wdPath+"/w?dryRun=All", "")
	if r.code != 200 {
		t.Fatalf("dry-run delete: %d %s", r.code, r.body)
	}
	after := do(t, ts, "GET", wdPath+"/w", "").object(t)
	if str(after, "spec", "size") != "1" {
		t.Fatalf("after dry runs: %v", after["spec"])
	}
	// Only the one real write (the forced apply) reached watchers.
	ev := ws.next(t)
	if ev["type"] != "MODIFIED" || str(ev["object"].(map[string]any), "metadata", "resourceVersion") != str(after, "metadata", "resourceVersion") {
		t.Fatalf("first event after the dry runs: %v", ev)
	}
	// Unknown dryRun values.
	for _, req := range []struct{ method, path, body, ct string }{
		{"POST", wdPath + "?dryRun=Some", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"z"},"spec":{"size":1}}`, "application/json"},
		{"PUT", wdPath + "/w?dryRun=true", put, "application/json"},
		{"PATCH", wdPath + "/w?dryRun=1", `{}`, ctMergePatch},
		{"DELETE", wdPath + "/w?dryRun=yes", "", "application/json"},
	} {
		do(t, ts, req.method, req.path, req.body, "Content-Type", req.ct).status(t, 422, meta.StatusReasonInvalid)
	}
}

func TestFieldValidationCreateUpdate(t *testing.T) {
	_, ts := newPatchServer(t)
	bad := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","bogus":1},"spec":{"size":1,"Size":2,"size":3,"extra":{}}}`
	st := do(t, ts, "POST", wdPath+"?fieldValidation=Strict", bad).status(t, 400, meta.StatusReasonBadRequest)
	for _, want := range []string{`unknown field "metadata.bogus"`, `unknown field "spec.Size"`, `unknown field "spec.extra"`, `duplicate field "spec.size"`} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("strict create message %q lacks %s", st.Message, want)
		}
	}
	r := do(t, ts, "POST", wdPath, bad)
	mustCode(t, r, 201)
	if len(r.header.Values("Warning")) != 4 {
		t.Fatalf("warnings: %q", r.header.Values("Warning"))
	}
	if r := do(t, ts, "POST", wdPath+"?fieldValidation=Ignore", strings.Replace(bad, `"w"`, `"w2"`, 1)); r.code != 201 || len(r.header.Values("Warning")) != 0 {
		t.Fatalf("ignore: %d %v", r.code, r.header.Values("Warning"))
	}
	do(t, ts, "PUT", wdPath+"/w?fieldValidation=Strict", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"bogus":true}}`).status(t, 400, meta.StatusReasonBadRequest)
	// Type errors and schema violations are errors at every level, one
	// cause per field.
	st = do(t, ts, "POST", wdPath+"?fieldValidation=Ignore", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":"big","replicas":"x","tags":["a","a"]}}`).status(t, 422, meta.StatusReasonInvalid)
	fields := map[string]bool{}
	for _, c := range st.Details.Causes {
		fields[c.Field] = true
	}
	if !fields["spec.size"] || !fields["spec.replicas"] || !fields["spec.tags[1]"] {
		t.Fatalf("causes: %+v", st.Details.Causes)
	}
	// YAML bodies: duplicate keys are found too.
	r = do(t, ts, "POST", wdPath, "apiVersion: example.dev/v1\nkind: Widget\nmetadata:\n  name: yy\nspec:\n  size: 1\n  size: 2\n", "Content-Type", "application/yaml")
	if r.code != 201 || len(r.header.Values("Warning")) != 1 {
		t.Fatalf("yaml duplicate: %d %q %s", r.code, r.header.Values("Warning"), r.body)
	}
}
