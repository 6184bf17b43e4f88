package badger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// Run with, for example:
//
//	go test -run '^$' -bench . -benchtime 2s ./storage/badger/

const benchValueSize = 2 << 10 // 2 KiB, a typical Kubernetes object

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports the process CPU time per operation ("cpu-µs/op"), which
// contention from other processes distorts far less than wall time. It
// includes Badger's background work (flushes, compactions).
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{cpuTime()} }

func (m cpuMeter) report(b *testing.B, ops int) {
	if ops > 0 {
		b.ReportMetric(float64(cpuTime()-m.start)/float64(ops)/1e3, "cpu-µs/op")
	}
}

func benchStore(b *testing.B, durable bool) *Store {
	b.Helper()
	o := DefaultOptions(b.TempDir()).WithNoSync(!durable)
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkCreate measures creates of 2 KiB values with 1..256 concurrent
// writers; ns/op is per write (so 1e9/ns-per-op writes per second).
func BenchmarkCreate(b *testing.B) {
	value := make([]byte, benchValueSize)
	for _, durable := range []bool{true, false} {
		mode := "durable"
		if !durable {
			mode = "nosync"
		}
		for _, writers := range []int{1, 16, 64, 256} {
			if !durable && writers != 1 && writers != 64 {
				continue
			}
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				s := benchStore(b, durable)
				var next atomic.Int64
				b.SetBytes(benchValueSize)
				b.ResetTimer()
				cpu := startCPU()
				var wg sync.WaitGroup
				for range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							if _, err := s.Create(context.Background(), []byte(fmt.Sprintf("bench/%012d", i)), value); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				cpu.report(b, b.N)
				if bt := s.batches.Load(); bt > 0 {
					b.ReportMetric(float64(s.batchedWrites.Load())/float64(bt), "writes/batch")
				}
			})
		}
	}
}

// fill writes n 2 KiB values under prefix with 64 writers.
func fill(b *testing.B, s *Store, prefix string, n int) {
	b.Helper()
	value := make([]byte, benchValueSize)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := s.Create(context.Background(), []byte(fmt.Sprintf("%s%06d", prefix, i)), value); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkGet measures point reads of 2 KiB values among 10,000 keys.
func BenchmarkGet(b *testing.B) {
	s := benchStore(b, true)
	const n = 10_000
	fill(b, s, "get/", n)
	b.Run("serial", func(b *testing.B) {
		cpu, ops := startCPU(), 0
		for b.Loop() {
			if _, err := s.Get(context.Background(), []byte(fmt.Sprintf("get/%06d", rand.IntN(n))), 0); err != nil {
				b.Fatal(err)
			}
			ops++
		}
		cpu.report(b, ops)
	})
	b.Run("parallel", func(b *testing.B) {
		cpu := startCPU()
		defer func() { cpu.report(b, b.N) }()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Get(context.Background(), []byte(fmt.Sprintf("get/%06d", rand.IntN(n))), 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkList measures listing 10,000 values of 2 KiB under one prefix:
// all at once, and in pages of 500 at the first page's revision (with the
// exact remaining count each page reports).
func BenchmarkList(b *testing.B) {
	s := benchStore(b, true)
	const n = 10_000
	fill(b, s, "list/", n)
	fill(b, s, "other/", 1000)
	b.Run("full", func(b *testing.B) {
		b.SetBytes(n * benchValueSize)
		cpu, ops := startCPU(), 0
		for b.Loop() {
			res, err := s.List(context.Background(), storage.ListOptions{Prefix: []byte("list/")})
			if err != nil || len(res.Items) != n {
				b.Fatalf("%d items, %v", len(res.Items), err)
			}
			ops++
		}
		cpu.report(b, ops)
	})
	for _, keysOnly := range []bool{false, true} {
		name := "paged500"
		if keysOnly {
			name = "paged500-keysonly"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n * benchValueSize)
			cpu, ops := startCPU(), 0
			defer func() { cpu.report(b, ops) }()
			for b.Loop() {
				ops++
				opts := storage.ListOptions{Prefix: []byte("list/"), Limit: 500, KeysOnly: keysOnly}
				got := 0
				for {
					res, err := s.List(context.Background(), opts)
					if err != nil {
						b.Fatal(err)
					}
					got += len(res.Items)
					if !res.More {
						break
					}
					opts.StartKey, opts.Revision = res.NextKey, res.Revision
				}
				if got != n {
					b.Fatalf("%d items", got)
				}
			}
		})
	}
}

// BenchmarkWatch measures event delivery. live: 64 writers (NoSync, so the
// disk does not hide the fan-out) and 1 or 10 watchers; ns/op is per event
// written and delivered to every watcher. replay: a watch catching up from
// the change log over 10,000 events; ns/op is per event.
func BenchmarkWatch(b *testing.B) {
	for _, watchers := range []int{1, 10} {
		b.Run(fmt.Sprintf("live/watchers=%d", watchers), func(b *testing.B) {
			s := benchStore(b, false) // no fsync: measure delivery, not the disk
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var chans []<-chan storage.Event
			for range watchers {
				ch, err := s.Watch(ctx, storage.WatchOptions{Prefix: []byte("w/")})
				if err != nil {
					b.Fatal(err)
				}
				chans = append(chans, ch)
			}
			b.ResetTimer()
			cpu := startCPU()
			defer func() { cpu.report(b, b.N) }()
			var wg sync.WaitGroup
			for _, ch := range chans {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for got := 0; got < b.N; {
						if ev := <-ch; ev.Type == storage.EventPut {
							got++
						}
					}
				}()
			}
			fill(b, s, "w/", b.N)
			wg.Wait()
		})
	}
	b.Run("replay", func(b *testing.B) {
		s := benchStore(b, false)
		start, _ := s.CurrentRevision(context.Background())
		const n = 10_000
		fill(b, s, "r/", n)
		b.ResetTimer()
		cpu := startCPU()
		defer func() { cpu.report(b, b.N) }()
		for range b.N / n {
			replay(b, s, start, n)
		}
		if rest := b.N % n; rest > 0 {
			replay(b, s, start, rest)
		}
	})
}

func replay(b *testing.B, s *Store, from int64, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Watch(ctx, storage.WatchOptions{Prefix: []byte("r/"), FromRevision: from})
	if err != nil {
		b.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for got := 0; got < n; {
		select {
		case ev := <-ch:
			if ev.Type != storage.EventPut {
				b.Fatalf("event %v", ev.Type)
			}
			got++
		case <-timeout:
			b.Fatal("replay timed out")
		}
	}
}
