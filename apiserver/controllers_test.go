package apiserver

import (
	"context"
	"net/http/httptest"
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

// The controllers' metrics are on Config.Metrics, counted by the controllers
// New started (package controllers tests what each counts).
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

	// A namespace deletion.
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"counted"}}`)
	do(t, ts, "POST", "/api/v1/namespaces/counted/configmaps", `{"metadata":{"name":"c"}}`)
	do(t, ts, "DELETE", "/api/v1/namespaces/counted", "")
	eventually(t, "a namespace finalization to be counted", func() bool { return value("kapi_namespace_controller_namespaces_finalized_total") >= 1 })
	eventually(t, "the namespace to go", func() bool { return do(t, ts, "GET", "/api/v1/namespaces/counted", "").code == 404 })
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
