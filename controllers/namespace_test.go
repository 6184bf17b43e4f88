package controllers_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
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

// TestNamespaceEventsSayWhatRemains: a namespace kept by an object's
// finalizer gets events saying so (in "default", as events about
// cluster-scoped objects are), repeats are one event, and a namespace
// emptied at once gets none.
func TestNamespaceEventsSayWhatRemains(t *testing.T) {
	reg := newRegistry(t, nil, true)
	registerEvents(t, reg, time.Hour)
	run(t, reg)
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "quick"}})
	create(t, reg, configMaps, "quick", registry.Object{"metadata": map[string]any{"name": "c"}})
	remove(t, reg, namespaces, "", "quick", "")
	uid := create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "held"}})
	create(t, reg, configMaps, "held", registry.Object{"metadata": map[string]any{"name": "c", "finalizers": []any{"example.dev/hold"}}})
	remove(t, reg, namespaces, "", "held", "")
	want := map[string]string{
		"NamespaceContentRemaining":    "Some resources are remaining: configmaps has 1 resource instances",
		"NamespaceFinalizersRemaining": "Some content in the namespace has finalizers remaining: example.dev/hold in 1 resource instances",
	}
	var got map[string]string
	eventually(t, "the namespace controller's events", func() bool {
		got = map[string]string{}
		for _, ev := range eventObjects(t, reg) {
			io := ev["involvedObject"].(map[string]any)
			if io["kind"] != "Namespace" {
				continue
			}
			if io["name"] != "held" || io["uid"] != uid || ev["metadata"].(map[string]any)["namespace"] != "default" {
				t.Fatalf("event about the wrong namespace or in the wrong place: %v", ev)
			}
			got[ev["reason"].(string)] = ev["message"].(string)
		}
		return len(got) == len(want)
	})
	for reason, msg := range want {
		if got[reason] != msg {
			t.Errorf("%s: %q, want %q", reason, got[reason], msg)
		}
	}
	time.Sleep(300 * time.Millisecond) // several more passes of the controller
	if n := len(eventObjects(t, reg)); n != len(want) {
		t.Errorf("%d events after repeated passes, want %d", n, len(want))
	}
}

// eventObjects lists the events in storage.
func eventObjects(t *testing.T, reg *registry.Registry) []map[string]any {
	t.Helper()
	st, _ := reg.Store(events)
	var list registry.ListResult
	if err := st.List(context.Background(), "", registry.ListOptions{FromStorage: true, KeepItems: true}, &list); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, raw := range list.Items {
		obj, err := decodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// TestNamespaceDeletesEventsServedOnlyAsAView: with only events.k8s.io/v1
// events registered (a view of core events), deleting a namespace still
// deletes its events and finishes.
func TestNamespaceDeletesEventsServedOnlyAsAView(t *testing.T) {
	reg := newRegistry(t, nil, false)
	if err := reg.Register(registry.Events(registry.EventOptions{})[1]); err != nil {
		t.Fatal(err)
	}
	run(t, reg)
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "gone"}})
	v1 := meta.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	create(t, reg, v1, "gone", registry.Object{"metadata": map[string]any{"name": "e"}, "eventTime": "2026-01-02T03:04:05.000000Z",
		"reportingController": "example.dev/c", "reportingInstance": "c-1", "action": "Do", "reason": "Done", "type": "Normal",
		"regarding": map[string]any{"kind": "ConfigMap", "namespace": "gone", "name": "cm"}})
	remove(t, reg, namespaces, "", "gone", "")
	eventually(t, "the namespace to go", func() bool { return !exists(t, reg, namespaces, "", "gone") })
	if exists(t, reg, v1, "gone", "e") {
		t.Fatal("the event outlived its namespace")
	}
}

// failingDeletes fails the first fail deletes of keys containing match.
type failingDeletes struct {
	storage.Store
	match  []byte
	fail   int64
	failed atomic.Int64
}

func (f *failingDeletes) Delete(ctx context.Context, key []byte, expected int64) (storage.KeyValue, int64, error) {
	if bytes.Contains(key, f.match) && f.failed.Add(1) <= f.fail {
		return storage.KeyValue{}, 0, errors.New("injected failure")
	}
	return f.Store.Delete(ctx, key, expected)
}

// TestNamespaceRetriesAFailedPass: a pass that fails (a delete here) is
// tried again soon, backing off, not at the next change or resync (30 s,
// longer than the wait). Four failures outlast the passes the namespace's
// own changes trigger.
func TestNamespaceRetriesAFailedPass(t *testing.T) {
	mem, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	fd := &failingDeletes{Store: mem, match: []byte("/flaky/"), fail: 4}
	reg := newRegistry(t, fd, true)
	run(t, reg)
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "flaky"}})
	create(t, reg, configMaps, "flaky", registry.Object{"metadata": map[string]any{"name": "c"}})
	remove(t, reg, namespaces, "", "flaky", "")
	eventually(t, "the namespace to go", func() bool { return !exists(t, reg, namespaces, "", "flaky") })
	if n := fd.failed.Load(); n <= fd.fail {
		t.Fatalf("%d deletes tried, want more than the %d that fail", n, fd.fail)
	}
}

// TestNamespaceFailingHoldsNoOther: while one namespace keeps failing (its
// deletes fail; the controller backs off), namespaces deleted meanwhile, listed
// before it and after it, go at once: a change wakes the controller during
// its backoff, and a pass goes on past the failing namespace.
func TestNamespaceFailingHoldsNoOther(t *testing.T) {
	mem, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	fd := &failingDeletes{Store: mem, match: []byte("/mmm/"), fail: 1 << 40}
	reg := newRegistry(t, fd, true)
	run(t, reg) // Retry 100 ms
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "mmm"}})
	create(t, reg, configMaps, "mmm", registry.Object{"metadata": map[string]any{"name": "c"}})
	remove(t, reg, namespaces, "", "mmm", "")
	time.Sleep(3500 * time.Millisecond) // 3.1 s of backoff so far: in a wait of 3.2 s
	for _, ns := range []string{"aaa", "zzz"} {
		create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": ns}})
		create(t, reg, configMaps, ns, registry.Object{"metadata": map[string]any{"name": "c"}})
	}
	start := time.Now()
	remove(t, reg, namespaces, "", "aaa", "")
	remove(t, reg, namespaces, "", "zzz", "")
	eventually(t, "aaa and zzz to go", func() bool {
		return !exists(t, reg, namespaces, "", "aaa") && !exists(t, reg, namespaces, "", "zzz")
	})
	// mmm's backoff has 2.8 s or more to run: a change that did not wake
	// the controller, or a pass stopped at mmm, would wait for it.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("namespaces took %v to go while mmm kept failing", d)
	}
	if !exists(t, reg, namespaces, "", "mmm") || fd.failed.Load() < 5 {
		t.Fatalf("mmm gone or tried only %d times: the test tested nothing", fd.failed.Load())
	}
}

// slowWatch delays the controller's storage watch of namespaces (a watch
// without progress reports; the watch caches ask for them) by delay.
type slowWatch struct {
	storage.Store
	delay time.Duration
}

func (s slowWatch) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if opts.ProgressInterval == 0 && bytes.HasSuffix(opts.Prefix, []byte("/namespaces/")) {
		time.Sleep(s.delay)
	}
	return s.Store.Watch(ctx, opts)
}

// TestNamespaceDeletedBeforeTheWatch: a namespace deleted while the
// controller's watch of namespaces is still being set up (right after
// start) is emptied and goes, not left until the next resync (30 s).
func TestNamespaceDeletedBeforeTheWatch(t *testing.T) {
	mem, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	reg := newRegistry(t, slowWatch{Store: mem, delay: 500 * time.Millisecond}, true)
	run(t, reg)
	time.Sleep(100 * time.Millisecond) // the first pass, which finds nothing to do, has run
	create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "early"}})
	create(t, reg, configMaps, "early", registry.Object{"metadata": map[string]any{"name": "c"}})
	remove(t, reg, namespaces, "", "early", "")
	eventually(t, "the namespace to go", func() bool { return !exists(t, reg, namespaces, "", "early") })
}
