package meta

import (
	"fmt"
	"reflect"
	"testing"
)

func TestOmitEmpty(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{
			"name": "a", "generateName": "", "labels": map[string]any{}, "annotations": nil,
			"finalizers": []any{}, "ownerReferences": nil, "namespace": "ns",
		},
		"data": map[string]any{}, "binaryData": nil, "spec": map[string]any{}, "list": []any{},
	}
	OmitEmpty(obj, "data", "binaryData")
	want := map[string]any{
		"metadata": map[string]any{"name": "a", "namespace": "ns"},
		"spec":     map[string]any{}, "list": []any{},
	}
	if !reflect.DeepEqual(obj, want) {
		t.Fatalf("got %v, want %v", obj, want)
	}
	// Values that are not empty, and values of the wrong type (for
	// validation to refuse), stay.
	kept := map[string]any{
		"metadata": map[string]any{
			"generateName": "a-", "labels": map[string]any{"k": "v"}, "annotations": "",
			"finalizers": []any{"x"}, "ownerReferences": map[string]any{},
		},
		"data": "", "binaryData": map[string]any{"k": "dg=="},
	}
	before := map[string]any{
		"metadata": map[string]any{
			"generateName": "a-", "labels": map[string]any{"k": "v"}, "annotations": "",
			"finalizers": []any{"x"}, "ownerReferences": map[string]any{},
		},
		"data": "", "binaryData": map[string]any{"k": "dg=="},
	}
	OmitEmpty(kept, "data", "binaryData")
	if !reflect.DeepEqual(kept, before) {
		t.Fatalf("got %v, want it unchanged", kept)
	}
}

func TestHasOmittable(t *testing.T) {
	for _, c := range []struct {
		obj  map[string]any
		want bool
	}{
		{map[string]any{"metadata": map[string]any{"name": "a"}, "data": map[string]any{"k": "v"}}, false},
		{map[string]any{"metadata": map[string]any{"labels": map[string]any{}}}, true},
		{map[string]any{"metadata": map[string]any{}, "data": nil}, true},
		{map[string]any{"spec": map[string]any{}}, false},
	} {
		before := fmt.Sprint(c.obj)
		if got := HasOmittable(c.obj, "data"); got != c.want {
			t.Errorf("HasOmittable(%v) = %v, want %v", c.obj, got, c.want)
		}
		if after := fmt.Sprint(c.obj); after != before {
			t.Errorf("HasOmittable changed %s to %s", before, after)
		}
	}
}

// BenchmarkOmitEmpty: what a write pays for each of its two passes (a
// created configmap's metadata, nothing to leave out).
func BenchmarkOmitEmpty(b *testing.B) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "u", "creationTimestamp": "t",
			"labels": map[string]any{"app": "x"}, "managedFields": []any{}},
		"data": map[string]any{"k": "v"},
	}
	b.ReportAllocs()
	for b.Loop() {
		OmitEmpty(obj, "data", "binaryData")
	}
}
