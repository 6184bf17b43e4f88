package apiserver

import (
	"context"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/watch"
)

// BenchmarkWatchCacheBudget measures the reads a watch cache's state serves,
// over 10,000 configmaps of 2 KiB on durable Badger, with the state kept in
// the memory budget ("kept") and dropped from it ("dropped": the same reads
// come from storage): what a type inside the budget gains per read.
func BenchmarkWatchCacheBudget(b *testing.B) {
	for _, mode := range []struct {
		name  string
		bytes int64
	}{{"kept", 0}, {"dropped", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			store, err := badger.Open(badger.DefaultOptions(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { store.Close() })
			api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, DisableControllers: true,
				Watch: watch.Settings{StateBytes: mode.bytes}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { api.Close() })
			if err := api.Register(registry.ConfigMaps()); err != nil {
				b.Fatal(err)
			}
			fill(b, api, 10000)
			serve(b, api, "GET", cmPath+"?resourceVersion=0&limit=1", "", 200) // starts the cache
			st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
			if s, ok := st.WatchCacheStats(); !ok || (s.StateObjects >= 0) != (mode.bytes >= 0) {
				b.Fatalf("watch cache %+v (%v): not in the mode benchmarked", s, ok)
			}
			for _, tc := range []struct{ name, path string }{
				{"GetRV0", cmPath + "/cm-%05d?resourceVersion=0"},
				{"ListRV0", cmPath + "?resourceVersion=0"},
				{"List", cmPath},
				{"FirstPage", cmPath + "?limit=500"},
			} {
				b.Run(tc.name, func(b *testing.B) {
					cpu := meterCPU(b)
					for i := range b.N {
						p := tc.path
						if tc.name == "GetRV0" {
							p = fmt.Sprintf(p, (i*7)%10000)
						}
						serve(b, api, "GET", p, "", 200)
					}
					cpu.stop()
				})
			}
		})
	}
}
