package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

var events = meta.GroupVersionResource{Version: "v1", Resource: "events"}

// registerEvents serves both event views with ttl.
func registerEvents(t *testing.T, reg *registry.Registry, ttl time.Duration) {
	t.Helper()
	for _, res := range registry.Events(registry.EventOptions{TTL: ttl}) {
		if err := reg.Register(res); err != nil {
			t.Fatal(err)
		}
	}
}

func event(name string) registry.Object {
	return registry.Object{"metadata": map[string]any{"name": name},
		"involvedObject": map[string]any{"kind": "ConfigMap", "namespace": "default", "name": "cm"},
		"reason":         "Tested", "message": "m", "type": "Normal", "count": int64(1)}
}

// eventNames lists the names of the events in storage.
func eventNames(t *testing.T, reg *registry.Registry) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, ev := range eventObjects(t, reg) {
		out[ev["metadata"].(map[string]any)["name"].(string)] = true
	}
	return out
}

// TestExpiryDeletesAfterTTL: events go TTL after their last write (an
// update restarts the clock), other types stay, and after a compaction
// nothing of them is left in storage.
func TestExpiryDeletesAfterTTL(t *testing.T) {
	store, err := badger.Open(badger.DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := newRegistry(t, store, true)
	const ttl = 3 * time.Second
	registerEvents(t, reg, ttl)
	f := run(t, reg)
	ctx := context.Background()
	before, _ := store.CurrentRevision(ctx)
	for i := range 20 {
		create(t, reg, events, "default", event(fmt.Sprint("e", i)))
	}
	create(t, reg, configMaps, "default", registry.Object{"metadata": map[string]any{"name": "stays"}})
	time.Sleep(ttl / 2)
	st, _ := reg.Store(events)
	renewed := time.Now()
	again := event("e0")
	again["count"] = int64(2) // a write that changes nothing is not one
	if _, err := st.Update(ctx, "default", "e0", again, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.atLeast(t, "19 events expired", 19, "kapi_expiry_controller_objects_expired_total", "")
	if names := eventNames(t, reg); len(names) != 1 || !names["e0"] {
		t.Fatalf("after the first expiry: %v, want only the renewed e0", names)
	} else if time.Since(renewed) >= ttl {
		t.Fatalf("e0 was checked too late (%v) to show it outlived its first TTL", time.Since(renewed))
	}
	f.atLeast(t, "e0 expired", 20, "kapi_expiry_controller_objects_expired_total", "")
	if elapsed := time.Since(renewed); elapsed < ttl {
		t.Errorf("e0 expired %v after its update, before its TTL %v", elapsed, ttl)
	}
	if names := eventNames(t, reg); len(names) != 0 {
		t.Fatalf("events left: %v", names)
	}
	cms, _ := reg.Store(configMaps)
	if _, err := cms.GetObject(ctx, "default", "stays"); err != nil {
		t.Errorf("a configmap went too: %v", err)
	}
	// Compacted, the events' history is gone too.
	cur, _ := store.CurrentRevision(ctx)
	if err := store.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	prefix := reg.ResourcePrefix("", "events", "")
	page, err := store.List(ctx, storage.ListOptions{Prefix: prefix})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("events in storage after compaction: %d, %v", len(page.Items), err)
	}
	if _, err := store.List(ctx, storage.ListOptions{Prefix: prefix, Revision: before + 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("the events' history is still readable: %v", err)
	}
}

// TestExpiryAfterRestart: an expiry controller that starts finds the events
// written while none ran and expires them by their last write.
func TestExpiryAfterRestart(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	past := time.Now().Add(-2 * time.Hour)
	old, err := registry.New(registry.Config{Storage: store, Now: func() time.Time { return past }})
	if err != nil {
		t.Fatal(err)
	}
	registerEvents(t, old, time.Hour)
	create(t, old, events, "default", event("old"))
	old.Close()

	reg := newRegistry(t, store, false)
	registerEvents(t, reg, time.Hour)
	create(t, reg, events, "default", event("new"))
	f := run(t, reg)
	f.atLeast(t, "the old event expired", 1, "kapi_expiry_controller_objects_expired_total", "")
	if names := eventNames(t, reg); len(names) != 1 || !names["new"] {
		t.Fatalf("events after the restart: %v, want only the new one", names)
	}
}

// decodeObject decodes a listed object.
func decodeObject(raw []byte) (map[string]any, error) {
	var obj map[string]any
	err := json.Unmarshal(raw, &obj)
	return obj, err
}
