package etcd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/etcd"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// instance is one kapi API server over the shared etcd.
type instance struct {
	name string
	cli  *clientv3.Client // the store's own client (closing it is a crash)
	st   *etcd.Store
	el   *etcd.Elector
	api  *apiserver.Server
	ts   *httptest.Server

	once sync.Once
}

type instanceOptions struct {
	prefix     string
	electorTTL time.Duration
	compaction time.Duration // default: none
	// endpoints, when set, are where the instance reaches etcd (a proxy).
	endpoints []string
	// onLead, when set, is called with the context of each term the
	// instance leads, before its controllers run with it.
	onLead func(ctx context.Context)
}

// leadHook is an apiserver.Elector that shows each term's context to a
// test before the controllers get it.
type leadHook struct {
	el     *etcd.Elector
	onLead func(ctx context.Context)
}

func (h leadHook) Run(ctx context.Context, lead func(ctx context.Context)) {
	h.el.Run(ctx, func(ctx context.Context) { h.onLead(ctx); lead(ctx) })
}

func testLogger(t testing.TB) *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("KAPI_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: lvl}))
}

// startInstance starts an API server named name on srv, serving namespaces
// and configmaps, with its controllers under the etcd leader election.
func startInstance(t *testing.T, srv *etcdtest.Server, name string, o instanceOptions) *instance {
	t.Helper()
	if o.prefix == "" {
		o.prefix = "/kapi/"
	}
	if o.electorTTL == 0 {
		o.electorTTL = 2 * time.Second
	}
	if o.compaction == 0 {
		o.compaction = -1
	}
	// A client of its own, given to the store, so that a test can close it
	// under the store: the instance then dies without resigning.
	if o.endpoints == nil {
		o.endpoints = srv.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: o.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := etcd.Open(t.Context(), etcd.Options{Client: cli, Prefix: o.prefix, CompactionInterval: o.compaction,
		ElectionTTL: o.electorTTL, Logger: testLogger(t).With("instance", name)})
	if err != nil {
		t.Fatal(err)
	}
	el := st.Elector(etcd.ElectorOptions{Identity: name, TTL: o.electorTTL})
	var elector apiserver.Elector = el
	if o.onLead != nil {
		elector = leadHook{el: el, onLead: o.onLead}
	}
	api, err := apiserver.New(context.Background(), apiserver.Config{Storage: st, Elector: elector, AllowAnonymous: true,
		Logger: testLogger(t).With("instance", name), ControllerResync: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	in := &instance{name: name, cli: cli, st: st, el: el, api: api, ts: httptest.NewServer(api)}
	t.Cleanup(in.stop)
	return in
}

// stop shuts the instance down in order (resigning its leadership).
func (in *instance) stop() {
	in.once.Do(func() {
		in.ts.Close()
		in.api.Close()
		in.st.Close()
		in.cli.Close()
	})
}

// crash makes the instance lose etcd at once, without resigning: its
// client closes under it, so its lease expires only after its TTL.
func (in *instance) crash() {
	in.once.Do(func() {
		in.cli.Close()
		in.ts.Close()
		in.api.Close()
		in.st.Close()
	})
}

type response struct {
	code int
	body []byte
}

func (r response) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// do sends one request; safe from any goroutine (it reports with t.Errorf).
func (in *instance) do(t testing.TB, method, path, body string) response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, in.ts.URL+path, rd)
	if err != nil {
		t.Errorf("%s: %v", in.name, err)
		return response{}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := in.ts.Client().Do(req)
	if err != nil {
		t.Errorf("%s %s %s: %v", in.name, method, path, err)
		return response{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s %s: %v", in.name, method, path, err)
	}
	return response{code: resp.StatusCode, body: b}
}

// must sends a request and fails the test unless the code is want.
func (in *instance) must(t testing.TB, want int, method, path, body string) map[string]any {
	t.Helper()
	r := in.do(t, method, path, body)
	if r.code != want {
		t.Fatalf("%s %s %s: %d %s, want %d", in.name, method, path, r.code, r.body, want)
	}
	return r.object(t)
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	switch v := cur.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// watchEvent is what a test keeps of a watch event.
type watchEvent struct {
	Type, Name, RV string
}

// watcher collects the events of one HTTP watch.
type watcher struct {
	name string
	mu   sync.Mutex
	evs  []watchEvent
	err  error
	done chan struct{}
}

func (in *instance) watch(t *testing.T, path string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.ts.URL+path, nil)
	resp, err := in.ts.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("%s: watch %s: %d %s", in.name, path, resp.StatusCode, b)
	}
	w := &watcher{name: in.name, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev struct {
				Type   string         `json:"type"`
				Object map[string]any `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				w.mu.Lock()
				w.err = fmt.Errorf("bad watch line %q: %v", sc.Text(), err)
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			w.evs = append(w.evs, watchEvent{ev.Type, str(ev.Object, "metadata", "name"), str(ev.Object, "metadata", "resourceVersion")})
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-w.done })
	return w
}

// waitFor waits until the watcher holds n events and returns them.
func (w *watcher) waitFor(t *testing.T, n int, timeout time.Duration) []watchEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		evs, err := append([]watchEvent(nil), w.evs...), w.err
		w.mu.Unlock()
		if err != nil {
			t.Fatalf("watch on %s: %v", w.name, err)
		}
		if len(evs) >= n {
			return evs
		}
		select {
		case <-w.done:
			t.Fatalf("watch on %s ended after %d of %d events", w.name, len(evs), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch on %s: %d of %d events within %v", w.name, len(evs), n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
