package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// gatheredValue returns the value of the counter or gauge name with the
// given label pairs (name, value, ...), and whether it was found.
func gatheredValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
		}
	}
	return 0, false
}

// newMetricsServer is a test server (configmaps and widgets, anonymous
// access) that exports its metrics to the returned registry.
func newMetricsServer(t *testing.T) (*Server, *prometheus.Registry, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetResource(t)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return api, reg, ts
}

func TestControllerMetrics(t *testing.T) {
	_, reg, ts := newMetricsServer(t)

	value := func(name string, labels ...string) float64 {
		t.Helper()
		v, ok := gatheredValue(t, reg, name, labels...)
		if !ok {
			t.Fatalf("metric %s%v is not exported", name, labels)
		}
		return v
	}
	const actions = "kapi_garbage_collector_actions_total"
	for _, a := range []string{"delete", "orphan", "drop_dangling", "foreground"} {
		if v := value(actions, "action", a); v != 0 {
			t.Fatalf("%s{action=%q} = %v before any work", actions, a, v)
		}
	}
	if v := value("kapi_namespace_controller_namespaces_finalized_total"); v != 0 {
		t.Fatalf("namespaces finalized = %v before any work", v)
	}

	owner := func(name string) string {
		t.Helper()
		r := do(t, ts, "POST", wdPath, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":1}}`, name))
		if r.code != 201 {
			t.Fatalf("create widget %s: %d %s", name, r.code, r.body)
		}
		return str(r.object(t), "metadata", "uid")
	}
	dependent := func(name, refs string) {
		t.Helper()
		r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q,"ownerReferences":[%s]}}`, name, refs))
		if r.code != 201 {
			t.Fatalf("create configmap %s: %d %s", name, r.code, r.body)
		}
	}
	ref := func(name, uid string) string {
		return fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","name":%q,"uid":%q,"blockOwnerDeletion":true}`, name, uid)
	}
	atLeast := func(what string, want float64, name string, labels ...string) {
		t.Helper()
		eventually(t, what, func() bool { return value(name, labels...) >= want })
	}

	// The graph holds only objects with owners (or being deleted): plain
	// configmaps leave it as it is, dependents show.
	atLeast("the collector's first sync", 1, "kapi_garbage_collector_syncs_total")
	g0 := value("kapi_garbage_collector_graph_objects")
	for i := 0; i < 3; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"plain%d"}}`, i))
	}
	keep := owner("keep")
	dependent("kept-dep", ref("keep", keep))
	atLeast("the graph gauge to count the dependent", g0+1, "kapi_garbage_collector_graph_objects")
	if g := value("kapi_garbage_collector_graph_objects"); g != g0+1 {
		t.Fatalf("graph objects = %v, want %v: plain objects are not in the graph", g, g0+1)
	}

	// Background: the dependent is deleted.
	uid := owner("bg")
	dependent("bg-dep", ref("bg", uid))
	do(t, ts, "DELETE", wdPath+"/bg", "")
	atLeast("a background delete to be counted", 1, actions, "action", "delete")

	// Orphan.
	uid = owner("or")
	dependent("or-dep", ref("or", uid))
	do(t, ts, "DELETE", wdPath+"/or?propagationPolicy=Orphan", "")
	atLeast("an orphaning to be counted", 1, actions, "action", "orphan")

	// Foreground: the dependent's delete and the owner's completion.
	before := value(actions, "action", "delete")
	uid = owner("fg")
	dependent("fg-dep", ref("fg", uid))
	do(t, ts, "DELETE", wdPath+"/fg?propagationPolicy=Foreground", "")
	atLeast("a foreground deletion to be counted", 1, actions, "action", "foreground")
	if v := value(actions, "action", "delete"); v < before+1 {
		t.Fatalf("the foreground dependent's delete was not counted: %v, was %v", v, before)
	}

	// A dangling reference next to a live owner is dropped.
	uid = owner("live")
	dependent("two", ref("live", uid)+","+ref("ghost", "11111111-1111-1111-1111-111111111111"))
	atLeast("a dangling reference drop to be counted", 1, actions, "action", "drop_dangling")

	// A namespace deletion.
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"counted"}}`)
	do(t, ts, "POST", "/api/v1/namespaces/counted/configmaps", `{"metadata":{"name":"c"}}`)
	do(t, ts, "DELETE", "/api/v1/namespaces/counted", "")
	atLeast("a namespace finalization to be counted", 1, "kapi_namespace_controller_namespaces_finalized_total")
	eventually(t, "the namespace to go", func() bool { return do(t, ts, "GET", "/api/v1/namespaces/counted", "").code == 404 })
}

// A foreground deletion interrupted by a restart finishes after it: the
// collector rebuilds its graph from storage.
func TestForegroundDeletionResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	start := func(controllers bool) (*httptest.Server, func()) {
		store, err := badger.Open(badger.DefaultOptions(dir))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		api, err := New(context.Background(), Config{Storage: store, DisableControllers: !controllers, AllowAnonymous: true, Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		if controllers {
			// Let the collector build its graph before the types are
			// registered: it must take them in when they come.
			eventually(t, "the garbage collector's first graph", func() bool {
				v, _ := gatheredValue(t, reg, "kapi_garbage_collector_syncs_total")
				return v >= 1
			})
		}
		for _, res := range []registry.Resource{registry.ConfigMaps(), widgetResource(t)} {
			if err := api.Register(res); err != nil {
				t.Fatal(err)
			}
		}
		ts := httptest.NewServer(api)
		return ts, func() { ts.Close(); api.Close(); store.Close() }
	}
	ts, stop := start(false)
	r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"owner"},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create owner: %d %s", r.code, r.body)
	}
	uid := str(r.object(t), "metadata", "uid")
	for i := 0; i < 4; i++ {
		block := i%2 == 0
		r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"dep%d","ownerReferences":[{"apiVersion":"example.dev/v1","kind":"Widget","name":"owner","uid":%q,"blockOwnerDeletion":%v}]}}`, i, uid, block))
		if r.code != 201 {
			t.Fatalf("create dep%d: %d %s", i, r.code, r.body)
		}
	}
	r = do(t, ts, "DELETE", wdPath+"/owner", `{"propagationPolicy":"Foreground"}`)
	if r.code != 200 || !strings.Contains(str(r.object(t), "metadata", "finalizers"), "foregroundDeletion") {
		t.Fatalf("foreground delete: %d %s", r.code, r.body)
	}
	// Without controllers nothing moves.
	if do(t, ts, "GET", cmPath+"/dep0", "").code != 200 || do(t, ts, "GET", wdPath+"/owner", "").code != 200 {
		t.Fatal("objects went without controllers")
	}
	stop() // "crash" before any controller ran

	ts, stop = start(true)
	defer stop()
	eventually(t, "the dependents to be deleted after restart", func() bool {
		items, _ := do(t, ts, "GET", cmPath, "").object(t)["items"].([]any)
		return len(items) == 0
	})
	eventually(t, "the foreground owner to go after restart", func() bool {
		return do(t, ts, "GET", wdPath+"/owner", "").code == 404
	})
}

// autoscaling/v1 omits spec.replicas when it is 0, so kubectl scale
// --replicas=0 sends a Scale without it: that means 0.
func TestScaleOmittedReplicasIsZero(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"z"},"spec":{"size":1,"replicas":2}}`)
	r := do(t, ts, "PUT", wdPath+"/z/scale", `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"z"},"spec":{}}`)
	if r.code != 200 || str(r.object(t), "spec", "replicas") == "2" {
		t.Fatalf("scale to 0: %d %s", r.code, r.body)
	}
	if w := do(t, ts, "GET", wdPath+"/z", "").object(t); str(w, "spec", "replicas") != "0" {
		t.Fatalf("widget after scale to 0: %v", w)
	}
	do(t, ts, "PUT", wdPath+"/z/scale", `{"metadata":{"name":"z"},"spec":{"replicas":"many"}}`).status(t, 400, "BadRequest")
}
