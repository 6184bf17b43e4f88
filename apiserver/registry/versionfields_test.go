package registry

import (
	"context"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
)

// managedByManager returns obj's managedFields entries by manager.
func managedByManager(t *testing.T, obj map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	list, _ := obj["metadata"].(map[string]any)["managedFields"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		out[m["manager"].(string)] = m
	}
	return out
}

// Each version's store records entries in its own version and reads the
// entries of the others through the set's conversion: an apply through v1
// and an update through v2 share spec.color (spec.paint.color in v2).
func TestVersionsManagedFieldsAcrossVersions(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	st1, st2 := versionStore(t, reg, "v1"), versionStore(t, reg, "v2")
	applied, err := st1.FieldManager().Apply(nil, mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"size":1,"color":"red"}}`),
		patch.ApplyOptions{Manager: "a", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st1.Create(ctx, "default", applied, WriteOptions{Applied: true}); err != nil {
		t.Fatal(err)
	}

	// An update through v2 changing the color takes it from a.
	w2 := getAs(t, reg, "v2", "w")
	spec(w2)["paint"] = map[string]any{"color": "green"}
	if _, err := st2.Update(ctx, "default", "w", w2, WriteOptions{FieldManager: "ctl"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1", "v2"} {
		m := managedByManager(t, getAs(t, reg, v, "w"))
		a, ctl := m["a"], m["ctl"]
		if a == nil || ctl == nil {
			t.Fatalf("through %s: entries %v", v, m)
		}
		if a["apiVersion"] != "example.dev/v1" || !meta.DeepEqual(a["fieldsV1"], map[string]any{"f:spec": map[string]any{"f:size": map[string]any{}}}) {
			t.Errorf("through %s: a's entry %v", v, a)
		}
		if ctl["apiVersion"] != "example.dev/v2" || ctl["operation"] != "Update" ||
			!meta.DeepEqual(ctl["fieldsV1"], map[string]any{"f:spec": map[string]any{"f:paint": map[string]any{"f:color": map[string]any{}}}}) {
			t.Errorf("through %s: ctl's entry %v", v, ctl)
		}
	}

	// Another apply through v1 leaves ctl's entry in v2, and a's apply of
	// the color through v1 now conflicts with ctl.
	w1 := getAs(t, reg, "v1", "w")
	_, err = st1.FieldManager().Apply(w1, mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"size":1,"color":"red"}}`),
		patch.ApplyOptions{Manager: "a", Now: time.Now()})
	if se := wantStatus(t, "apply against ctl", err, 409, ""); se.Status.Message != `Apply failed with 1 conflict: conflict with "ctl" using example.dev/v2: .spec.paint.color` {
		t.Errorf("conflict: %q", se.Status.Message)
	}
}
