package etcd_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// TestScalingFigures measures the figures of docs/scaling.md: one and three
// API instances in this process over one etcd (with fsync) on this machine,
// and one instance on Badger for comparison.
// It runs only with KAPI_SCALING=1 (a few minutes; the load generator
// shares the machine):
//
//	KAPI_SCALING=1 go test -run TestScalingFigures -v -timeout 30m ./storage/etcd/
func TestScalingFigures(t *testing.T) {
	if os.Getenv("KAPI_SCALING") == "" {
		t.Skip("set KAPI_SCALING=1 to measure the figures of docs/scaling.md")
	}
	objects := envInt("KAPI_SCALING_OBJECTS", 3000)
	watchers := envInt("KAPI_SCALING_WATCHERS", 300)
	updates := envInt("KAPI_SCALING_UPDATES", 1000)
	for _, n := range []int{0, 1, 3} {
		name := fmt.Sprintf("instances=%d", n)
		if n == 0 {
			name = "badger" // the embedded store, for comparison
		}
		t.Run(name, func(t *testing.T) {
			var ins []*instance
			if n == 0 {
				ins = append(ins, startBadgerInstance(t))
			} else {
				srv := etcdtest.Start(t, etcdtest.Options{Fsync: true})
				for i := range n {
					ins = append(ins, startInstance(t, srv, fmt.Sprintf("api-%d", i), instanceOptions{}))
				}
			}
			b := newBench(ins)
			ins[0].must(t, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"bench"}}`)

			// Creates: 32 clients, requests round-robin over the instances.
			lat, el := b.run(t, objects, 32, func(i int) (string, string, string) {
				return "POST", "/api/v1/namespaces/bench/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%05d"},"data":{"v":%q}}`, i, payload)
			})
			t.Logf("%s create: %d objects, 32 clients: %.0f/s, p50 %v, p99 %v",
				name, objects, float64(objects)/el.Seconds(), pct(lat, 50), pct(lat, 99))

			// Gets and consistent lists (each confirms the etcd revision).
			lat, el = b.run(t, 2000, 32, func(i int) (string, string, string) {
				return "GET", fmt.Sprintf("/api/v1/namespaces/bench/configmaps/cm-%05d", i%objects), ""
			})
			t.Logf("%s get: %.0f/s, p50 %v, p99 %v", name, 2000/el.Seconds(), pct(lat, 50), pct(lat, 99))
			lat, el = b.run(t, 200, 8, func(int) (string, string, string) {
				return "GET", "/api/v1/namespaces/bench/configmaps?limit=500", ""
			})
			t.Logf("%s consistent list (limit 500 of %d): %.0f/s, p50 %v, p99 %v", name, objects, 200/el.Seconds(), pct(lat, 50), pct(lat, 99))

			// Watch fan-out: watchers spread over the instances, updates
			// round-robin over them; every watcher must see every update.
			rv := str(ins[0].must(t, 200, "GET", "/api/v1/namespaces/bench/configmaps?limit=1", ""), "metadata", "resourceVersion")
			fw := b.watchAll(t, watchers, "/api/v1/namespaces/bench/configmaps?watch=1&resourceVersion="+rv)
			start := time.Now()
			sent := make([]time.Time, updates)
			lat, el = b.run(t, updates, 16, func(i int) (string, string, string) {
				sent[i] = time.Now()
				return "PATCH", fmt.Sprintf("/api/v1/namespaces/bench/configmaps/cm-%05d", i%objects),
					fmt.Sprintf(`{"metadata":{"labels":{"u":"%d"}}}`, i)
			})
			t.Logf("%s update (merge patch) with %d watchers: %.0f/s, p50 %v, p99 %v", name, watchers, float64(updates)/el.Seconds(), pct(lat, 50), pct(lat, 99))
			delivery := fw.wait(t, updates, 120*time.Second, sent)
			total := time.Since(start)
			t.Logf("%s watch fan-out: %d watchers x %d events = %d events in %v (%.0f events/s), write-to-event p50 %v, p99 %v, missed 0",
				name, watchers, updates, watchers*updates, total.Round(time.Millisecond), float64(watchers*updates)/total.Seconds(),
				pct(delivery, 50), pct(delivery, 99))
		})
	}
}

// startBadgerInstance starts one API server on a durable Badger store.
func startBadgerInstance(t *testing.T) *instance {
	t.Helper()
	st, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(context.Background(), apiserver.Config{Storage: st, AllowAnonymous: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	in := &instance{name: "badger", api: api, ts: httptest.NewServer(api)}
	t.Cleanup(func() { in.ts.Close(); api.Close(); st.Close() })
	return in
}

const payload = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// bench sends requests round-robin over instances with pooled connections.
type bench struct {
	ins    []*instance
	client *http.Client
}

func newBench(ins []*instance) *bench {
	return &bench{ins: ins, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}}}
}

// run sends total requests from clients goroutines; req(i) gives the i-th.
// It returns the latencies and the elapsed time.
func (b *bench) run(t *testing.T, total, clients int, req func(i int) (method, path, body string)) ([]time.Duration, time.Duration) {
	t.Helper()
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				method, path, body := req(i)
				in := b.ins[i%len(b.ins)]
				r, err := http.NewRequestWithContext(t.Context(), method, in.ts.URL+path, strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				switch method {
				case "PATCH":
					r.Header.Set("Content-Type", "application/merge-patch+json")
				case "POST", "PUT":
					r.Header.Set("Content-Type", "application/json")
				}
				t0 := time.Now()
				resp, err := b.client.Do(r)
				if err != nil {
					t.Errorf("%s %s: %v", method, path, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode >= 300 {
					t.Errorf("%s %s: %s", method, path, resp.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return lat, time.Since(start)
}

// fanout is a set of watchers recording when each event arrived.
type fanout struct {
	mu    sync.Mutex
	recvd [][]time.Time // per watcher, by event (label "u")
	count []int
	errs  []error
}

func (b *bench) watchAll(t *testing.T, n int, path string) *fanout {
	t.Helper()
	fw := &fanout{recvd: make([][]time.Time, n), count: make([]int, n)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ready := make(chan error, n)
	for w := range n {
		in := b.ins[w%len(b.ins)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", in.ts.URL+path, nil)
			resp, err := b.client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				ready <- fmt.Errorf("watch on %s: %v %v", in.name, err, resp)
				return
			}
			ready <- nil
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				now := time.Now()
				// The label written by the update, found without decoding
				// the whole event (the load generator shares the machine).
				line := sc.Bytes()
				i := bytes.Index(line, []byte(`"u":"`))
				if i < 0 {
					continue
				}
				line = line[i+5:]
				u, err := strconv.Atoi(string(line[:max(0, bytes.IndexByte(line, '"'))]))
				if err != nil {
					fw.mu.Lock()
					fw.errs = append(fw.errs, fmt.Errorf("bad event %q", sc.Bytes()))
					fw.mu.Unlock()
					return
				}
				fw.mu.Lock()
				if fw.recvd[w] == nil {
					fw.recvd[w] = make([]time.Time, 0, 1024)
				}
				for len(fw.recvd[w]) <= u {
					fw.recvd[w] = append(fw.recvd[w], time.Time{})
				}
				fw.recvd[w][u] = now
				fw.count[w]++
				fw.mu.Unlock()
			}
		}()
	}
	for range n {
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
	}
	return fw
}

// wait waits until every watcher has events for every update and returns
// the write-to-event latencies.
func (fw *fanout) wait(t *testing.T, updates int, timeout time.Duration, sent []time.Time) []time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		fw.mu.Lock()
		done := true
		for w := range fw.count {
			if fw.count[w] < updates {
				done = false
			}
		}
		errs := fw.errs
		fw.mu.Unlock()
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watchers did not get all %d events within %v: %v", updates, timeout, fw.count)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var out []time.Duration
	for w := range fw.recvd {
		for u, at := range fw.recvd[w] {
			if at.IsZero() {
				t.Fatalf("watcher %d missed update %d", w, u)
			}
			out = append(out, at.Sub(sent[u]))
		}
	}
	return out
}

// pct is the p-th percentile of d.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}
