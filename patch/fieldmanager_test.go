package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kapi-dev/kapi/meta"
)

var (
	configMapGVK = meta.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widgetGVK    = meta.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Widget"}
)

// The spec's own example: a ConfigMap applied by kubectl, then a data key
// changed by kube-controller-manager through an update.
func TestManagedFieldsSpecExample(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, configMapSchema), configMapGVK, false)
	cfg := obj(t, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: test-cm
  namespace: default
  labels:
    test-label: test
data:
  key: some value
`)
	out, err := fm.Apply(nil, cfg, ApplyOptions{Manager: "kubectl", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	md := out["metadata"].(map[string]any)
	want := `[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2010-10-10T00:00:00Z","fieldsType":"FieldsV1",
	  "fieldsV1":{"f:metadata":{"f:labels":{"f:test-label":{}}},"f:data":{"f:key":{}}}}]`
	if !sameJSON(t, md["managedFields"], want) {
		t.Fatalf("managedFields after apply = %s\nwant %s", toJSON(t, md["managedFields"]), want)
	}
	if !sameJSON(t, out["data"], `{"key":"some value"}`) || md["name"] != "test-cm" {
		t.Fatalf("applied object = %s", toJSON(t, out))
	}

	// kube-controller-manager updates data.key: the field moves to it.
	upd := meta.DeepCopyMap(out)
	upd["data"].(map[string]any)["key"] = "new value"
	if err := fm.Update(out, upd, "kube-controller-manager", "", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want = `[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2010-10-10T00:00:00Z","fieldsType":"FieldsV1",
	  "fieldsV1":{"f:metadata":{"f:labels":{"f:test-label":{}}}}},
	 {"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2010-10-10T01:00:00Z","fieldsType":"FieldsV1",
	  "fieldsV1":{"f:data":{"f:key":{}}}}]`
	if got := upd["metadata"].(map[string]any)["managedFields"]; !sameJSON(t, got, want) {
		t.Fatalf("managedFields after update = %s\nwant %s", toJSON(t, got), want)
	}

	// Had that been an apply, it would have conflicted.
	cfg2 := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"test-cm","namespace":"default"},"data":{"key":"other"}}`)
	_, err = fm.Apply(out, cfg2, ApplyOptions{Manager: "other", Now: t0})
	se, ok := meta.AsStatusError(err)
	if !ok || se.Code() != http.StatusConflict || se.Status.Reason != meta.StatusReasonConflict {
		t.Fatalf("conflicting apply: %v", err)
	}
	if len(se.Status.Details.Causes) != 1 || se.Status.Details.Causes[0].Field != ".data.key" ||
		se.Status.Details.Causes[0].Type != meta.CauseTypeFieldManagerConflict || se.Status.Details.Causes[0].Message != `conflict with "kubectl"` {
		t.Fatalf("conflict causes = %+v", se.Status.Details.Causes)
	}
	if se.Status.Message != `Apply failed with 1 conflict: conflict with "kubectl": .data.key` {
		t.Fatalf("conflict message = %q", se.Status.Message)
	}
}

func TestCreateRecordsUpdate(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, widgetSchema), widgetGVK, true)
	o := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u","labels":{"a":"b"}},
	  "spec":{"size":1,"ports":[{"name":"http","port":80}]},"status":{"phase":"x"}}`)
	if err := fm.Update(nil, o, "kubectl-create", "", t0); err != nil {
		t.Fatal(err)
	}
	want := `[{"manager":"kubectl-create","operation":"Update","apiVersion":"example.dev/v1","time":"2010-10-10T00:00:00Z","fieldsType":"FieldsV1",
	  "fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{".":{},"f:size":{},"f:ports":{".":{},"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}}]`
	if got := o["metadata"].(map[string]any)["managedFields"]; !sameJSON(t, got, want) {
		t.Fatalf("managedFields = %s\nwant %s", toJSON(t, got), want)
	}
}

func TestUpdateRules(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, widgetSchema), widgetGVK, true)
	base := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","uid":"u"},"spec":{"size":1,"color":"red"}}`)
	if err := fm.Update(nil, base, "creator", "", t0); err != nil {
		t.Fatal(err)
	}
	mfOf := func(o map[string]any) any { return o["metadata"].(map[string]any)["managedFields"] }

	t.Run("a no-op update keeps everything", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		if err := fm.Update(base, n, "other", "", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, mfOf(n), toJSON(t, mfOf(base))) {
			t.Fatalf("managedFields = %s, want %s", toJSON(t, mfOf(n)), toJSON(t, mfOf(base)))
		}
	})
	t.Run("an empty list does not clear", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		n["metadata"].(map[string]any)["managedFields"] = []any{}
		n["spec"].(map[string]any)["color"] = "blue"
		if err := fm.Update(base, n, "painter", "", t0); err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, n)
		if e["creator/Update"] == nil || e["painter/Update"] == nil || !sameJSON(t, e["painter/Update"]["fieldsV1"], `{"f:spec":{"f:color":{}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(n)))
		}
	})
	t.Run("[{}] clears, and the object stays untracked", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		n["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{}}
		n["spec"].(map[string]any)["color"] = "blue"
		if err := fm.Update(base, n, "painter", "", t0); err != nil {
			t.Fatal(err)
		}
		if v, ok := n["metadata"].(map[string]any)["managedFields"]; ok {
			t.Fatalf("managedFields = %s, want none", toJSON(t, v))
		}
		// The next apply: every field belongs to before-first-apply.
		cfg := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`)
		_, err := fm.Apply(n, cfg, ApplyOptions{Manager: "applier", Now: t0})
		se, ok := meta.AsStatusError(err)
		if !ok || se.Code() != http.StatusConflict || !strings.Contains(se.Status.Message, `conflict with "before-first-apply" using example.dev/v1: .spec.size`) {
			t.Fatalf("apply after reset: %v", err)
		}
		out, err := fm.Apply(n, cfg, ApplyOptions{Manager: "applier", Force: true, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, out)
		if !sameJSON(t, e["applier/Apply"]["fieldsV1"], `{"f:spec":{"f:size":{}}}`) ||
			!sameJSON(t, e["before-first-apply/Update"]["fieldsV1"], `{"f:spec":{".":{},"f:color":{}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(out)))
		}
	})
	t.Run("managedFields sent to a subresource are ignored", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		n["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{}}
		n["status"] = map[string]any{"phase": "Ready"}
		if err := fm.Update(base, n, "ctrl", "status", t0); err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, n)
		if e["creator/Update"] == nil || !sameJSON(t, e["ctrl/Update/status"]["fieldsV1"], `{"f:status":{".":{},"f:phase":{}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(n)))
		}
	})
	t.Run("a status write owns only status", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		n["status"] = map[string]any{"phase": "Ready"}
		n["spec"].(map[string]any)["color"] = "green"
		if err := fm.Update(base, n, "ctrl", "status", t0); err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, n)
		if !sameJSON(t, e["ctrl/Update/status"]["fieldsV1"], `{"f:status":{".":{},"f:phase":{}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(n)))
		}
	})
	t.Run("the manager defaults to unknown", func(t *testing.T) {
		n := meta.DeepCopyMap(base)
		n["spec"].(map[string]any)["color"] = "green"
		if err := fm.Update(base, n, "", "", t0); err != nil {
			t.Fatal(err)
		}
		if managedEntries(t, n)["unknown/Update"] == nil {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(n)))
		}
	})
	t.Run("at most ten update managers", func(t *testing.T) {
		cur := meta.DeepCopyMap(base)
		for i := 0; i < 15; i++ {
			n := meta.DeepCopyMap(cur)
			labels, _ := n["spec"].(map[string]any)["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
				n["spec"].(map[string]any)["labels"] = labels
			}
			labels[string(rune('a'+i))] = "x"
			if err := fm.Update(cur, n, "m"+string(rune('a'+i)), "", t0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
			cur = n
		}
		e := managedEntries(t, cur)
		if len(e) > MaxUpdateManagers || e["ancient-changes/Update"] == nil || e["mo/Update"] == nil {
			t.Fatalf("managedFields = %s", toJSON(t, mfOf(cur)))
		}
	})
}

func TestApply(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, widgetSchema), widgetGVK, true)
	apply := func(live map[string]any, manager string, force bool, y string) (map[string]any, error) {
		return fm.Apply(live, obj(t, y), ApplyOptions{Manager: manager, Force: force, Now: t0})
	}
	w1, err := apply(nil, "a", false, `
apiVersion: example.dev/v1
kind: Widget
metadata: {name: w}
spec:
  size: 1
  tags: [p, q]
  ports:
  - {name: http, port: 80}
  - {name: https, port: 443}
`)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("shared ownership when values agree", func(t *testing.T) {
		out, err := apply(w1, "b", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)
		if err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, out)
		if !sameJSON(t, e["b/Apply"]["fieldsV1"], `{"f:spec":{"f:size":{}}}`) || e["a/Apply"] == nil {
			t.Fatalf("managedFields = %s", toJSON(t, out["metadata"]))
		}
	})
	t.Run("granular lists: another manager adds an element", func(t *testing.T) {
		out, err := apply(w1, "b", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"ports":[{"name":"admin","port":9000}],"tags":["z"]}}`)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, out["spec"], `{"size":1,"tags":["p","q","z"],"ports":[{"name":"http","port":80},{"name":"https","port":443},{"name":"admin","port":9000}]}`) {
			t.Fatalf("spec = %s", toJSON(t, out["spec"]))
		}
	})
	t.Run("conflicts name each field and manager; force takes ownership", func(t *testing.T) {
		cfg := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"ports":[{"name":"http","port":81}]}}`
		_, err := apply(w1, "b", false, cfg)
		se, ok := meta.AsStatusError(err)
		if !ok || se.Code() != http.StatusConflict {
			t.Fatalf("err = %v", err)
		}
		fields := []string{}
		for _, c := range se.Status.Details.Causes {
			fields = append(fields, c.Field+" "+c.Message)
		}
		if strings.Join(fields, "|") != `.spec.ports[name="http"].port conflict with "a"|.spec.size conflict with "a"` {
			t.Fatalf("causes = %q", fields)
		}
		if !strings.HasPrefix(se.Status.Message, "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.ports[name=\"http\"].port\n- .spec.size") {
			t.Fatalf("message = %q", se.Status.Message)
		}
		out, err := apply(w1, "b", true, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, out)
		if !sameJSON(t, e["a/Apply"]["fieldsV1"], `{"f:spec":{"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{}},"k:{\"name\":\"https\"}":{".":{},"f:name":{},"f:port":{}}},"f:tags":{"v:\"p\"":{},"v:\"q\"":{}}}}`) {
			t.Fatalf("a's fields after force = %s", toJSON(t, e["a/Apply"]["fieldsV1"]))
		}
		if num, _ := meta.AsInt64(out["spec"].(map[string]any)["size"]); num != 2 {
			t.Fatalf("size = %v", out["spec"])
		}
	})
	t.Run("removing a field from the config removes it unless another manager owns it", func(t *testing.T) {
		shared, err := apply(w1, "b", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"tags":["q"]}}`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := apply(shared, "a", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"ports":[{"name":"http","port":80}]}}`)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, out["spec"], `{"size":1,"tags":["q"],"ports":[{"name":"http","port":80}]}`) {
			t.Fatalf("spec = %s", toJSON(t, out["spec"]))
		}
	})
	t.Run("a no-op apply returns the live object", func(t *testing.T) {
		out, err := apply(w1, "a", false, `
apiVersion: example.dev/v1
kind: Widget
metadata: {name: w}
spec:
  size: 1
  tags: [p, q]
  ports:
  - {name: http, port: 80}
  - {name: https, port: 443}
`)
		if err != nil {
			t.Fatal(err)
		}
		if toJSON(t, out) != toJSON(t, w1) {
			t.Fatalf("no-op apply changed the object:\n%s\n%s", toJSON(t, out), toJSON(t, w1))
		}
	})
	t.Run("bad configurations", func(t *testing.T) {
		for _, tc := range []struct{ cfg, want string }{
			{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"}}`, "invalid object type"},
			{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","managedFields":[{"manager":"x"}]}}`, "metadata.managedFields must be nil"},
			{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"big"}}`, "spec.size"},
			{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"ports":[{"name":"a","port":1},{"name":"a","port":2}]}}`, "spec.ports[1]"},
			{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"ports":[{"port":1}]}}`, "omits all key fields"},
			{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"bogus":1}}`, "bogus"},
		} {
			_, err := apply(w1, "a", false, tc.cfg)
			var pe *Error
			if !errors.As(err, &pe) || (pe.Code != 400 && pe.Code != 422) || !strings.Contains(pe.Error(), tc.want) {
				t.Errorf("apply %s: err %v, want a 400/422 mentioning %q", tc.cfg, err, tc.want)
			}
		}
	})
	t.Run("apply to status owns status only", func(t *testing.T) {
		out, err := fm.Apply(w1, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5},"status":{"phase":"Ready"}}`),
			ApplyOptions{Manager: "ctrl", Subresource: "status", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, out)
		if !sameJSON(t, e["ctrl/Apply/status"]["fieldsV1"], `{"f:status":{"f:phase":{}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, out["metadata"]))
		}
	})
	t.Run("atomic and unstructured parts", func(t *testing.T) {
		out, err := apply(w1, "c", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"selector":{"a":"1","b":"2"},"args":["x"],"extra":{"k":{"deep":[1,2]}}}}`)
		if err != nil {
			t.Fatal(err)
		}
		e := managedEntries(t, out)
		if !sameJSON(t, e["c/Apply"]["fieldsV1"], `{"f:spec":{"f:args":{},"f:selector":{},"f:extra":{"f:k":{".":{},"f:deep":{}}}}}`) {
			t.Fatalf("managedFields = %s", toJSON(t, e["c/Apply"]["fieldsV1"]))
		}
		_, err = apply(out, "d", false, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"selector":{"a":"1"}}}`)
		if se, ok := meta.AsStatusError(err); !ok || se.Code() != 409 || se.Status.Details.Causes[0].Field != ".spec.selector" {
			t.Fatalf("atomic map conflict: %v", err)
		}
	})
}

func TestApplyKubectlTakesOverClientSideApply(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, configMapSchema), configMapGVK, false)
	// Created by client-side kubectl apply: an Update by
	// kubectl-client-side-apply and the last-applied annotation.
	live := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u","annotations":{
	  "kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"k\":\"v\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"c\"}}\n"}},
	  "data":{"k":"v"}}`)
	if err := fm.Update(nil, live, "kubectl-client-side-apply", "", t0); err != nil {
		t.Fatal(err)
	}
	cfg := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v2"}}`
	out, err := fm.Apply(live, obj(t, cfg), ApplyOptions{Manager: "kubectl", Now: t0})
	if err != nil {
		t.Fatalf("kubectl apply --server-side over client-side apply: %v", err)
	}
	if got := lastApplied(out); !strings.Contains(got, `"k":"v2"`) {
		t.Fatalf("last-applied = %q", got)
	}
	// Another manager still conflicts.
	if _, err := fm.Apply(live, obj(t, cfg), ApplyOptions{Manager: "other", Now: t0}); err == nil {
		t.Fatal("apply by another manager did not conflict")
	}
}

// Apply never modifies its arguments, whichever path it takes.
func TestApplyLeavesArgumentsAlone(t *testing.T) {
	fm := NewFieldManager(mustSchema(t, configMapSchema), configMapGVK, false)
	for name, tc := range map[string]struct{ live, cfg, manager string }{
		"untracked, same values": {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u"},"data":{"k":"v"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`, "m"},
		"kubectl over last-applied": {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},"data":{"k":"v"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`, "kubectl"},
	} {
		t.Run(name, func(t *testing.T) {
			live, cfg := obj(t, tc.live), obj(t, tc.cfg)
			lb, cb := toJSON(t, live), toJSON(t, cfg)
			out, err := fm.Apply(live, cfg, ApplyOptions{Manager: tc.manager, Force: true, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if toJSON(t, live) != lb || toJSON(t, cfg) != cb {
				t.Fatalf("arguments modified:\n%s\n%s", toJSON(t, live), toJSON(t, cfg))
			}
			if len(managedEntries(t, out)) == 0 {
				t.Fatalf("no managedFields in %s", toJSON(t, out))
			}
		})
	}
}

// fieldsV1Object builds the same object as decoding the set's own JSON.
func TestFieldsV1ObjectMatchesToJSON(t *testing.T) {
	name, port := "name", "port"
	sets := []*fieldpath.Set{
		fieldpath.NewSet(),
		fieldpath.NewSet(fieldpath.MakePathOrDie("data")),
		fieldpath.NewSet(
			fieldpath.MakePathOrDie("data"),
			fieldpath.MakePathOrDie("data", "a"),
			fieldpath.MakePathOrDie("data", "b"),
			fieldpath.MakePathOrDie("metadata", "labels", "app"),
			fieldpath.MakePathOrDie("spec", "list", fieldpath.KeyByFields(name, "x", port, 80)),
			fieldpath.MakePathOrDie("spec", "list", fieldpath.KeyByFields(name, "x", port, 80), "image"),
			fieldpath.MakePathOrDie("spec", "set", value.NewValueInterface("v1")),
			fieldpath.MakePathOrDie("spec", "set", value.NewValueInterface(int64(3))),
			fieldpath.MakePathOrDie("spec", "items", 2),
			fieldpath.MakePathOrDie("spec", "quoted\"key", "x"),
		),
	}
	for i, s := range sets {
		b, err := s.ToJSON()
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, err := fieldsV1Object(s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("set %d: fieldsV1Object = %v, want %v (from %s)", i, got, want, b)
		}
	}
}

// managerID.String writes what encoding/json would: the same key for the
// same manager, however odd its name.
func TestManagerIDString(t *testing.T) {
	for _, id := range []managerID{
		{},
		{Manager: "kubectl", Operation: OperationApply},
		{Manager: "kube-controller-manager", Operation: OperationUpdate, APIVersion: "apps/v1", Subresource: "status"},
		{Operation: OperationUpdate, APIVersion: "v1"},
		{Manager: `quo"te\back<html>&amp;`, Operation: OperationApply, Subresource: "scale"},
		{Manager: "ünïcode \u2028 \x01 \xff", Operation: OperationUpdate, APIVersion: "example.dev/v1"},
	} {
		want, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := id.String(); got != string(want) {
			t.Errorf("%#v.String() = %s, want %s", id, got, want)
		}
		// Invalid UTF-8 is written as U+FFFD, so only valid names read back.
		if back := parseManagerID(id.String()); back != id && utf8.ValidString(id.Manager) {
			t.Errorf("parseManagerID(%s) = %#v, want %#v", id.String(), back, id)
		}
		// An id String writes without escapes is read directly.
		if s := id.String(); !strings.Contains(s, `\`) {
			if back, ok := parsePlainManagerID(s); !ok || back != id {
				t.Errorf("parsePlainManagerID(%s) = %#v, %v; want %#v, true", s, back, ok, id)
			}
		}
	}
}

// FuzzParseManagerID: what String writes reads back as encoding/json reads
// it, through the direct path or the decoder, and any other text gives what
// encoding/json gives into a managerID or the zero managerID.
func FuzzParseManagerID(f *testing.F) {
	f.Add("kubectl", OperationApply, "v1", "", `{"manager":"a","operation":"Update"}`)
	f.Add(`quo"te\back<html>`, OperationUpdate, "apps/v1", "status", `{"manager":"a",}`)
	f.Add("ünïcode \u2028 \x01 \xff", "", "", "scale", `{"manager":"a","other":"b"}`)
	f.Add("", "", "", "", `{"manager":1}`)
	f.Fuzz(func(t *testing.T, manager, operation, apiVersion, subresource, text string) {
		id := managerID{Manager: manager, Operation: operation, APIVersion: apiVersion, Subresource: subresource}
		var want managerID
		if err := json.Unmarshal([]byte(id.String()), &want); err != nil {
			t.Fatalf("encoding/json cannot read %s: %v", id.String(), err)
		}
		if got := parseManagerID(id.String()); got != want {
			t.Fatalf("parseManagerID(%s) = %#v, want %#v", id.String(), got, want)
		}
		// Other text: parsePlainManagerID accepts only what encoding/json
		// reads the same way.
		if got, ok := parsePlainManagerID(text); ok {
			var want managerID
			if err := json.Unmarshal([]byte(text), &want); err != nil || got != want {
				t.Fatalf("parsePlainManagerID(%q) = %#v; encoding/json: %#v, %v", text, got, want, err)
			}
		}
	})
}

// The fieldsV1 of a stored object (decoded into maps) and JSON text read back
// as the same set as through encoding/json; anything else reads as
// encoding/json's text does (fails or gives the same set).
func TestAppendFieldsJSON(t *testing.T) {
	const text = `{"f:metadata":{"f:labels":{".":{},"f:app":{}},"f:name":{}},"f:spec":{"f:ports":{"k:{\"name\":\"http\",\"port\":80}":{".":{},"f:port":{}}},"f:tags":{"v:\"a<b\"":{}}}}`
	var decoded any
	if err := json.Unmarshal([]byte(text), &decoded); err != nil {
		t.Fatal(err)
	}
	want := &fieldpath.Set{}
	if err := want.FromJSON(strings.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"decoded": decoded, "text": json.RawMessage(text)} {
		b, err := appendFieldsJSON([]byte("x"), v)
		if err != nil || b[0] != 'x' {
			t.Fatalf("%s: appendFieldsJSON = %q, %v", name, b, err)
		}
		got := &fieldpath.Set{}
		if err := got.FromJSON(strings.NewReader(string(b[1:]))); err != nil {
			t.Fatalf("%s: %s does not read back: %v", name, b[1:], err)
		}
		if !got.Equals(want) {
			t.Errorf("%s: read back as %v, want %v", name, got, want)
		}
	}
	for _, v := range []any{"f:x", []any{map[string]any{}}, map[string]any{"f:x": 1}, map[string]any{"f:x": map[string]any{"f:y": nil}}} {
		b, err := appendFieldsJSON(nil, v)
		if err != nil {
			t.Fatalf("appendFieldsJSON(%#v): %v", v, err)
		}
		ref, _ := json.Marshal(v)
		got, want := &fieldpath.Set{}, &fieldpath.Set{}
		gotErr, wantErr := got.FromJSON(bytes.NewReader(b)), want.FromJSON(bytes.NewReader(ref))
		if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && !got.Equals(want)) {
			t.Errorf("appendFieldsJSON(%#v) = %s reads as %v, %v; encoding/json's %s as %v, %v", v, b, got, gotErr, ref, want, wantErr)
		}
	}
}

// The fieldsV1 of stored objects reaches fieldpath.Set.FromJSON with the
// members of each object in fieldpath's order, whatever the order of the
// keys' text: FromJSON appends such members and inserts the others one by
// one (quadratic in their number). Without the ordering this fails.
func TestAppendFieldsJSONInFieldpathOrder(t *testing.T) {
	const n = 300
	keys := map[string]any{}
	for i := range n {
		// Numbers whose text sorts otherwise than their values, map keys,
		// and field names.
		keys[fmt.Sprintf("v:%d", -i)] = map[string]any{}
		keys[fmt.Sprintf(`k:{"name":"p%d","port":%d}`, i, n-i)] = map[string]any{".": map[string]any{}, "f:port": map[string]any{}}
		keys[fmt.Sprintf("f:f%04d", n-i)] = map[string]any{}
	}
	fv := map[string]any{"f:spec": keys}
	for name, v := range map[string]any{"decoded": fv, "text": json.RawMessage(mustJSON(t, fv))} {
		b, _ := appendFieldsJSON(nil, v)
		dec := json.NewDecoder(bytes.NewReader(b))
		var order []fieldpath.PathElement
		depth := 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok := tok.(type) {
			case json.Delim:
				if tok == '{' {
					depth++
				} else {
					depth--
				}
			case string: // only keys: every value is an object
				if depth == 2 { // the members of f:spec
					pe, err := fieldpath.DeserializePathElement(tok)
					if err != nil {
						t.Fatal(err)
					}
					order = append(order, pe)
				}
			}
		}
		if len(order) != 3*n {
			t.Fatalf("%s: read %d members, want %d", name, len(order), 3*n)
		}
		for i := 1; i < len(order); i++ {
			if order[i-1].Compare(order[i]) >= 0 {
				t.Fatalf("%s: member %d (%s) comes after %s", name, i, order[i], order[i-1])
			}
		}
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
