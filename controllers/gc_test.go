package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

const actions = "kapi_garbage_collector_actions_total"

func TestGarbageCollector(t *testing.T) {
	reg := newRegistry(t, nil, true)
	f := run(t, reg)
	for _, a := range []string{"delete", "orphan", "drop_dangling", "foreground"} {
		if v, ok := f.value(t, actions, a); !ok || v != 0 {
			t.Fatalf("%s{action=%q} = %v (exported: %v) before any work", actions, a, v, ok)
		}
	}

	// The graph holds only objects with owners (or being deleted): plain
	// configmaps leave it as it is, dependents show.
	f.atLeast(t, "the collector's first sync", 1, "kapi_garbage_collector_syncs_total", "")
	g0, _ := f.value(t, "kapi_garbage_collector_graph_objects", "")
	for i := range 3 {
		create(t, reg, configMaps, "default", registry.Object{"metadata": map[string]any{"name": fmt.Sprint("plain", i)}})
	}
	dependent(t, reg, "kept-dep", ref("keep", owner(t, reg, "keep"), true))
	f.atLeast(t, "the graph gauge to count the dependent", g0+1, "kapi_garbage_collector_graph_objects", "")
	if g, _ := f.value(t, "kapi_garbage_collector_graph_objects", ""); g != g0+1 {
		t.Fatalf("graph objects = %v, want %v: plain objects are not in the graph", g, g0+1)
	}

	// Background: the dependent is deleted.
	dependent(t, reg, "bg-dep", ref("bg", owner(t, reg, "bg"), true))
	remove(t, reg, widgets, "default", "bg", "")
	f.atLeast(t, "a background delete to be counted", 1, actions, "delete")
	eventually(t, "the background dependent to go", func() bool { return !exists(t, reg, configMaps, "default", "bg-dep") })

	// Orphan: the dependent stays, without the reference. The owner is
	// deleted once the collector's graph holds the dependent: the two types
	// are watched apart, so an orphaning seen first would find no dependent
	// to orphan, and the dependent, seen next, an owner gone.
	eventually(t, "the graph to hold the kept dependent only", func() bool {
		g, _ := f.value(t, "kapi_garbage_collector_graph_objects", "")
		return g == g0+1
	})
	dependent(t, reg, "or-dep", ref("or", owner(t, reg, "or"), true))
	f.atLeast(t, "the graph to count the orphan's dependent", g0+2, "kapi_garbage_collector_graph_objects", "")
	remove(t, reg, widgets, "default", "or", registry.PropagationOrphan)
	f.atLeast(t, "an orphaning to be counted", 1, actions, "orphan")
	eventually(t, "the orphaning owner to go", func() bool { return !exists(t, reg, widgets, "default", "or") })
	st, _ := reg.Store(configMaps)
	if obj, err := st.GetObject(context.Background(), "default", "or-dep"); err != nil || len(meta.GetOwnerReferences(obj)) != 0 {
		t.Fatalf("orphaned dependent: %v %v", obj, err)
	}

	// Foreground: the dependent's delete and the owner's completion.
	before, _ := f.value(t, actions, "delete")
	dependent(t, reg, "fg-dep", ref("fg", owner(t, reg, "fg"), true))
	remove(t, reg, widgets, "default", "fg", registry.PropagationForeground)
	f.atLeast(t, "a foreground deletion to be counted", 1, actions, "foreground")
	f.atLeast(t, "the foreground dependent's delete to be counted", before+1, actions, "delete")

	// A dangling reference next to a live owner is dropped.
	dependent(t, reg, "two", ref("live", owner(t, reg, "live"), true), ref("ghost", "11111111-1111-1111-1111-111111111111", true))
	f.atLeast(t, "a dangling reference drop to be counted", 1, actions, "drop_dangling")
}

// A foreground deletion interrupted by a restart finishes after it: the
// collector rebuilds its graph from storage, and takes in types registered
// after it was built.
func TestForegroundDeletionResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	store, err := badger.Open(badger.DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, store, true)
	uid := owner(t, reg, "owner")
	for i := range 4 {
		dependent(t, reg, fmt.Sprint("dep", i), ref("owner", uid, i%2 == 0))
	}
	remove(t, reg, widgets, "default", "owner", registry.PropagationForeground)
	wd, _ := reg.Store(widgets)
	obj, err := wd.GetObject(context.Background(), "default", "owner")
	if err != nil || !slices.Contains(meta.GetFinalizers(obj), registry.FinalizerForeground) {
		t.Fatalf("foreground delete: %v %v", obj, err)
	}
	reg.Close()
	store.Close() // "crash" before any controller ran

	store, err = badger.Open(badger.DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg = newRegistry(t, store, false)
	f := run(t, reg)
	f.atLeast(t, "the garbage collector's first graph", 1, "kapi_garbage_collector_syncs_total", "")
	registerTypes(t, reg)
	eventually(t, "the dependents to be deleted after restart", func() bool {
		st, _ := reg.Store(configMaps)
		var list registry.ListResult
		err := st.List(context.Background(), "", registry.ListOptions{}, &list)
		return err == nil && len(list.Items) == 0
	})
	eventually(t, "the foreground owner to go after restart", func() bool { return !exists(t, reg, widgets, "default", "owner") })
}

// TestInvalidOwnerReferenceEvent: a cluster-scoped object owned by a
// namespaced one gets kube-controller-manager's warning event, and goes
// (its only owner cannot exist).
func TestInvalidOwnerReferenceEvent(t *testing.T) {
	reg := newRegistry(t, nil, true)
	registerEvents(t, reg, time.Hour)
	run(t, reg)
	w := owner(t, reg, "w")
	nsUID := create(t, reg, namespaces, "", registry.Object{"metadata": map[string]any{"name": "owned", "ownerReferences": []any{ref("w", w, false)}}})
	eventually(t, "the warning event", func() bool {
		for _, ev := range eventObjects(t, reg) {
			io := ev["involvedObject"].(map[string]any)
			if ev["reason"] == "OwnerRefInvalidNamespace" && ev["type"] == "Warning" && io["kind"] == "Namespace" && io["name"] == "owned" && io["uid"] == nsUID {
				want := `ownerRef [example.dev/v1/Widget, namespace: , name: w, uid: ` + w + `] does not exist in namespace ""`
				if ev["message"] != want {
					t.Fatalf("message %q, want %q", ev["message"], want)
				}
				return true
			}
		}
		return false
	})
	eventually(t, "the dependent to go", func() bool {
		st, _ := reg.Store(namespaces)
		obj, err := st.GetObject(context.Background(), "", "owned")
		return meta.ReasonOf(err) == meta.StatusReasonNotFound || err == nil && obj["metadata"].(map[string]any)["deletionTimestamp"] != nil
	})
}
