package apiserver

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// TestNamespaceCheckFromWatchCache: a create's namespace check is answered by
// the namespaces' watch cache once it has caught up (no storage read), sees
// this server's own namespace writes at once (a namespace deleted here
// refuses creates in the very next request), reads storage for a namespace
// the cache does not have, and sees another server's changes to a namespace
// once its cache receives them.
func TestNamespaceCheckFromWatchCache(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	serve := func(st storage.Store) *httptest.Server {
		ts := httptest.NewServer(newConfigMapServer(t, Config{Storage: st}))
		t.Cleanup(ts.Close)
		return ts
	}
	counter := &laggingStore{Store: store, match: []byte("/namespaces/")}
	ts := serve(counter)
	other := serve(store) // a second server on the same storage
	n := 0
	want := func(r response, code int) {
		t.Helper()
		if r.code != code {
			t.Fatalf("code = %d, want %d; body %s", r.code, code, r.body)
		}
	}
	create := func(ns string) response {
		n++
		return do(t, ts, "POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, n))
	}

	want(do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"a"}}`), 201)
	want(create("a"), 201) // the cache may not have "a" yet: storage answers
	eventually(t, "the namespace check to stop reading storage", func() bool {
		before := counter.gets.Load()
		want(create("a"), 201)
		return counter.gets.Load() == before
	})
	before := counter.gets.Load()
	for range 20 {
		want(create("a"), 201)
	}
	if got := counter.gets.Load() - before; got != 0 {
		t.Fatalf("20 creates in a cached namespace read it from storage %d times", got)
	}

	// Deleted here while the cache lags: the very next create is refused.
	counter.lag.Store(int64(300 * time.Millisecond))
	want(do(t, ts, "DELETE", "/api/v1/namespaces/a", ""), 200)
	create("a").status(t, 403, meta.StatusReasonForbidden)
	counter.lag.Store(0)

	// Not in the cache: storage says whether it exists.
	create("nope").status(t, 404, meta.StatusReasonNotFound)
	want(do(t, other, "POST", "/api/v1/namespaces", `{"metadata":{"name":"b"}}`), 201)
	want(create("b"), 201)

	// Deleted through the other server: refused once this server's cache
	// has the change.
	want(do(t, other, "DELETE", "/api/v1/namespaces/b", ""), 200)
	eventually(t, "a namespace deleted elsewhere to refuse creates", func() bool {
		return create("b").code == 403
	})
}
