package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The list benchmarks: full and paged (limit=500) lists of configmaps of
// about 2 KiB through ServeHTTP (no network), in-memory Badger, in each
// representation, streamed and (with Server.bufferLists) buffered. Besides
// time, process CPU and allocations they report peak-heap-MB: the largest
// growth of the Go heap (live and not yet collected objects, sampled every
// 500 µs) over its size after two GCs (base-heap-MB: the store, the watch
// cache, the pools emptied), in one extra untimed list
// run with GOGC=2 so that garbage does not pile up. 10,000 objects by
// default; set KAPI_BENCH_LARGE=1 for 100,000 as well, and
// KAPI_BENCH_PROTOBUF_BUFFER=bytes to change Server.protobufListBuffer.
//
//	go test ./apiserver/ -run '^$' -bench 'BenchmarkLists' -benchtime 5x -count 3

var listBenchServers sync.Map // size → *Server, shared by -count runs

func listBenchServer(b *testing.B, n int) *Server {
	if api, ok := listBenchServers.Load(n); ok {
		return api.(*Server)
	}
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		b.Fatal(err)
	}
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, DisableControllers: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		b.Fatal(err)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				obj := registry.Object{
					"metadata": map[string]any{"name": fmt.Sprintf("config-%06d", i), "labels": map[string]any{"app": "bench", "shard": fmt.Sprint(i % 10)}},
					"data":     map[string]any{"a": fmt.Sprint("value-a-", i), "payload": benchValue},
				}
				if _, err := st.Create(context.Background(), "default", obj, registry.WriteOptions{FieldManager: "bench"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	listBenchServers.Store(n, api)
	return api
}

// heapPeak samples the heap while a list runs.
type heapPeak struct {
	sample []rtmetrics.Sample
	base   uint64
	peak   atomic.Uint64
	stop   chan struct{}
	done   chan struct{}
}

func (h *heapPeak) read() uint64 {
	rtmetrics.Read(h.sample)
	return h.sample[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	// Two collections empty the sync.Pools (their victim caches too), so
	// that a pooled buffer counts in the peak, not in the base.
	runtime.GC()
	runtime.GC()
	h := &heapPeak{sample: []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}, stop: make(chan struct{}), done: make(chan struct{})}
	h.base = h.read()
	go func() {
		defer close(h.done)
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				rtmetrics.Read(s)
				if v := s[0].Value.Uint64(); v > h.peak.Load() {
					h.peak.Store(v)
				}
			}
		}
	}()
	return h
}

// end returns the peak growth in bytes.
func (h *heapPeak) end() uint64 {
	if v := h.read(); v > h.peak.Load() {
		h.peak.Store(v)
	}
	close(h.stop)
	<-h.done
	if p := h.peak.Load(); p > h.base {
		return p - h.base
	}
	return 0
}

// bodyWriter is a ResponseWriter that keeps the body only when asked to
// (paged lists need the continue token).
type bodyWriter struct {
	h    http.Header
	code int
	n    int
	keep bool
	buf  bytes.Buffer
}

func (w *bodyWriter) Header() http.Header { return w.h }
func (w *bodyWriter) WriteHeader(c int)   { w.code = c }
func (w *bodyWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.n += len(p)
	if w.keep {
		w.buf.Write(p)
	}
	return len(p), nil
}

type listBenchCase struct {
	name, accept, encoding string
}

var listBenchCases = []listBenchCase{
	{"JSON", "application/json", ""},
	{"JSONGzip", "application/json", "gzip"},
	{"Protobuf", "application/vnd.kubernetes.protobuf", ""},
	{"ProtobufGzip", "application/vnd.kubernetes.protobuf", "gzip"},
	{"Table", "application/json;as=Table;g=meta.k8s.io;v=v1", "gzip"},
}

func BenchmarkLists(b *testing.B) {
	pbBuffer := 0
	if v := os.Getenv("KAPI_BENCH_PROTOBUF_BUFFER"); v != "" {
		// Compare protobuf buffer bounds (bytes).
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		pbBuffer = n
	}
	sizes := []int{10000}
	if os.Getenv("KAPI_BENCH_LARGE") == "1" {
		sizes = append(sizes, 100000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			api := listBenchServer(b, n)
			if pbBuffer > 0 {
				defer func(old int) { api.protobufListBuffer = old }(api.protobufListBuffer)
				api.protobufListBuffer = pbBuffer
			}
			for _, tc := range listBenchCases {
				for _, mode := range []string{"streamed", "buffered"} {
					b.Run("Full/"+tc.name+"/"+mode, func(b *testing.B) {
						defer api.bufferLists.Store(api.bufferLists.Load())
						api.bufferLists.Store(mode == "buffered")
						benchList(b, api, tc, "", n, false)
					})
				}
				b.Run("Paged/"+tc.name, func(b *testing.B) {
					benchList(b, api, tc, "", n, true)
				})
			}
			for _, mode := range []string{"streamed", "buffered"} {
				b.Run("Full/JSONGzip/cache/"+mode, func(b *testing.B) {
					defer api.bufferLists.Store(api.bufferLists.Load())
					api.bufferLists.Store(mode == "buffered")
					benchList(b, api, listBenchCases[1], "resourceVersion=0", n, false)
				})
			}
		})
	}
}

func benchList(b *testing.B, api *Server, tc listBenchCase, query string, n int, paged bool) {
	w := &bodyWriter{keep: paged}
	var bytes uint64
	list := func() {
		cont, pages := "", 0
		bytes = 0
		for {
			q := url.Values{}
			if paged {
				q.Set("limit", "500")
				if cont != "" {
					q.Set("continue", cont)
				}
			}
			path := cmPath + "?" + q.Encode()
			if query != "" {
				path += "&" + query
			}
			r := httptest.NewRequest("GET", path, nil)
			r.Header.Set("Accept", tc.accept)
			if tc.encoding != "" {
				r.Header.Set("Accept-Encoding", tc.encoding)
			}
			w.h, w.code, w.n = http.Header{}, 0, 0
			w.buf.Reset()
			api.ServeHTTP(w, r)
			if w.code != 200 {
				b.Fatalf("%s: %d", path, w.code)
			}
			bytes += uint64(w.n)
			pages++
			if !paged {
				break
			}
			if cont = continueOf(b, w); cont == "" {
				break
			}
		}
		if paged && pages != (n+499)/500 {
			b.Fatalf("%d pages", pages)
		}
	}
	list() // warm up (the first resourceVersion=0 list starts the watch cache)
	// Memory: one untimed list with the collector at GOGC=2, so that the
	// list's garbage is collected as it goes and the peak is close to what
	// the list keeps live at once.
	old := debug.SetGCPercent(2)
	hp := startHeapPeak()
	list()
	peak := hp.end()
	debug.SetGCPercent(old)
	runtime.GC()

	m := meterCPU(b)
	for b.Loop() {
		list()
	}
	m.stop()
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(hp.base)/1e6, "base-heap-MB")
	b.ReportMetric(float64(bytes)/1e6, "resp-MB")
}

// continueOf reads the continue token of a list page in any of the
// benchmarked representations.
func continueOf(b *testing.B, w *bodyWriter) string {
	body := w.buf.Bytes()
	if w.h.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			b.Fatal(err)
		}
	}
	if strings.HasPrefix(w.h.Get("Content-Type"), codec.MediaProtobuf) {
		u, err := codec.DecodeEnvelope(body)
		if err != nil {
			b.Fatal(err)
		}
		var cont string
		_ = codec.Walk(u.Raw, func(num protowire.Number, _ protowire.Type, v []byte) error {
			if num == 1 {
				return codec.Walk(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
					if num == 3 {
						cont = string(v)
					}
					return nil
				})
			}
			return nil
		})
		return cont
	}
	md, err := codec.TopLevelField(body, "metadata")
	if err != nil {
		b.Fatal(err)
	}
	c, err := codec.TopLevelField(md, "continue")
	if err != nil || c == nil {
		return ""
	}
	return strings.Trim(string(c), `"`)
}
