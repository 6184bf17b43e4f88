package badger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Open an in-memory store (badger.DefaultOptions(dir) for a durable one) and
// use it through the storage.Store contract: compare-and-swap writes, each
// with its own revision, and reads at the latest or an older revision.
func ExampleOpen() {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()

	rev1, err := store.Create(ctx, []byte("/widgets/w1"), []byte("size=1"))
	if err != nil {
		panic(err)
	}
	_, err = store.Create(ctx, []byte("/widgets/w1"), []byte("again"))
	fmt.Println("second create fails:", errors.Is(err, storage.ErrAlreadyExists))

	rev2, err := store.Update(ctx, []byte("/widgets/w1"), []byte("size=2"), rev1) // only if still at rev1
	if err != nil {
		panic(err)
	}
	_, err = store.Update(ctx, []byte("/widgets/w1"), []byte("size=3"), rev1) // stale: conflict
	fmt.Println("stale update is a conflict:", err != nil && errors.Is(err, storage.ErrConflict))

	kv, _ := store.Get(ctx, []byte("/widgets/w1"), 0)
	fmt.Printf("latest: %s (revision %d is rev2: %v)\n", kv.Value, kv.Revision, kv.Revision == rev2)
	old, _ := store.Get(ctx, []byte("/widgets/w1"), rev1)
	fmt.Printf("at rev1: %s\n", old.Value)

	_, _ = store.Create(ctx, []byte("/widgets/w2"), []byte("size=5"))
	list, _ := store.List(ctx, storage.ListOptions{Prefix: []byte("/widgets/"), Limit: 1, Count: true})
	fmt.Printf("page 1: %s, more=%v, remaining=%d\n", list.Items[0].Key, list.More, list.Remaining)
	next, _ := store.List(ctx, storage.ListOptions{Prefix: []byte("/widgets/"), StartKey: list.NextKey, Revision: list.Revision})
	fmt.Printf("page 2: %s, more=%v\n", next.Items[0].Key, next.More)
	// Output:
	// second create fails: true
	// stale update is a conflict: true
	// latest: size=2 (revision 3 is rev2: true)
	// at rev1: size=1
	// page 1: /widgets/w1, more=true, remaining=1
	// page 2: /widgets/w2, more=false
}

// Watch streams every change after a revision, with the previous value.
func ExampleStore_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()

	start, _ := store.CurrentRevision(ctx)
	rev, _ := store.Create(ctx, []byte("/cm/a"), []byte("1"))
	_, _ = store.Update(ctx, []byte("/cm/a"), []byte("2"), rev)
	_, _, _ = store.Delete(ctx, []byte("/cm/a"), 0)

	events, err := store.Watch(ctx, storage.WatchOptions{Prefix: []byte("/cm/"), FromRevision: start})
	if err != nil {
		panic(err)
	}
	for range 3 {
		ev := <-events
		fmt.Printf("%v %s value=%q prev=%q\n", ev.Type, ev.Key, ev.Value, ev.PrevValue)
	}
	// Output:
	// PUT /cm/a value="1" prev=""
	// PUT /cm/a value="2" prev="1"
	// DELETE /cm/a value="" prev="2"
}
