package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The handler benchmarks call ServeHTTP directly (no network) on a durable
// on-disk Badger store, with configmaps of about 2 KiB.

var benchValue = strings.Repeat("x", 2000)

func benchServer(b *testing.B) *Server {
	b.Helper()
	store, err := badger.Open(badger.DefaultOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		b.Fatal(err)
	}
	return api
}

func serve(b *testing.B, h http.Handler, method, path, body string, want int) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
	}
}

func fill(b *testing.B, api *Server, n int) {
	b.Helper()
	for i := 0; i < n; i++ {
		serve(b, api, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"cm-%05d"},"data":{"v":%q}}`, i, benchValue), 201)
	}
}

// BenchmarkCreate measures creates of 2 KiB configmaps from parallel
// clients (durable writes, group-committed), shaped as kbench's: apiVersion,
// kind, two labels and two data keys. Bodies are put together by
// concatenation, so that the client's share of the process CPU
// (cpu-ms/op) stays small.
func BenchmarkCreate(b *testing.B) {
	api := benchServer(b)
	var n atomic.Int64
	head := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"app":"kbench","shard":"3"},"name":"cm-`
	tail := `","namespace":"default"},"data":{"idx":"1","payload":"` + benchValue + `"}}`
	b.SetParallelism(16)
	b.ResetTimer()
	cpu := meterCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			serve(b, api, "POST", cmPath, head+strconv.FormatInt(n.Add(1), 10)+tail, 201)
		}
	})
	cpu.stop()
}

// BenchmarkGet measures gets of one 2 KiB configmap among 10,000.
func BenchmarkGet(b *testing.B) {
	api := benchServer(b)
	fill(b, api, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			serve(b, api, "GET", fmt.Sprintf("%s/cm-%05d", cmPath, i%10000), "", 200)
			i += 7
		}
	})
}

// BenchmarkListFull measures a full list of 10,000 configmaps of 2 KiB.
func BenchmarkListFull(b *testing.B) {
	api := benchServer(b)
	fill(b, api, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(b, api, "GET", cmPath, "", 200)
	}
}

// BenchmarkListPaged measures a paged walk (limit 500) over 10,000
// configmaps of 2 KiB, following continue tokens: one op is the whole walk.
func BenchmarkListPaged(b *testing.B) {
	api := benchServer(b)
	fill(b, api, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cont, pages := "", 0
		for {
			req := httptest.NewRequest("GET", cmPath+"?limit=500&continue="+url.QueryEscape(cont), nil)
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("page %d: %d %s", pages, rec.Code, rec.Body.String())
			}
			pages++
			// The list metadata comes first: read the token from there.
			head := rec.Body.Bytes()[:min(rec.Body.Len(), 512)]
			cont = ""
			if i := bytes.Index(head, []byte(`"continue":"`)); i >= 0 {
				rest := head[i+len(`"continue":"`):]
				cont = string(rest[:bytes.IndexByte(rest, '"')])
			}
			if cont == "" {
				break
			}
		}
		if pages != 20 {
			b.Fatalf("%d pages, want 20", pages)
		}
	}
}
