package etcd

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// BenchmarkStore compares the etcd store (etcd with fsync, on this machine)
// with the embedded Badger store on the storage operations the API makes:
//
//	go test -run '^$' -bench BenchmarkStore -benchtime 2000x ./storage/etcd/
func BenchmarkStore(b *testing.B) {
	value := make([]byte, 1024)
	backends := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"etcd", func(b *testing.B) storage.Store {
			srv := etcdtest.Start(b, etcdtest.Options{Fsync: true})
			return openStore(b, testOptions(b, srv, "/bench/"))
		}},
		{"badger", func(b *testing.B) storage.Store {
			s, err := badger.Open(badger.DefaultOptions(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ctx := b.Context()
			var n atomic.Int64
			b.Run("Create/parallel", func(b *testing.B) {
				b.SetParallelism(8) // 8 x GOMAXPROCS writers
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := st.Create(ctx, fmt.Appendf(nil, "k/%08d", n.Add(1)), value); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			created := n.Load()
			if created == 0 {
				b.Skip("nothing created")
			}
			b.Run("Update/serial", func(b *testing.B) {
				key := []byte("k/00000001")
				kv, err := st.Get(ctx, key, 0)
				if err != nil {
					b.Fatal(err)
				}
				rev := kv.Revision
				for b.Loop() {
					if rev, err = st.Update(ctx, key, value, rev); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Get/parallel", func(b *testing.B) {
				var i atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						k := fmt.Appendf(nil, "k/%08d", i.Add(1)%created+1)
						if _, err := st.Get(ctx, k, 0); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("CurrentRevision", func(b *testing.B) {
				for b.Loop() {
					if _, err := st.CurrentRevision(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("ListPage500", func(b *testing.B) {
				for b.Loop() {
					if _, err := st.List(ctx, storage.ListOptions{Prefix: []byte("k/"), Limit: 500}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
