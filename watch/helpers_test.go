package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

const testPrefix = "/t/"

// testEncoder writes one line per event: "TYPE KEY REV VALUE" (bookmarks:
// "BOOKMARK - REV END", errors: "ERROR - 0 MESSAGE") and counts its encodes.
type testEncoder struct {
	events atomic.Int64
}

func (e *testEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	e.events.Add(1)
	if bytes.Equal(obj.Value, []byte("corrupt")) {
		return dst, errors.New("cannot encode a corrupt value")
	}
	return fmt.Appendf(dst, "%s %s %d %s\n", typ, obj.Key, rev, obj.Value), nil
}

func (e *testEncoder) AppendBookmark(dst []byte, rev int64, end bool) ([]byte, error) {
	return fmt.Appendf(dst, "BOOKMARK - %d %v\n", rev, end), nil
}

func (e *testEncoder) AppendError(dst []byte, err error) []byte {
	return fmt.Appendf(dst, "ERROR - 0 %s\n", err)
}

// tev is a parsed test event.
type tev struct {
	typ, key string
	rev      int64
	value    string
}

func (e tev) String() string { return fmt.Sprintf("%s %s %d %s", e.typ, e.key, e.rev, e.value) }

func parseLines(b []byte) []tev {
	var out []tev
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.SplitN(l, " ", 4)
		rev, _ := strconv.ParseInt(f[2], 10, 64)
		out = append(out, tev{typ: f[0], key: f[1], rev: rev, value: f[3]})
	}
	return out
}

// reader consumes a watcher in its own goroutine, like an HTTP handler.
type reader struct {
	w    *Watcher
	ch   chan tev
	done chan struct{}
	err  error
}

func read(w *Watcher) *reader {
	r := &reader{w: w, ch: make(chan tev, 100_000), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		var buf []byte
		for {
			var err error
			buf, err = w.Next(buf[:0])
			for _, e := range parseLines(buf) {
				r.ch <- e
			}
			if err != nil {
				r.err = err
				return
			}
		}
	}()
	return r
}

func (r *reader) next(t *testing.T) tev {
	t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-r.done:
		select {
		case e := <-r.ch:
			return e
		default:
		}
		t.Fatalf("watch ended (%v) while an event was expected", r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return tev{}
}

// nextNonBookmark skips periodic bookmarks.
func (r *reader) nextNonBookmark(t *testing.T) tev {
	t.Helper()
	for {
		if e := r.next(t); e.typ != "BOOKMARK" || e.value == "true" {
			return e
		}
	}
}

// expect checks the next events, given as "TYPE KEY VALUE" (revisions are
// checked by the callers that care).
func (r *reader) expect(t *testing.T, want ...string) []tev {
	t.Helper()
	var got []tev
	for _, w := range want {
		e := r.nextNonBookmark(t)
		got = append(got, e)
		if s := e.typ + " " + e.key + " " + e.value; s != w {
			t.Fatalf("event %d: got %q (rev %d), want %q", len(got)-1, s, e.rev, w)
		}
	}
	return got
}

// ended waits for the watch to end and returns its error.
func (r *reader) ended(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end within 10s")
	}
	return nil
}

type env struct {
	t     *testing.T
	st    storage.Store
	cache *Cache
	enc   *testEncoder
}

func newEnv(t *testing.T, s Settings) *env {
	t.Helper()
	st, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, st, s)
}

func newEnvOn(t *testing.T, st storage.Store, s Settings) *env {
	t.Helper()
	e := &env{t: t, st: st, enc: &testEncoder{}}
	// A first write so that the store has a revision.
	e.put("/other/seed", "x")
	c, err := New(Config{Settings: s, Storage: st, Prefix: []byte(testPrefix), Attrs: func(_, v []byte) (any, error) {
		if bytes.Equal(v, []byte("noattrs")) {
			return nil, errors.New("no attributes")
		}
		return string(v), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	e.cache = c
	return e
}

func (e *env) put(key, value string) int64 {
	e.t.Helper()
	ctx := context.Background()
	kv, err := e.st.Get(ctx, []byte(key), 0)
	var rev int64
	switch {
	case errors.Is(err, storage.ErrNotFound):
		rev, err = e.st.Create(ctx, []byte(key), []byte(value))
	case err == nil:
		rev, err = e.st.Update(ctx, []byte(key), []byte(value), kv.Revision)
	}
	if err != nil {
		e.t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func (e *env) del(key string) int64 {
	e.t.Helper()
	_, rev, err := e.st.Delete(context.Background(), []byte(key), 0)
	if err != nil {
		e.t.Fatalf("delete %s: %v", key, err)
	}
	return rev
}

func (e *env) current() int64 {
	e.t.Helper()
	rev, err := e.st.CurrentRevision(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

func (e *env) watch(opts Options) *reader {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	return e.watchCtx(ctx, opts)
}

func (e *env) watchCtx(ctx context.Context, opts Options) *reader {
	e.t.Helper()
	if opts.Encoder == nil {
		opts.Encoder = e.enc
	}
	w, err := e.cache.Watch(ctx, opts)
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	e.t.Cleanup(w.Stop)
	return read(w)
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCaughtUp waits until the cache has applied every write so far.
func (e *env) waitCaughtUp() {
	e.t.Helper()
	ok, err := e.cache.WaitForRevision(context.Background(), e.current(), 10*time.Second)
	if err != nil || !ok {
		e.t.Fatalf("cache did not catch up: %v", err)
	}
}
