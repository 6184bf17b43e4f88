package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/watch"
)

var widgetsGVR = meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}

// newWatchServer is newTestServer with watch settings, optionally over
// HTTP/2 with TLS. It returns the store too.
func newWatchServer(t testing.TB, ws watch.Settings, h2 bool) (*Server, *httptest.Server, *badger.Store) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api, ts := serveWatchAPI(t, Config{Storage: store, MaxRequestBodyBytes: 1 << 20, AllowAnonymous: true, Watch: ws}, h2, nil)
	return api, ts, store
}

// serveWatchAPI serves configmaps and widgets with cfg, over HTTP/1.1 or
// HTTP/2 with TLS; wrap, when set, wraps the server's listener.
func serveWatchAPI(t testing.TB, cfg Config, h2 bool, wrap func(net.Listener) net.Listener) (*Server, *httptest.Server) {
	t.Helper()
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetResource(t)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewUnstartedServer(api)
	if wrap != nil {
		ts.Listener = wrap(ts.Listener)
	}
	if h2 {
		ts.EnableHTTP2 = true
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return api, ts
}

func objOf(ev map[string]any) map[string]any {
	o, _ := ev["object"].(map[string]any)
	return o
}

// expectEvents reads events (skipping periodic bookmarks) and checks them
// against "TYPE name" strings.
func (ws *watchStream) expect(t *testing.T, want ...string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for len(got) < len(want) {
		ev := ws.next(t)
		if ev["type"] == "BOOKMARK" && str(objOf(ev), "metadata", "annotations") == "" {
			continue
		}
		s := fmt.Sprintf("%s %s", ev["type"], str(objOf(ev), "metadata", "name"))
		if s != want[len(got)] {
			t.Fatalf("event %d: %s (%v), want %s", len(got), s, ev, want[len(got)])
		}
		got = append(got, ev)
	}
	return got
}

// ended waits for the server to end the stream.
func (ws *watchStream) ended(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-ws.events:
			if !ok {
				return
			}
			if ev["type"] != "BOOKMARK" {
				t.Fatalf("unexpected event %v before the end", ev)
			}
		case <-deadline:
			t.Fatalf("watch did not end within %v", within)
		}
	}
}

// quiet checks that no event but bookmarks arrives for d.
func (ws *watchStream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-ws.events:
			if !ok {
				t.Fatal("watch ended")
			}
			t.Fatalf("unexpected event %v", ev)
		case <-deadline:
			return
		}
	}
}

func watchAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func watchRV(t *testing.T, r response) string {
	t.Helper()
	return str(r.object(t), "metadata", "resourceVersion")
}

func TestWatchResourceVersions(t *testing.T) {
	api, ts, store := newWatchServer(t, watch.Settings{WindowEvents: 4}, false)
	created := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	rvA := watchRV(t, created)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1}}`)

	// Unset: the most recent state, then changes.
	unset := startWatch(t, ts, wdPath+"?watch=1")
	unset.expect(t, "ADDED a", "ADDED b")
	// "0": any recent state.
	zero := startWatch(t, ts, wdPath+"?watch=true&resourceVersion=0")
	zero.expect(t, "ADDED a", "ADDED b")
	// A value: only the changes after it.
	after := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rvA)
	after.expect(t, "ADDED b")
	do(t, ts, "PATCH", wdPath+"/a", `{"spec":{"size":2}}`, "Content-Type", "application/merge-patch+json")
	for _, w := range []*watchStream{unset, zero, after} {
		if ev := w.expect(t, "MODIFIED a")[0]; str(objOf(ev), "spec", "size") != "2" {
			t.Fatalf("modified event %v", ev)
		}
	}

	// Older than the window of 4 events but in storage history: replayed
	// from storage, in order, then from the cache, synced.
	for i := 0; i < 6; i++ {
		do(t, ts, "PATCH", wdPath+"/b", fmt.Sprintf(`{"spec":{"size":%d}}`, 10+i), "Content-Type", "application/merge-patch+json")
	}
	old := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rvA)
	old.expect(t, "ADDED b", "MODIFIED a", "MODIFIED b", "MODIFIED b", "MODIFIED b", "MODIFIED b", "MODIFIED b", "MODIFIED b")
	do(t, ts, "DELETE", wdPath+"/a", "")
	old.expect(t, "DELETED a")
	st, _ := api.Registry().Store(widgetsGVR)
	eventually(t, "the storage watcher to hand over to the cache", func() bool {
		s, ok := st.WatchCacheStats()
		return ok && s.SyncedWatchers == s.Watchers
	})

	// Older than storage history: 200, then one ERROR event with 410 Expired.
	cur, err := store.CurrentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Compact(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	gone := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rvA)
	ev := gone.next(t)
	o := objOf(ev)
	if ev["type"] != "ERROR" || str(o, "kind") != "Status" || str(o, "code") != "410" || str(o, "reason") != "Expired" ||
		!strings.HasPrefix(str(o, "message"), "too old resource version: "+rvA) {
		t.Fatalf("too old watch: %v", ev)
	}
	gone.ended(t, 10*time.Second)

	// Newer than anything: the watch waits, and sends what comes after it.
	future, _ := strconv.ParseInt(watchRV(t, do(t, ts, "GET", wdPath, "")), 10, 64)
	fw := startWatch(t, ts, wdPath+fmt.Sprintf("?watch=1&resourceVersion=%d", future+2))
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"f1"},"spec":{"size":1}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"f2"},"spec":{"size":1}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"f3"},"spec":{"size":1}}`)
	fw.expect(t, "ADDED f3")

	// Bad input.
	do(t, ts, "GET", wdPath+"?watch=1&resourceVersion=abc", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", wdPath+"?watch=1&resourceVersion=-3", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", "/apis/example.dev/v1/namespaces/default/gadgets?watch=1", "").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "GET", "/apis/nope.dev/v1/gadgets?watch=1", "").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "GET", wdPath+"?watch=1&timeoutSeconds=x", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", wdPath+"?watch=1&labelSelector="+url.QueryEscape("a in (b"), "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", wdPath+"?watch=1&fieldSelector=spec.size%3D1", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", wdPath+"/a?watch=1&fieldSelector=metadata.name%3Db", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", wdPath+"?watch=1&sendInitialEvents=maybe&resourceVersionMatch=NotOlderThan", "").status(t, 400, meta.StatusReasonBadRequest)
	for _, q := range []string{"sendInitialEvents=true", "sendInitialEvents=false", "resourceVersionMatch=NotOlderThan&resourceVersion=1",
		"sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1"} {
		st := do(t, ts, "GET", wdPath+"?watch=1&"+q, "").status(t, 422, meta.StatusReasonInvalid)
		if st.Details == nil || st.Details.Kind != "ListOptions" || st.Details.Group != "meta.k8s.io" {
			t.Fatalf("%s: status %+v", q, st)
		}
	}
}

func TestWatchSelectorsAndSingleObject(t *testing.T) {
	_, ts, _ := newWatchServer(t, watch.Settings{}, false)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"x","labels":{"tier":"web"}},"spec":{"size":1,"color":"red"}}`)
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"other"}}`)
	do(t, ts, "POST", "/apis/example.dev/v1/namespaces/other/widgets", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"x"},"spec":{"size":1,"color":"red"}}`)

	labels := startWatch(t, ts, wdPath+"?watch=1&labelSelector=tier%3Dweb")
	colors := startWatch(t, ts, "/apis/example.dev/v1/widgets?watch=1&fieldSelector=spec.color%3Dblue")
	one := startWatch(t, ts, wdPath+"/y?watch=1")
	nsOnly := startWatch(t, ts, "/apis/example.dev/v1/widgets?watch=1&fieldSelector=metadata.namespace%3Dother")
	labels.expect(t, "ADDED x")
	nsOnly.expect(t, "ADDED x")

	patch := func(path, body string) {
		do(t, ts, "PATCH", path, body, "Content-Type", "application/merge-patch+json")
	}
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"y"},"spec":{"size":1,"color":"red"}}`)
	patch(wdPath+"/x", `{"metadata":{"labels":{"tier":"db"}},"spec":{"color":"blue"}}`) // leaves labels, enters colors
	patch(wdPath+"/y", `{"metadata":{"labels":{"tier":"web"}}}`)                        // enters labels
	patch(wdPath+"/x", `{"spec":{"color":"green"}}`)                                    // leaves colors
	patch("/apis/example.dev/v1/namespaces/other/widgets/x", `{"spec":{"size":5}}`)
	do(t, ts, "DELETE", wdPath+"/y", "")

	evs := labels.expect(t, "DELETED x", "ADDED y", "DELETED y")
	if str(objOf(evs[0]), "metadata", "labels", "tier") != "web" {
		t.Fatalf("an object leaving the selection is sent as it was: %v", evs[0])
	}
	evs = colors.expect(t, "ADDED x", "DELETED x")
	if str(objOf(evs[1]), "spec", "color") != "blue" || str(objOf(evs[1]), "metadata", "resourceVersion") == str(objOf(evs[0]), "metadata", "resourceVersion") {
		t.Fatalf("leaving event %v after %v", evs[1], evs[0])
	}
	one.expect(t, "ADDED y", "MODIFIED y", "DELETED y")
	evs = nsOnly.expect(t, "MODIFIED x")
	if str(objOf(evs[0]), "metadata", "namespace") != "other" {
		t.Fatalf("namespace field selector: %v", evs[0])
	}
}

func TestWatchBookmarksAndTimeouts(t *testing.T) {
	_, ts, _ := newWatchServer(t, watch.Settings{BookmarkInterval: 100 * time.Millisecond}, false)
	rv := watchRV(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`))
	w := startWatch(t, ts, wdPath+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv)
	ev := w.next(t)
	o := objOf(ev)
	md, _ := o["metadata"].(map[string]any)
	if got, _ := strconv.ParseInt(str(o, "metadata", "resourceVersion"), 10, 64); ev["type"] != "BOOKMARK" || str(o, "kind") != "Widget" ||
		str(o, "apiVersion") != "example.dev/v1" || len(md) != 1 || len(o) != 3 || got < watchAtoi(t, rv) {
		t.Fatalf("bookmark %v, want a bare Widget at %s", ev, rv)
	}
	// Bookmarks follow writes elsewhere too.
	nsRV := watchRV(t, do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"bm"}}`))
	eventually(t, "a bookmark at the namespace's revision", func() bool {
		ev := w.next(t)
		return ev["type"] == "BOOKMARK" && str(objOf(ev), "metadata", "resourceVersion") == nsRV
	})

	// Without allowWatchBookmarks: none.
	plain := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rv)
	plain.quiet(t, 400*time.Millisecond)

	// timeoutSeconds ends the stream; with the default interval of a minute
	// the bookmark comes 2s before the end.
	_, ts2, _ := newWatchServer(t, watch.Settings{}, false)
	rv = watchRV(t, do(t, ts2, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`))
	start := time.Now()
	tw := startWatch(t, ts2, wdPath+"?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion="+rv)
	if ev := tw.next(t); ev["type"] != "BOOKMARK" || time.Since(start) > 2500*time.Millisecond {
		t.Fatalf("got %v after %v, want the bookmark before the timeout", ev, time.Since(start))
	}
	tw.ended(t, 10*time.Second)
	if d := time.Since(start); d < 2500*time.Millisecond || d > 8*time.Second {
		t.Fatalf("a watch of timeoutSeconds=3 lasted %v", d)
	}
}

func TestWatchStreamingList(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{}, false)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	rvB := watchRV(t, do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1}}`))
	// The last write is elsewhere: a consistent start must still reflect it.
	nsRV := watchRV(t, do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"sl"}}`))

	check := func(query, minRV string) *watchStream {
		t.Helper()
		w := startWatch(t, ts, wdPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"+query)
		w.expect(t, "ADDED a", "ADDED b")
		ev := w.next(t)
		o := objOf(ev)
		got, _ := strconv.ParseInt(str(o, "metadata", "resourceVersion"), 10, 64)
		min, _ := strconv.ParseInt(minRV, 10, 64)
		if ev["type"] != "BOOKMARK" || str(o, "metadata", "annotations", "k8s.io/initial-events-end") != "true" || str(o, "kind") != "Widget" || got < min {
			t.Fatalf("%s: %v, want the initial-events-end bookmark at %s or later", query, ev, minRV)
		}
		return w
	}
	consistent := check("", nsRV)
	check("&resourceVersion=", nsRV)
	check("&resourceVersion=0", rvB)
	check("&resourceVersion="+rvB, rvB)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"c"},"spec":{"size":1}}`)
	consistent.expect(t, "ADDED c")

	// Without allowWatchBookmarks there is no initial-events-end bookmark.
	nb := startWatch(t, ts, wdPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
	nb.expect(t, "ADDED a", "ADDED b", "ADDED c")
	nb.quiet(t, 300*time.Millisecond)
	// sendInitialEvents=false: no initial events, from the most recent state.
	none := startWatch(t, ts, wdPath+"?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
	do(t, ts, "DELETE", wdPath+"/c", "")
	none.expect(t, "DELETED c")

	// A not-older-than state storage has not reached: after the wait, an
	// ERROR event with 504, as kube-apiserver.
	st, _ := api.Registry().Store(widgetsGVR)
	s, _ := st.WatchCacheStats()
	fw := startWatch(t, ts, wdPath+fmt.Sprintf("?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=%d", s.Revision+100))
	ev := fw.next(t)
	if ev["type"] != "ERROR" || str(objOf(ev), "code") != "504" || !strings.Contains(str(objOf(ev), "message"), "Too large resource version") {
		t.Fatalf("future streaming list: %v", ev)
	}
}

func TestListAndGetAtResourceVersionZero(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{}, false)
	for i := 0; i < 5; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d","labels":{"even":"%v"}}}`, i, i%2 == 0))
	}
	rv := watchRV(t, do(t, ts, "GET", cmPath, ""))
	eventually(t, "the cache to reach the last write", func() bool {
		l := do(t, ts, "GET", cmPath+"?resourceVersion=0", "").object(t)
		return watchAtoi(t, str(l, "metadata", "resourceVersion")) >= watchAtoi(t, rv) && len(l["items"].([]any)) == 5
	})
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if _, ok := st.WatchCacheStats(); !ok {
		t.Fatal("a resourceVersion=0 list did not use the watch cache")
	}
	l := do(t, ts, "GET", cmPath+"?resourceVersion=0&labelSelector=even%3Dtrue", "").object(t)
	if n := len(l["items"].([]any)); n != 3 {
		t.Fatalf("selected list from the cache: %d items", n)
	}
	if it := l["items"].([]any)[0].(map[string]any); str(it, "kind") != "" {
		t.Fatalf("configmap list items carry no kind: %v", it)
	}
	// A limit is ignored, as kube-apiserver ignores it for lists from its
	// watch cache: everything in one response, no continue token.
	page := do(t, ts, "GET", cmPath+"?resourceVersion=0&limit=2", "").object(t)
	if n := len(page["items"].([]any)); n != 5 || str(page, "metadata", "continue") != "" || str(page, "metadata", "remainingItemCount") != "" {
		t.Fatalf("resourceVersion=0&limit=2 from the cache: %d items, metadata %v", n, page["metadata"])
	}
	do(t, ts, "GET", cmPath+"?resourceVersion=0&resourceVersionMatch=Exact", "").status(t, 422, meta.StatusReasonInvalid)

	// Get at "0".
	do(t, ts, "DELETE", cmPath+"/c4", "")
	eventually(t, "the delete to reach the cache", func() bool {
		return do(t, ts, "GET", cmPath+"/c4?resourceVersion=0", "").code == 404
	})
	g := do(t, ts, "GET", cmPath+"/c1?resourceVersion=0", "")
	if g.code != 200 || str(g.object(t), "kind") != "ConfigMap" || str(g.object(t), "metadata", "name") != "c1" {
		t.Fatalf("get at 0: %d %s", g.code, g.body)
	}
}

// Watches over HTTP/2 stream the same way.
func TestWatchHTTP2(t *testing.T) {
	_, ts, _ := newWatchServer(t, watch.Settings{}, true)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	w := startWatch(t, ts, wdPath+"?watch=1")
	if w.resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", w.resp.Proto)
	}
	w.expect(t, "ADDED a")
	do(t, ts, "DELETE", wdPath+"/a", "")
	w.expect(t, "DELETED a")
}

// Re-registering a type ends its watches; clients reconnect to the new one.
func TestWatchReregister(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{}, false)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	w := startWatch(t, ts, wdPath+"?watch=1")
	w.expect(t, "ADDED a")
	if err := api.Register(widgetResource(t)); err != nil {
		t.Fatal(err)
	}
	w.ended(t, 10*time.Second)
	w2 := startWatch(t, ts, wdPath+"?watch=1")
	w2.expect(t, "ADDED a")
	if err := api.Unregister(widgetsGVR); err != nil {
		t.Fatal(err)
	}
	w2.ended(t, 10*time.Second)
	do(t, ts, "GET", wdPath+"?watch=1", "").status(t, 404, meta.StatusReasonNotFound)
}

// A client that stops reading blocks neither writers nor other watchers.
func TestWatchStalledClient(t *testing.T) {
	api, _, _ := newWatchServer(t, watch.Settings{WatcherBuffer: 16, WindowEvents: 1000}, false)
	// A server whose connections have small send buffers, and a stalled
	// client with a small receive buffer that reads the headers and nothing
	// else, so that the server's writes to it block soon.
	ts := httptest.NewUnstartedServer(api)
	ts.Listener = smallBufListener{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)
	big := strings.Repeat("x", 16<<10)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"big"},"data":{"v":"0"}}`)
	stalledClient := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}}
	req, _ := http.NewRequest("GET", ts.URL+cmPath+"?watch=1", nil)
	stalled, err := stalledClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Body.Close()
	other := startWatch(t, ts, cmPath+"?watch=1")
	other.expect(t, "ADDED big")
	const n = 100 // 100 × 16 KiB: more than the stalled connection's buffers hold
	start := time.Now()
	for i := 1; i <= n; i++ {
		r := do(t, ts, "PUT", cmPath+"/big", fmt.Sprintf(`{"metadata":{"name":"big"},"data":{"v":"%d","pad":"%s"}}`, i, big))
		if r.code != 200 {
			t.Fatalf("update %d: %d %s", i, r.code, r.body)
		}
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("%d writes took %v with a stalled watcher", n, d)
	}
	for i := 1; i <= n; i++ {
		ev := other.expect(t, "MODIFIED big")[0]
		if v := str(objOf(ev), "data", "v"); v != strconv.Itoa(i) {
			t.Fatalf("other watcher: update %d has v=%s", i, v)
		}
	}
	// The stalled watcher holds no queue of its own: it dropped it and sits
	// behind, no longer synced.
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	eventually(t, "the stalled watcher to be no longer synced", func() bool {
		s, _ := st.WatchCacheStats()
		return s.Watchers == 2 && s.SyncedWatchers == 1
	})
}

// Thousands of watch clients connecting and going away leave no goroutine
// and no watcher behind.
func TestWatchClientsComeAndGo(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{}, false)
	for i := 0; i < 20; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	round := func(n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 100)
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				q := []string{"?watch=1", "?watch=1&resourceVersion=0", "?watch=1&allowWatchBookmarks=true&resourceVersion=1",
					"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"}[i%4]
				req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+cmPath+q, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				if i%3 != 0 {
					// Read a line, then go away.
					_, _ = bufio.NewReader(resp.Body).ReadString('\n')
				}
			}(i)
		}
		wg.Wait()
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	measure := func() int {
		client.CloseIdleConnections()
		runtime.GC()
		return runtime.NumGoroutine()
	}
	round(100)
	eventually(t, "watchers of the warm-up to go", func() bool { s, _ := st.WatchCacheStats(); return s.Watchers == 0 })
	g0 := measure()
	round(1000)
	eventually(t, "every watcher to be released", func() bool { s, _ := st.WatchCacheStats(); return s.Watchers == 0 })
	var g1 int
	eventually(t, "goroutines to end", func() bool { g1 = measure(); return g1 <= g0+5 })
	t.Logf("goroutines %d → %d", g0, g1)
}

// The body of a watch is newline-delimited JSON, one event per line.
func TestWatchFraming(t *testing.T) {
	_, ts, _ := newWatchServer(t, watch.Settings{}, false)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+wdPath+"?watch=1&timeoutSeconds=1", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/json" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("headers %v, transfer encoding %v", resp.Header, resp.TransferEncoding)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `{"type":"ADDED","object":{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"resourceVersion":"`) {
		t.Fatalf("body %q", body)
	}
}

// Closing the server ends its open watches.
func TestWatchServerClose(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{}, false)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)
	w := startWatch(t, ts, wdPath+"?watch=1")
	w.expect(t, "ADDED a")
	if err := api.Close(); err != nil {
		t.Fatal(err)
	}
	w.ended(t, 10*time.Second)
}

// smallBufListener gives accepted connections a small send buffer.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// watchCtxStore records the context of each storage watch on a key ending
// in /w1.
type watchCtxStore struct {
	storage.Store
	mu   sync.Mutex
	ctxs []context.Context
}

func (s *watchCtxStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if bytes.HasSuffix(opts.Prefix, []byte("/w1")) {
		s.mu.Lock()
		s.ctxs = append(s.ctxs, ctx)
		s.mu.Unlock()
	}
	return s.Store.Watch(ctx, opts)
}

// WatchObject's storage watch ends when its channel closes (after DELETED),
// not only when the caller's context ends.
func TestWatchObjectReleasesStorageWatch(t *testing.T) {
	bs, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	store := &watchCtxStore{Store: bs}
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(widgetResource(t)); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	const path = "/apis/example.dev/v1/namespaces/default/widgets"
	r := do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"})
	ctx, cancel := context.WithCancel(context.Background()) // lives on
	defer cancel()
	events, err := st.WatchObject(ctx, "default", "w1", str(r.object(t), "metadata", "resourceVersion"))
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, ts, "DELETE", path+"/w1", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	var last registry.ObjectEvent
	for ev := range events {
		last = ev
	}
	if last.Type != "DELETED" {
		t.Fatalf("last event %q, want DELETED", last.Type)
	}
	store.mu.Lock()
	ctxs := append([]context.Context{}, store.ctxs...)
	store.mu.Unlock()
	if len(ctxs) != 1 {
		t.Fatalf("%d storage watches of w1, want 1", len(ctxs))
	}
	select {
	case <-ctxs[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the storage watch stays open after the object watch ended")
	}
}
