package watch

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// benchEncoder frames an event as "REV\n" plus the value, so that the
// consumer can tell which write it is cheaply.
type benchEncoder struct{}

func (benchEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	dst = strconv.AppendInt(dst, rev, 10)
	dst = append(dst, ' ')
	dst = append(dst, obj.Value...)
	return append(dst, '\n'), nil
}

func (benchEncoder) AppendBookmark(dst []byte, rev int64, _ bool) ([]byte, error) {
	return append(strconv.AppendInt(append(dst, 'B'), rev, 10), '\n'), nil
}

func (benchEncoder) AppendError(dst []byte, err error) []byte { return append(dst, "E\n"...) }

func openBenchStore(b *testing.B) storage.Store {
	b.Helper()
	st, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkCacheFanout: 500 watchers of one cache (allowing bookmarks, as
// client-go's), 2,000 updates written to storage at a steady rate or as fast
// as it takes them (500 at 100/s: events too far apart to batch, each one
// wakes every watcher); latency from the write's return to the consumer's
// Next returning the event. No HTTP: the cache's own cost. Run with
// -benchtime=1x.
func BenchmarkCacheFanout(b *testing.B) {
	for _, rate := range []int{100, 1000, 0} {
		name := "rate=max"
		if rate > 0 {
			name = fmt.Sprintf("rate=%d/s", rate)
		}
		updates := 2000
		if rate == 100 {
			updates = 500
		}
		b.Run(name, func(b *testing.B) { benchCacheFanout(b, rate, updates) })
	}
}

func benchCacheFanout(b *testing.B, rate, updates int) {
	const watchers = 500
	for i := 0; i < b.N; i++ {
		st := openBenchStore(b)
		ctx := context.Background()
		value := bytes.Repeat([]byte("v"), 512)
		for k := 0; k < 20; k++ {
			if _, err := st.Create(ctx, fmt.Appendf(nil, "/b/k%02d", k), value); err != nil {
				b.Fatal(err)
			}
		}
		c, err := New(Config{Storage: st, Prefix: []byte("/b/")})
		if err != nil {
			b.Fatal(err)
		}
		cur, _ := st.CurrentRevision(ctx)
		if ok, err := c.WaitForRevision(ctx, cur, time.Minute); !ok || err != nil {
			b.Fatal("cache not ready", err)
		}
		type recv struct{ rev, t int64 }
		recvs := make([][]recv, watchers)
		var total atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < watchers; w++ {
			wt, err := c.Watch(ctx, Options{Encoder: benchEncoder{}, Bookmarks: true})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rs := make([]recv, 0, updates)
				var buf []byte
				for {
					var err error
					buf, err = wt.Next(buf[:0])
					now := time.Now().UnixNano()
					for rest := buf; len(rest) > 0; {
						j := bytes.IndexByte(rest, '\n')
						line := rest[:j]
						rest = rest[j+1:]
						if sp := bytes.IndexByte(line, ' '); sp > 0 {
							rev, _ := strconv.ParseInt(string(line[:sp]), 10, 64)
							rs = append(rs, recv{rev, now})
							total.Add(1)
						}
					}
					if err != nil {
						recvs[w] = rs
						return
					}
				}
			}(w)
		}
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		acks := make(map[int64]int64, updates)
		b.ResetTimer()
		start, cpu0 := time.Now(), processCPU()
		for k := 0; k < updates; k++ {
			if rate > 0 {
				if d := time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate))); d > 0 {
					time.Sleep(d)
				}
			}
			rev, err := st.Update(ctx, fmt.Appendf(nil, "/b/k%02d", k%20), value, 0)
			if err != nil {
				b.Fatal(err)
			}
			acks[rev] = time.Now().UnixNano()
		}
		want := int64(watchers * updates)
		for total.Load() < want {
			time.Sleep(time.Millisecond)
		}
		elapsed, cpu := time.Since(start), processCPU()-cpu0
		b.StopTimer()
		runtime.ReadMemStats(&ms1)
		c.Stop()
		wg.Wait()
		var lat []time.Duration
		for _, rs := range recvs {
			for _, r := range rs {
				if at, ok := acks[r.rev]; ok {
					lat = append(lat, time.Duration(max(0, r.t-at)))
				}
			}
		}
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.5), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(want)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(want), "alloc-B/event")
		b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(want), "cpu-µs/event")
	}
}

// BenchmarkCacheInitialEvents: a watch starting with 10,000 synthetic ADDED
// events from the cache's state, read to the end.
func BenchmarkCacheInitialEvents(b *testing.B) {
	st := openBenchStore(b)
	ctx := context.Background()
	value := bytes.Repeat([]byte("v"), 512)
	const n = 10_000
	for k := 0; k < n; k++ {
		if _, err := st.Create(ctx, fmt.Appendf(nil, "/b/k%05d", k), value); err != nil {
			b.Fatal(err)
		}
	}
	c, err := New(Config{Storage: st, Prefix: []byte("/b/")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	for _, consistent := range []bool{false, true} {
		b.Run(fmt.Sprintf("consistent=%v", consistent), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				w, err := c.Watch(ctx, Options{Encoder: benchEncoder{}, Initial: true, Consistent: consistent, InitialEventsEnd: true, Bookmarks: true})
				if err != nil {
					b.Fatal(err)
				}
				var buf []byte
				got := 0
				for got < n {
					buf, err = w.Next(buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					got += bytes.Count(buf, []byte{'\n'})
				}
				w.Stop()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkWatcherEvent: the per-event path of synced watchers, without
// goroutines: one change applied by the cache (state, window, dispatch to
// 16 watchers), then each watcher's Next taking it and appending its
// frame, encoded once and shared. A guard for the fan-out's per-event cost
// and allocations (per op: one event to 16 watchers).
func BenchmarkWatcherEvent(b *testing.B) {
	st := openBenchStore(b)
	ctx := context.Background()
	value := bytes.Repeat([]byte("v"), 512)
	key := []byte("/b/k")
	rev0, err := st.Create(ctx, key, value)
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Storage: st, Prefix: []byte("/b/"), Settings: Settings{WindowEvents: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	if ok, err := c.WaitForRevision(ctx, rev0, time.Minute); !ok || err != nil {
		b.Fatal("cache not ready", err)
	}
	ws := make([]*Watcher, 16)
	for i := range ws {
		if ws[i], err = c.Watch(ctx, Options{Encoder: benchEncoder{}, Bookmarks: true}); err != nil {
			b.Fatal(err)
		}
		defer ws[i].Stop()
	}
	// Synthetic changes far above the store's revisions (the cache's storage
	// watch sees no writes, only progress it ignores).
	rev := rev0 + 1_000_000
	apply := func() {
		rev++
		if err := c.apply([]storage.Event{{Type: storage.EventPut, Key: key, Value: value, Revision: rev, PrevRevision: rev - 1}}); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 0, 4096)
	for range 2 { // make every watcher synced
		apply()
		for _, w := range ws {
			if buf, err = w.Next(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		apply()
		for _, w := range ws {
			if buf, err = w.Next(buf[:0]); err != nil {
				b.Fatal(err)
			}
			if len(buf) == 0 {
				b.Fatal("no frame")
			}
		}
	}
}
