package watch_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/watch"
)

// lineEncoder writes one text line per event. The API server's encoders
// write JSON or protobuf watch frames instead.
type lineEncoder struct{}

func (lineEncoder) AppendEvent(dst []byte, typ watch.EventType, obj *watch.Object, rev int64) ([]byte, error) {
	return fmt.Appendf(dst, "%s %s=%s rv=%d\n", typ, obj.Key, obj.Value, rev), nil
}

func (lineEncoder) AppendBookmark(dst []byte, rev int64, initialEventsEnd bool) ([]byte, error) {
	return fmt.Appendf(dst, "BOOKMARK rv=%d initialEventsEnd=%v\n", rev, initialEventsEnd), nil
}

func (lineEncoder) AppendError(dst []byte, err error) []byte {
	return fmt.Appendf(dst, "ERROR %v\n", err)
}

// A Cache follows one storage prefix; each watch gets the current objects
// (Initial) and then every change, as a Kubernetes watch with
// sendInitialEvents does.
func ExampleCache_Watch() {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	_, _ = store.Create(ctx, []byte("/cm/a"), []byte("1"))

	cache, err := watch.New(watch.Config{Storage: store, Prefix: []byte("/cm/")})
	if err != nil {
		panic(err)
	}
	defer cache.Stop()

	w, err := cache.Watch(ctx, watch.Options{Encoder: lineEncoder{}, Initial: true, InitialEventsEnd: true})
	if err != nil {
		panic(err)
	}
	defer w.Stop()

	rev, _ := store.Create(ctx, []byte("/cm/b"), []byte("2"))
	_, _ = store.Update(ctx, []byte("/cm/b"), []byte("3"), rev)

	var out []byte
	for bytes.Count(out, []byte("\n")) < 4 {
		if out, err = w.Next(out); err != nil {
			panic(err)
		}
	}
	// Print without the revisions, which depend on the store.
	for line := range bytes.Lines(out) {
		if i := bytes.Index(line, []byte(" rv=")); i > 0 {
			line = line[:i]
		}
		fmt.Println(string(line))
	}
	// Output:
	// ADDED /cm/a=1
	// BOOKMARK
	// ADDED /cm/b=2
	// MODIFIED /cm/b=3
}
