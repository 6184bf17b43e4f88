package meta

import (
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
