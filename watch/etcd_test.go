package watch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage/etcd"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// The cache over the etcd backend: initial state, changes, resumption from
// the window and from etcd's history, consistent starts, progress-driven
// bookmarks and 410 after compaction.
func TestCacheOnEtcd(t *testing.T) {
	// Start builds etcd when it is not cached yet (once, under a file lock
	// shared with storage/etcd's tests).
	srv := etcdtest.Start(t, etcdtest.Options{})
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/watchtest/", CompactionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvOn(t, st, Settings{WindowEvents: 3, BookmarkInterval: 50 * time.Millisecond})
	first := e.put(testPrefix+"a", "1")
	e.put(testPrefix+"b", "1")
	e.waitCaughtUp()

	r := e.watch(Options{Initial: true, InitialEventsEnd: true})
	r.expect(t, "ADDED /t/a 1", "ADDED /t/b 1")
	if end := r.next(t); end.typ != "BOOKMARK" || end.value != "true" {
		t.Fatalf("got %v, want the initial-events-end bookmark", end)
	}
	for i := 2; i < 8; i++ {
		e.put(testPrefix+"a", fmt.Sprint(i))
	}
	e.del(testPrefix + "b")
	for i := 2; i < 8; i++ {
		r.expect(t, fmt.Sprintf("MODIFIED /t/a %d", i))
	}
	r.expect(t, "DELETED /t/b 1")

	// Older than the window of 3: from etcd's history, then the cache.
	old := e.watch(Options{Revision: first})
	old.expect(t, "ADDED /t/b 1")
	for i := 2; i < 8; i++ {
		old.expect(t, fmt.Sprintf("MODIFIED /t/a %d", i))
	}
	old.expect(t, "DELETED /t/b 1")
	waitFor(t, "the history watcher to be synced", func() bool { s := e.cache.Stats(); return s.SyncedWatchers == s.Watchers })

	// A consistent start after a write elsewhere, and bookmarks following it.
	other := e.put("/elsewhere/x", "1")
	c := e.watch(Options{Initial: true, Consistent: true, InitialEventsEnd: true, Bookmarks: true})
	c.expect(t, "ADDED /t/a 7")
	if end := c.next(t); end.typ != "BOOKMARK" || end.value != "true" || end.rev < other {
		t.Fatalf("got %v, want the initial-events-end bookmark at %d or later", end, other)
	}
	if b := c.next(t); b.typ != "BOOKMARK" || b.rev < other {
		t.Fatalf("got %v, want a bookmark at %d or later", b, other)
	}

	// Compacted: one Error event.
	if err := st.Compact(context.Background(), e.current()); err != nil {
		t.Fatal(err)
	}
	gone := e.watch(Options{Revision: first})
	if ev := gone.next(t); ev.typ != "ERROR" || !strings.Contains(ev.value, "compacted") {
		t.Fatalf("got %v, want an ERROR event", ev)
	}
}
