package controllers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// watchCounter is a store that counts its open watches: a watch is open
// until its channel closes.
type watchCounter struct {
	storage.Store
	open atomic.Int64
}

func (w *watchCounter) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	in, err := w.Store.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	w.open.Add(1)
	out := make(chan storage.Event)
	go func() {
		defer w.open.Add(-1)
		defer close(out)
		for ev := range in {
			select {
			case out <- ev:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out, nil
}

// TestGarbageCollectorRestartClosesItsWatch: each type registered while the
// controllers run restarts the garbage collector's graph; the run it ends
// must close its storage watch, which otherwise keeps every later change.
func TestGarbageCollectorRestartClosesItsWatch(t *testing.T) {
	mem, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	store := &watchCounter{Store: mem}
	reg := newRegistry(t, store, true)
	f := run(t, reg)
	f.atLeast(t, "first graph", 1, "kapi_garbage_collector_syncs_total", "")
	base := settled(&store.open)
	for i := range 5 {
		res := registry.Resource{Group: "example.dev", Version: "v1", Resource: fmt.Sprintf("things%d", i), Kind: fmt.Sprintf("Thing%d", i),
			Namespaced: true, Schema: &schema.Schema{Type: schema.TypeObject}}
		if err := reg.Register(res); err != nil {
			t.Fatal(err)
		}
		f.atLeast(t, "graph rebuilt", float64(i+2), "kapi_garbage_collector_syncs_total", "")
	}
	eventually(t, "watches back to their number before the registrations", func() bool { return store.open.Load() == base })
}

// settled returns n once it has kept its value for 300 ms: every
// controller started has opened its watch.
func settled(n *atomic.Int64) int64 {
	v := n.Load()
	for stable := time.Now(); time.Since(stable) < 300*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		if c := n.Load(); c != v {
			v, stable = c, time.Now()
		}
	}
	return v
}
