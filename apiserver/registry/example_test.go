package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Widget is a custom type defined as a Go struct: the schema comes from the
// json tags and the kapi markers.
type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
	Status        WidgetStatus    `json:"status,omitempty"`
}

type WidgetSpec struct {
	Size  int64  `json:"size" kapi:"required,min=0"`
	Color string `json:"color,omitempty" kapi:"default=red"`
}

type WidgetStatus struct {
	Phase string `json:"phase,omitempty"`
}

// ForType registers a type from a Go struct. The registry's Store then
// implements every verb; the API server (package apiserver) is a thin HTTP
// layer over it.
func ExampleForType() {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	reg, err := registry.New(registry.Config{
		Storage: store,
		// Fixed for a deterministic output; the defaults are time.Now and random uids.
		Now:    func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		NewUID: func() string { return "2f7c0d8e-0000-4000-8000-000000000001" },
	})
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	widgets, err := registry.ForType[Widget](registry.Resource{
		Group: "example.dev", Version: "v1", Resource: "widgets", Kind: "Widget",
		Namespaced: true, ShortNames: []string{"wd"},
		Subresources:   registry.Subresources{Status: true},
		PrinterColumns: []registry.Column{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}},
	})
	if err != nil {
		panic(err)
	}
	if err := reg.Register(widgets); err != nil {
		panic(err)
	}
	fmt.Println("spec.size minimum:", *widgets.Schema.Properties["spec"].Properties["size"].Minimum)

	st, _ := reg.Store(widgets.GroupVersionResource())
	_, err = st.Create(ctx, "default", registry.Object{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": -1},
	}, registry.WriteOptions{})
	fmt.Println(err)

	res, err := st.Create(ctx, "default", registry.Object{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": 3},
	}, registry.WriteOptions{FieldManager: "example"})
	if err != nil {
		panic(err)
	}
	var obj map[string]any
	_ = json.Unmarshal(res.JSON, &obj)
	spec, _, _ := meta.NestedMap(obj, "spec")
	fmt.Println(meta.GetName(obj), meta.GetNamespace(obj), meta.GetUID(obj), spec)
	// Output:
	// spec.size minimum: 0
	// Widget.example.dev "w1" is invalid: spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0
	// w1 default 2f7c0d8e-0000-4000-8000-000000000001 map[color:red size:3]
}

// A type can also be registered at run time from a schema, e.g. one read
// from a CRD's openAPIV3Schema, with no Go type at all. Fields the schema
// does not know are pruned, with a warning (fieldValidation=Warn, the
// default) or an error (Strict).
func ExampleRegistry_Register() {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	reg, err := registry.New(registry.Config{Storage: store})
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	var s schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{
		"spec":{"type":"object","properties":{"url":{"type":"string"}}}}}`), &s); err != nil {
		panic(err)
	}
	hooks := registry.Resource{Group: "example.dev", Version: "v1", Resource: "webhooks", Kind: "Webhook", Schema: &s}
	if err := reg.Register(hooks); err != nil {
		panic(err)
	}
	st, _ := reg.Store(hooks.GroupVersionResource())
	res, err := st.Create(ctx, "", registry.Object{
		"apiVersion": "example.dev/v1", "kind": "Webhook",
		"metadata": map[string]any{"name": "notify"},
		"spec":     map[string]any{"url": "https://example.com/hook", "retries": 3},
	}, registry.WriteOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Warnings)
	obj, _ := st.GetObject(ctx, "", "notify")
	fmt.Println(obj["spec"])
	// Output:
	// [unknown field "spec.retries"]
	// map[url:https://example.com/hook]
}
