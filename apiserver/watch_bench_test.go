package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/watch"
)

// rvInLine extracts the first metadata.resourceVersion of a watch event line
// without decoding it.
func rvInLine(line []byte) int64 {
	const key = `"resourceVersion":"`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0
	}
	line = line[i+len(key):]
	j := bytes.IndexByte(line, '"')
	if j < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(line[:j]), 10, 64)
	return n
}

// BenchmarkWatchFanout: 500 HTTP watchers of one namespace, 2,000 updates
// (PUT over HTTP by 4 writers, at a steady rate or as fast as possible);
// delivery latency from a write's response to its receipt by each watcher.
// Run with -benchtime=1x: one iteration is the whole scenario. With
// KAPI_WATCH_HEAPPROFILE=file, a heap profile is written at the end of the
// writes.
func BenchmarkWatchFanout(b *testing.B) {
	for _, rate := range []int{200, 0} {
		name := "rate=max"
		if rate > 0 {
			name = fmt.Sprintf("rate=%d/s", rate)
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runFanout(b, 500, 2000, rate, "")
			}
		})
	}
}

// BenchmarkWatchFanoutTable is BenchmarkWatchFanout's rate=max with Table
// watches (kubectl get --watch): their rows after the first frame are
// encoded once per event for all of them.
func BenchmarkWatchFanoutTable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runFanout(b, 500, 2000, 0, acceptTableV1)
	}
}

func runFanout(b *testing.B, watchers, updates, rate int, accept string) {
	_, ts, _ := newWatchServer(b, watch.Settings{}, false)
	const objects = 20
	pad := strings.Repeat("p", 256)
	for i := 0; i < objects; i++ {
		do(b, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"w%02d"},"data":{"seq":"-1","pad":%q}}`, i, pad))
	}
	startRV := str(do(b, ts, "GET", cmPath, "").object(b), "metadata", "resourceVersion")

	type recv struct {
		rv int64
		t  int64
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: watchers, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recvs := make([][]recv, watchers)
	var total atomic.Int64
	var started, running sync.WaitGroup
	for w := 0; w < watchers; w++ {
		started.Add(1)
		running.Add(1)
		go func(w int) {
			defer running.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+cmPath+"?watch=1&resourceVersion="+startRV, nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			resp, err := client.Do(req)
			started.Done()
			if err != nil {
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			rs := make([]recv, 0, updates)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				rs = append(rs, recv{rv: rvInLine(sc.Bytes()), t: time.Now().UnixNano()})
				total.Add(1)
			}
			recvs[w] = rs
		}(w)
	}
	started.Wait()

	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	var peakHeap atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-t.C:
			case <-stopSampling:
				return
			}
		}
	}()

	acks := make(map[int64]int64, updates)
	var ackMu sync.Mutex
	jobs := make(chan int, updates)
	var writers sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < 4; i++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for k := range jobs {
				body := fmt.Sprintf(`{"metadata":{"name":"w%02d"},"data":{"seq":"%d","pad":%q}}`, k%objects, k, pad)
				r := do(b, ts, "PUT", cmPath+fmt.Sprintf("/w%02d", k%objects), body)
				at := time.Now().UnixNano()
				if r.code != 200 {
					b.Errorf("update: %d %s", r.code, r.body)
					continue
				}
				rv := rvInLine(r.body)
				ackMu.Lock()
				acks[rv] = at
				ackMu.Unlock()
			}
		}()
	}
	for k := 0; k < updates; k++ {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
		}
		jobs <- k
	}
	close(jobs)
	writers.Wait()
	want := int64(watchers * updates)
	deadline := time.Now().Add(2 * time.Minute)
	for total.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if f := os.Getenv("KAPI_WATCH_HEAPPROFILE"); f != "" {
		out, _ := os.Create(f)
		_ = pprof.WriteHeapProfile(out)
		out.Close()
	}
	close(stopSampling)
	<-sampled
	cancel()
	running.Wait()

	var lat []time.Duration
	var last int64
	for _, rs := range recvs {
		for _, r := range rs {
			if at, ok := acks[r.rv]; ok {
				lat = append(lat, time.Duration(max(0, r.t-at)))
				last = max(last, r.t)
			}
		}
	}
	if int64(len(lat)) != want {
		b.Fatalf("delivered %d of %d events", len(lat), want)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(want)/time.Duration(last-start.UnixNano()).Seconds(), "events/s")
	b.ReportMetric(float64(updates)/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(want), "cpu-µs/event")
	b.ReportMetric(float64(peakHeap.Load()-min(peakHeap.Load(), ms0.HeapInuse))/(1<<20), "heap-growth-MiB")
}

// BenchmarkWatchInitialEvents: a watch that starts with 10,000 synthetic
// ADDED events (resourceVersion=0, from the watch cache; and a consistent
// streaming list), read to the end over HTTP.
func BenchmarkWatchInitialEvents(b *testing.B) {
	_, ts, _ := newWatchServer(b, watch.Settings{}, false)
	const n = 10_000
	pad := strings.Repeat("p", 256)
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				do(b, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%05d","labels":{"i":"%d"}},"data":{"pad":%q}}`, i, i%10, pad))
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, q := range []struct{ name, query string }{
		{"rv=0", "?watch=1&resourceVersion=0"},
		{"streaming-list", "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"},
		{"rv=0,label-selected-10%", "?watch=1&resourceVersion=0&labelSelector=i%3D3"},
	} {
		b.Run(q.name, func(b *testing.B) {
			want := n
			if strings.Contains(q.query, "labelSelector") {
				want = n / 10
			}
			var bytesRead int64
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				bytesRead = readInitial(b, ts, q.query, want)
			}
			b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.SetBytes(bytesRead)
		})
	}
}

// readInitial starts a watch and reads until want ADDED events have come.
func readInitial(b *testing.B, ts *httptest.Server, query string, want int) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+cmPath+query, nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var got int
	var read int64
	for got < want {
		line, err := br.ReadSlice('\n')
		read += int64(len(line))
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF || err != nil {
			b.Fatalf("watch ended after %d events: %v", got, err)
		}
		if bytes.HasPrefix(line, []byte(`{"type":"ADDED"`)) {
			got++
		}
	}
	return read
}
