package controllers_test

import (
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

func TestNamespaceController(t *testing.T) {
	reg := newRegistry(t, nil, true)
	f := run(t, reg)
	const finalized = "kapi_namespace_controller_namespaces_finalized_total"
	if v, ok := f.value(t, finalized, ""); !ok || v != 0 {
		t.Fatalf("namespaces finalized = %v (exported: %v) before any work", v, ok)
	}
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "counted"}})
	create(t, reg, configMaps, "counted", registry.Object{"metadata": map[string]any{"name": "c"}})
	remove(t, reg, namespaces, "", "counted", "")
	f.atLeast(t, "a namespace finalization to be counted", 1, finalized, "")
	eventually(t, "the namespace to go", func() bool { return !exists(t, reg, namespaces, "", "counted") })
	if exists(t, reg, configMaps, "counted", "c") {
		t.Fatal("the configmap outlived its namespace")
	}
}
