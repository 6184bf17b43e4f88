package registry

import (
	"strings"
	"testing"
)

// TestFinalizerNamesAdded: only the finalizers a write adds are judged, so
// an object stored with unqualified names (before its type turned strict)
// can still lose them one at a time.
func TestFinalizerNamesAdded(t *testing.T) {
	obj := func(fins ...any) Object { return Object{"metadata": map[string]any{"finalizers": fins}} }
	legacy := obj("a-fin", "b-fin", "orphan")
	if errs, _ := finalizerNames(obj("b-fin", "orphan"), legacy, true); len(errs) != 0 {
		t.Fatalf("removing one legacy finalizer: %v", errs)
	}
	errs, _ := finalizerNames(obj("b-fin", "c-fin", "example.dev/x"), legacy, true)
	if len(errs) != 1 || errs[0].Field != "metadata.finalizers[1]" || !strings.Contains(errs[0].Detail, "neither a standard finalizer name") {
		t.Fatalf("adding an unqualified finalizer: %v", errs)
	}
	errs, warnings := finalizerNames(obj("c-fin", "kubernetes"), nil, false)
	if len(errs) != 0 || len(warnings) != 1 || !strings.Contains(warnings[0], `"c-fin"`) {
		t.Fatalf("lenient create: %v %v", errs, warnings)
	}
}
