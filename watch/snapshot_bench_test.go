package watch

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage/badger"
)

// BenchmarkListAfterWrite: one write, then a list of one namespace of 100
// objects, over a state of 100,000 objects in 1,000 namespaces (1,000,000 in
// 10,000 with KAPI_BENCH_LARGE=1): the pattern
// of a controller that lists a namespace while the store keeps changing. The
// list's snapshot is new after every write, so what the snapshot costs to
// take shows here (and, while it is taken under the cache's lock, in the
// latency of every watch of the type).
func BenchmarkListAfterWrite(b *testing.B) {
	ctx := context.Background()
	st, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	namespaces, perNamespace := 1000, 100
	if os.Getenv("KAPI_BENCH_LARGE") != "" {
		namespaces = 10000
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < namespaces*perNamespace; i += 16 {
				if _, err := st.Create(ctx, []byte(fmt.Sprintf("%sns%05d/o%03d", testPrefix, i/perNamespace, i%perNamespace)), []byte("v")); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c, err := New(Config{Settings: Settings{}, Storage: st, Prefix: []byte(testPrefix), Attrs: func(_, v []byte) (any, error) { return string(v), nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	if _, ok, err := c.Snapshot(ctx); err != nil || !ok {
		b.Fatalf("snapshot: %v %v", ok, err)
	}
	ns := []byte(testPrefix + "ns00500/")
	i := 0
	for b.Loop() {
		i++
		rev, err := st.Update(ctx, []byte(fmt.Sprintf("%sns%05d/o000", testPrefix, i%namespaces)), []byte(fmt.Sprint(i)), 0)
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := c.WaitForRevision(ctx, rev, 10*time.Second); err != nil || !ok {
			b.Fatalf("wait: %v %v", ok, err)
		}
		sn, ok, err := c.Snapshot(ctx)
		if err != nil || !ok {
			b.Fatalf("snapshot: %v %v", ok, err)
		}
		if n := len(sn.Under(ns)); n != perNamespace {
			b.Fatalf("%d objects in the namespace", n)
		}
	}
}
