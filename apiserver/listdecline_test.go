package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/watch"
)

// laggingStore delays the change events of watches whose prefix contains
// match by lag, and counts storage reads: Gets of keys that contain match,
// and CurrentRevision calls (one per consistent read the watch cache is
// asked to serve).
type laggingStore struct {
	storage.Store
	match   []byte
	lag     atomic.Int64 // nanoseconds
	gets    atomic.Int64
	current atomic.Int64
}

func (s *laggingStore) Get(ctx context.Context, key []byte, rev int64) (storage.KeyValue, error) {
	if bytes.Contains(key, s.match) {
		s.gets.Add(1)
	}
	return s.Store.Get(ctx, key, rev)
}

func (s *laggingStore) CurrentRevision(ctx context.Context) (int64, error) {
	s.current.Add(1)
	return s.Store.CurrentRevision(ctx)
}

func (s *laggingStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	in, err := s.Store.Watch(ctx, opts)
	if err != nil || !bytes.Contains(opts.Prefix, s.match) {
		return in, err
	}
	out := make(chan storage.Event)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Type == storage.EventPut {
				time.Sleep(time.Duration(s.lag.Load()))
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestDeclinedListAsksTheCacheOnce: a consistent list that the watch cache
// cannot serve in time (it lags behind storage) reads storage after one
// wait, not two (the streaming path asks the cache first, the buffered path
// it falls back to must not ask again), and sees the latest write.
func TestDeclinedListAsksTheCacheOnce(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ls := &laggingStore{Store: store, match: []byte("/configmaps/")}
	api := newConfigMapServer(t, Config{Storage: ls, Watch: watch.Settings{ConsistentReadWait: 50 * time.Millisecond}})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	for i := range 3 {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	if r := do(t, ts, "GET", cmPath+"?limit=2", ""); r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	ls.lag.Store(int64(time.Hour))
	t.Cleanup(func() { ls.lag.Store(0) })
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"late"}}`)
	for _, c := range []struct{ path, accept string }{
		{cmPath + "?limit=10", "application/json"},
		{cmPath + "?limit=10", "application/vnd.kubernetes.protobuf"},
		{cmPath, "application/vnd.kubernetes.protobuf"},
		{cmPath, "application/json"},
	} {
		before := ls.current.Load()
		resp, body, err := get(t, ts, c.path, c.accept, "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %v %d", c.path, c.accept, err, resp.StatusCode)
		}
		if !bytes.Contains(body, []byte("late")) {
			t.Fatalf("%s %s: the latest write is missing", c.path, c.accept)
		}
		if n := ls.current.Load() - before; n != 1 {
			t.Fatalf("%s %s: the watch cache was asked %d times", c.path, c.accept, n)
		}
	}
}
