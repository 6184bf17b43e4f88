package patch

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
)

// Widgets in two versions: v1 has spec.color, v2 has it as
// spec.paint.color and adds spec.paint.gloss, which v1 keeps in an
// annotation.
const (
	widgetV1Schema = `{"type":"object","properties":{"spec":{"type":"object","properties":{
  "size":{"type":"integer"},"color":{"type":"string"}}},
 "status":{"type":"object","properties":{"phase":{"type":"string"}}}}}`
	widgetV2Schema = `{"type":"object","properties":{"spec":{"type":"object","properties":{
  "size":{"type":"integer"},"paint":{"type":"object","properties":{"color":{"type":"string"},"gloss":{"type":"string"}}}}},
 "status":{"type":"object","properties":{"phase":{"type":"string"}}}}}`
	glossAnnotation = "example.dev/gloss"
)

var widgetV2GVK = meta.GroupVersionKind{Group: "example.dev", Version: "v2", Kind: "Widget"}

// widgetConversion converts widgets between v1 and v2.
type widgetConversion struct{}

func (widgetConversion) ConvertVersion(o map[string]any, from, to string) (map[string]any, error) {
	spec, _ := o["spec"].(map[string]any)
	md, _ := o["metadata"].(map[string]any)
	if spec["color"] == "unconvertible" {
		return nil, fmt.Errorf("cannot convert the color")
	}
	switch {
	case from == "example.dev/v1" && to == "example.dev/v2":
		if spec != nil {
			paint := map[string]any{}
			if c, ok := spec["color"]; ok {
				paint["color"] = c
				delete(spec, "color")
			}
			if g, ok := meta.GetAnnotations(o)[glossAnnotation]; ok {
				paint["gloss"] = g
			}
			if len(paint) > 0 {
				spec["paint"] = paint
			}
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, glossAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	case from == "example.dev/v2" && to == "example.dev/v1":
		if paint, ok := spec["paint"].(map[string]any); ok {
			if c, ok := paint["color"]; ok {
				spec["color"] = c
			}
			if g, ok := paint["gloss"]; ok {
				ann, _ := md["annotations"].(map[string]any)
				if ann == nil {
					ann = map[string]any{}
					md["annotations"] = ann
				}
				ann[glossAnnotation] = g
			}
			delete(spec, "paint")
		}
	default:
		return nil, fmt.Errorf("no conversion from %s to %s", from, to)
	}
	o["apiVersion"] = to
	return o, nil
}

// widgetManagers returns the field managers of v1 and v2.
func widgetManagers(t *testing.T) (v1, v2 *FieldManager) {
	t.Helper()
	fms := NewFieldManagers([]TypeVersion{
		{GVK: widgetGVK, Schema: mustSchema(t, widgetV1Schema), StatusSubresource: true},
		{GVK: widgetV2GVK, Schema: mustSchema(t, widgetV2Schema), StatusSubresource: true},
	}, widgetConversion{})
	return fms[0], fms[1]
}

// as reads o through another version, as a store of that version does.
func as(t *testing.T, o map[string]any, to string) map[string]any {
	t.Helper()
	c := meta.DeepCopyMap(o)
	out, err := widgetConversion{}.ConvertVersion(c, c["apiVersion"].(string), to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantEntry checks one managedFields entry's apiVersion and fieldsV1 (""
// for no entry).
func wantEntry(t *testing.T, o map[string]any, key, apiVersion, fields string) {
	t.Helper()
	e, ok := managedEntries(t, o)[key]
	switch {
	case fields == "" && ok:
		t.Errorf("%s has an entry: %s", key, toJSON(t, e))
	case fields == "":
	case !ok:
		t.Errorf("no entry for %s in %s", key, toJSON(t, o["metadata"].(map[string]any)["managedFields"]))
	case e["apiVersion"] != apiVersion || !sameJSON(t, e["fieldsV1"], fields):
		t.Errorf("%s: %s %s, want %s %s", key, e["apiVersion"], toJSON(t, e["fieldsV1"]), apiVersion, fields)
	}
}

func TestVersionsApplyConflictsAcrossVersions(t *testing.T) {
	v1, v2 := widgetManagers(t)
	a, err := v1.Apply(nil, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":1,"color":"red"}}`),
		ApplyOptions{Manager: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	wantEntry(t, a, "a/Apply", "example.dev/v1", `{"f:spec":{"f:size":{},"f:color":{}}}`)

	// b applies the same field, through v2, with another value: a owns it.
	bCfg := obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"paint":{"color":"blue"}}}`)
	_, err = v2.Apply(as(t, a, "example.dev/v2"), bCfg, ApplyOptions{Manager: "b", Now: t0.Add(time.Minute)})
	se, ok := meta.AsStatusError(err)
	if !ok || se.Code() != http.StatusConflict {
		t.Fatalf("apply of a's field through v2: %v, want a 409", err)
	}
	// The conflict names the field as the owner's entry records it.
	if se.Status.Message != `Apply failed with 1 conflict: conflict with "a": .spec.color` {
		t.Errorf("conflict: %q", se.Status.Message)
	}
	// The same value through v2 is shared, not a conflict.
	same := obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"paint":{"color":"red"}}}`)
	if _, err := v2.Apply(as(t, a, "example.dev/v2"), same, ApplyOptions{Manager: "b", Now: t0.Add(time.Minute)}); err != nil {
		t.Errorf("applying the same value through v2: %v", err)
	}

	// Forced, b takes it: a no longer owns spec.color.
	b, err := v2.Apply(as(t, a, "example.dev/v2"), bCfg, ApplyOptions{Manager: "b", Force: true, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantEntry(t, b, "a/Apply", "example.dev/v1", `{"f:spec":{"f:size":{}}}`)
	wantEntry(t, b, "b/Apply", "example.dev/v2", `{"f:spec":{"f:paint":{"f:color":{}}}}`)
	if !sameJSON(t, b["spec"], `{"size":1,"paint":{"color":"blue"}}`) {
		t.Errorf("after the forced apply: %s", toJSON(t, b["spec"]))
	}

	// a re-applies through v1 without the field: it owned it no more, so
	// nothing is removed.
	a2, err := v1.Apply(as(t, b, "example.dev/v1"), obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":1}}`),
		ApplyOptions{Manager: "a", Now: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, a2["spec"], `{"size":1,"color":"blue"}`) {
		t.Errorf("after a's re-apply: %s", toJSON(t, a2["spec"]))
	}
	wantEntry(t, a2, "a/Apply", "example.dev/v1", `{"f:spec":{"f:size":{}}}`)
	wantEntry(t, a2, "b/Apply", "example.dev/v2", `{"f:spec":{"f:paint":{"f:color":{}}}}`)
}

// An applier that moves to another version removes, by leaving it out, a
// field it applied through the first one, under its new name.
func TestVersionsApplyPrunesAcrossVersions(t *testing.T) {
	v1, v2 := widgetManagers(t)
	a, err := v1.Apply(nil, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`),
		ApplyOptions{Manager: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	out, err := v2.Apply(as(t, a, "example.dev/v2"), obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`),
		ApplyOptions{Manager: "a", Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, out["spec"], `{"size":2}`) || out["apiVersion"] != "example.dev/v2" {
		t.Errorf("after the apply through v2: %s", toJSON(t, out))
	}
	wantEntry(t, out, "a/Apply", "example.dev/v2", `{"f:spec":{"f:size":{}}}`)
}

func TestVersionsUpdateTakesFieldsAcrossVersions(t *testing.T) {
	v1, v2 := widgetManagers(t)
	a, err := v1.Apply(nil, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`),
		ApplyOptions{Manager: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	// An update through v2 changing the color takes it from a, and its
	// entry is recorded in v2.
	live := as(t, a, "example.dev/v2")
	next := meta.DeepCopyMap(live)
	next["spec"].(map[string]any)["paint"] = map[string]any{"color": "green"}
	if err := v2.Update(live, next, "ctl", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, next, "a/Apply", "example.dev/v1", `{"f:spec":{"f:size":{}}}`)
	wantEntry(t, next, "ctl/Update", "example.dev/v2", `{"f:spec":{"f:paint":{"f:color":{}}}}`)

	// An apply through v1 by another manager leaves the v2 entry's
	// apiVersion alone; a conflicts with ctl now, named with its version.
	live1 := as(t, next, "example.dev/v1")
	out, err := v1.Apply(live1, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}`),
		ApplyOptions{Manager: "sizer", Force: true, Now: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantEntry(t, out, "ctl/Update", "example.dev/v2", `{"f:spec":{"f:paint":{"f:color":{}}}}`)
	wantEntry(t, out, "sizer/Apply", "example.dev/v1", `{"f:spec":{"f:size":{}}}`)
	wantEntry(t, out, "a/Apply", "", "")
	_, err = v1.Apply(out, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}`),
		ApplyOptions{Manager: "a", Now: t0.Add(3 * time.Minute)})
	if se, ok := meta.AsStatusError(err); !ok || se.Status.Message != `Apply failed with 1 conflict: conflict with "ctl" using example.dev/v2: .spec.paint.color` {
		t.Errorf("apply against ctl's field: %v", err)
	}
}

// A field only v2 has (v1 keeps it in an annotation) stays its applier's
// through writes in v1.
func TestVersionsFieldOfOneVersion(t *testing.T) {
	v1, v2 := widgetManagers(t)
	b, err := v2.Apply(nil, obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"paint":{"gloss":"matte"}}}`),
		ApplyOptions{Manager: "b", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	a, err := v1.Apply(as(t, b, "example.dev/v1"), obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}`),
		ApplyOptions{Manager: "a", Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	// An update through v1 that changes only the color.
	next := meta.DeepCopyMap(a)
	next["spec"].(map[string]any)["color"] = "green"
	if err := v1.Update(a, next, "ctl", "", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// a re-applies without its field; b's stays.
	out, err := v1.Apply(next, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`),
		ApplyOptions{Manager: "a", Now: t0.Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantEntry(t, out, "b/Apply", "example.dev/v2", `{"f:spec":{"f:size":{},"f:paint":{"f:gloss":{}}}}`)
	wantEntry(t, out, "ctl/Update", "example.dev/v1", `{"f:spec":{"f:color":{}}}`)
	if got := as(t, out, "example.dev/v2"); !sameJSON(t, got["spec"], `{"size":1,"paint":{"color":"green","gloss":"matte"}}`) {
		t.Errorf("through v2: %s", toJSON(t, got["spec"]))
	}
	// b leaves it out through v2: it goes.
	out, err = v2.Apply(as(t, out, "example.dev/v2"), obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`),
		ApplyOptions{Manager: "b", Now: t0.Add(4 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, out["spec"], `{"size":1,"paint":{"color":"green"}}`) {
		t.Errorf("after b left gloss out: %s", toJSON(t, out["spec"]))
	}
}

// Entries recorded in a version the type no longer has are dropped by the
// next write, as kube-apiserver drops them.
func TestVersionsEntryOfUnknownVersion(t *testing.T) {
	v1, _ := widgetManagers(t)
	live := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","managedFields":[
	 {"manager":"old","operation":"Apply","apiVersion":"example.dev/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:color":{}}}},
	 {"manager":"a","operation":"Apply","apiVersion":"example.dev/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:size":{}}}}]},
	 "spec":{"size":1,"color":"red"}}`)
	next := meta.DeepCopyMap(live)
	next["spec"].(map[string]any)["size"] = int64(2)
	if err := v1.Update(live, next, "ctl", "", t0); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, next, "old/Apply", "", "")
	wantEntry(t, next, "ctl/Update", "example.dev/v1", `{"f:spec":{"f:size":{}}}`)
}

// Status writes through one version take status fields from managers of
// the other.
func TestVersionsStatusAcrossVersions(t *testing.T) {
	v1, v2 := widgetManagers(t)
	a, err := v1.Apply(nil, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`),
		ApplyOptions{Manager: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	s, err := v1.Apply(a, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"Up"}}`),
		ApplyOptions{Manager: "s", Subresource: "status", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v2.Apply(as(t, s, "example.dev/v2"), obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"Down"},"spec":{"size":5}}`),
		ApplyOptions{Manager: "t", Subresource: "status", Now: t0})
	se, ok := meta.AsStatusError(err)
	if !ok || se.Status.Message != `Apply failed with 1 conflict: conflict with "s" with subresource "status": .status.phase` {
		t.Errorf("status apply through v2: %v", err)
	}
}

// A conversion that fails fails an apply (a 500, not a Status of the
// request's own), and leaves an update without managedFields, as a schema
// the object does not match does.
func TestVersionsConversionFailure(t *testing.T) {
	v1, v2 := widgetManagers(t)
	b, err := v2.Apply(nil, obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"paint":{"gloss":"matte"}}}`),
		ApplyOptions{Manager: "b", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	live := as(t, b, "example.dev/v1")
	_, err = v1.Apply(live, obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"unconvertible"}}`),
		ApplyOptions{Manager: "a", Now: t0})
	if _, isStatus := meta.AsStatusError(err); err == nil || isStatus || !strings.Contains(err.Error(), "cannot convert the color") {
		t.Errorf("apply needing a failing conversion: %v", err)
	}
	next := meta.DeepCopyMap(live)
	next["spec"].(map[string]any)["color"] = "unconvertible"
	if err := v1.Update(live, next, "ctl", "", t0); err == nil || !strings.Contains(err.Error(), "cannot convert the color") {
		t.Errorf("update needing a failing conversion: %v", err)
	}
	if _, has := next["metadata"].(map[string]any)["managedFields"]; has {
		t.Errorf("an update whose conversion failed kept managedFields: %s", toJSON(t, next))
	}
}
