package controllers_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/controllers"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// fixture is running controllers and their metrics.
type fixture struct {
	metrics *prometheus.Registry
}

// newRegistry returns a registry over store (nil: a new in-memory one)
// serving namespaces (with "default" there) and, with types, configmaps and
// widgets.
func newRegistry(t *testing.T, store storage.Store, types bool) *registry.Registry {
	t.Helper()
	if store == nil {
		mem, err := badger.Open(badger.InMemoryOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		store = mem
	}
	reg, err := registry.New(registry.Config{Storage: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if err := reg.Register(registry.Namespaces()); err != nil {
		t.Fatal(err)
	}
	nss, _ := reg.Store(namespaces)
	_, err = nss.Create(context.Background(), "", registry.Object{"metadata": map[string]any{"name": "default"}}, registry.WriteOptions{})
	if err != nil && meta.ReasonOf(err) != meta.StatusReasonAlreadyExists {
		t.Fatal(err)
	}
	if types {
		registerTypes(t, reg)
	}
	return reg
}

// The types of the tests.
var (
	configMaps = meta.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces = meta.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	widgets    = meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}
)

// registerTypes serves configmaps and widgets, the owner type of the tests:
// a namespaced type of another group, with no fields of its own.
func registerTypes(t *testing.T, reg *registry.Registry) {
	t.Helper()
	wd := registry.Resource{Group: widgets.Group, Version: widgets.Version, Resource: widgets.Resource, Kind: "Widget",
		Namespaced: true, Schema: &schema.Schema{Type: schema.TypeObject}}
	for _, res := range []registry.Resource{registry.ConfigMaps(), wd} {
		if err := reg.Register(res); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts the controllers of reg until the test ends.
func run(t *testing.T, reg *registry.Registry) *fixture {
	t.Helper()
	f := &fixture{metrics: prometheus.NewRegistry()}
	c, err := controllers.New(reg, controllers.Config{Metrics: f.metrics, Retry: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// value returns the value of the counter or gauge name with the label
// action (when not empty), and whether it is exported.
func (f *fixture) value(t *testing.T, name, action string) (float64, bool) {
	t.Helper()
	families, err := f.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			match := action == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == "action" && l.GetValue() == action
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// atLeast waits until the metric reaches want.
func (f *fixture) atLeast(t *testing.T, what string, want float64, name, action string) {
	t.Helper()
	eventually(t, what, func() bool {
		v, _ := f.value(t, name, action)
		return v >= want
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func create(t *testing.T, reg *registry.Registry, gvr meta.GroupVersionResource, ns string, obj registry.Object) string {
	t.Helper()
	st, _ := reg.Store(gvr)
	res, err := st.Create(context.Background(), ns, obj, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("create %s %v: %v", gvr.Resource, obj["metadata"], err)
	}
	return meta.GetUID(res.Object)
}

// owner creates a widget in "default" and returns its uid.
func owner(t *testing.T, reg *registry.Registry, name string) string {
	t.Helper()
	return create(t, reg, widgets, "default", registry.Object{"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": name}})
}

// ref is an owner reference to widget name.
func ref(name, uid string, block bool) any {
	return map[string]any{"apiVersion": "example.dev/v1", "kind": "Widget", "name": name, "uid": uid, "blockOwnerDeletion": block}
}

// dependent creates a configmap in "default" with the owner references.
func dependent(t *testing.T, reg *registry.Registry, name string, refs ...any) {
	t.Helper()
	create(t, reg, configMaps, "default", registry.Object{"metadata": map[string]any{"name": name, "ownerReferences": refs}})
}

func remove(t *testing.T, reg *registry.Registry, gvr meta.GroupVersionResource, ns, name, policy string) {
	t.Helper()
	st, _ := reg.Store(gvr)
	if _, err := st.Delete(context.Background(), ns, name, registry.DeleteOptions{PropagationPolicy: policy}); err != nil {
		t.Fatalf("delete %s %s: %v", gvr.Resource, name, err)
	}
}

// exists reports whether the object is in storage.
func exists(t *testing.T, reg *registry.Registry, gvr meta.GroupVersionResource, ns, name string) bool {
	t.Helper()
	st, _ := reg.Store(gvr)
	_, err := st.GetObject(context.Background(), ns, name)
	if meta.ReasonOf(err) == meta.StatusReasonNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
