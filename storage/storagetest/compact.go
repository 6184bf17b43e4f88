package storagetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

var compactTests = []test{
	{name: "Compaction", fn: testCompaction},
	{name: "CompactionBreaksContinuation", fn: testCompactionContinuation},
	{name: "CompactionDuringWatchReplay", fn: testCompactionWatchReplay},
}

func testCompaction(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	a := []byte("cmp/a")
	var ra []int64 // revisions of a's writes
	ra = append(ra, create(t, st, "cmp/a", "a0"))
	ra = append(ra, update(t, st, "cmp/a", "a1", 0))
	rb := create(t, st, "cmp/b", "b0")
	ra = append(ra, update(t, st, "cmp/a", "a2", 0))
	ra = append(ra, update(t, st, "cmp/a", "a3", 0))
	target := ra[3]
	_, rbDel := del(t, st, "cmp/b", rb) // b's delete is after the target; its previous value before
	ra = append(ra, update(t, st, "cmp/a", "a4", 0))
	last := current(t, st)

	if err := st.Compact(ctx, target); err != nil {
		t.Fatalf("Compact(%d): %v", target, err)
	}
	if c, err := st.CompactedRevision(ctx); err != nil || c != target {
		t.Fatalf("CompactedRevision = %d, %v; want %d", c, err, target)
	}
	// Below the compacted revision: errors. At and above: history.
	if _, err := st.Get(ctx, a, target-1); !isCompacted(err, target-1, target) {
		t.Errorf("Get at %d: %v, want CompactedError{%d, %d}", target-1, err, target-1, target)
	}
	if _, err := st.List(ctx, storage.ListOptions{Prefix: []byte("cmp/"), Revision: ra[0]}); !isCompacted(err, ra[0], target) {
		t.Errorf("List at %d: %v, want CompactedError{%d, %d}", ra[0], err, ra[0], target)
	}
	if _, err := st.Watch(ctx, storage.WatchOptions{Prefix: []byte("cmp/"), FromRevision: target - 1}); !isCompacted(err, target-1, target) {
		t.Errorf("Watch from %d: %v, want CompactedError{%d, %d}", target-1, err, target-1, target)
	}
	checkKV(t, "Get at the compacted revision", get(t, st, "cmp/a", target),
		storage.KeyValue{Key: a, Value: []byte("a3"), Revision: ra[3], CreateRevision: ra[0]})
	checkKV(t, "Get b at the compacted revision", get(t, st, "cmp/b", target),
		storage.KeyValue{Key: []byte("cmp/b"), Value: []byte("b0"), Revision: rb, CreateRevision: rb})
	res := list(t, st, storage.ListOptions{Prefix: []byte("cmp/"), Revision: target})
	if got := keys(res.Items); !equalStrings(got, []string{"cmp/a", "cmp/b"}) {
		t.Errorf("List at the compacted revision = %q", got)
	}
	checkKV(t, "Get latest", get(t, st, "cmp/a", 0),
		storage.KeyValue{Key: a, Value: []byte("a4"), Revision: ra[4], CreateRevision: ra[0]})

	// A watch from the compacted revision replays what follows, with the
	// previous values that were written before it.
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("cmp/"), FromRevision: target})
	s.expectEvents(t, "watch from the compacted revision", ch, []storage.Event{
		deleteEvent("cmp/b", rbDel, "b0", rb, rb),
		putEvent("cmp/a", "a4", ra[4], "a3", ra[3], ra[0]),
	})

	// Compacting an older revision does nothing.
	if err := st.Compact(ctx, ra[1]); err != nil {
		t.Errorf("Compact(older %d): %v", ra[1], err)
	}
	if c, _ := st.CompactedRevision(ctx); c != target {
		t.Errorf("CompactedRevision after compacting an older revision = %d, want %d", c, target)
	}

	// Compact everything.
	if err := st.Compact(ctx, last); err != nil {
		t.Fatalf("Compact(current %d): %v", last, err)
	}
	if _, err := st.Get(ctx, a, last-1); !isCompacted(err, last-1, last) {
		t.Errorf("Get at %d after compacting to current: %v", last-1, err)
	}
	checkKV(t, "Get at the current revision", get(t, st, "cmp/a", last),
		storage.KeyValue{Key: a, Value: []byte("a4"), Revision: ra[4], CreateRevision: ra[0]})
	if _, err := st.Get(ctx, []byte("cmp/b"), last); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("deleted key at the current revision: %v, want ErrNotFound", err)
	}
	r := update(t, st, "cmp/a", "a5", ra[4])
	ch = watch(t, st, storage.WatchOptions{Prefix: []byte("cmp/"), FromRevision: last})
	s.expectEvents(t, "watch after compacting everything", ch, []storage.Event{
		putEvent("cmp/a", "a5", r, "a4", ra[4], ra[0]),
	})
}

func testCompactionContinuation(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	for i := range 10 {
		create(t, st, listKey(i), "v")
	}
	page := list(t, st, storage.ListOptions{Prefix: []byte("list/"), Limit: 4})
	update(t, st, listKey(0), "changed", 0)
	after := current(t, st)
	if err := st.Compact(ctx, after); err != nil {
		t.Fatal(err)
	}
	_, err := st.List(ctx, storage.ListOptions{Prefix: []byte("list/"), Limit: 4, StartKey: page.NextKey, Revision: page.Revision})
	if !isCompacted(err, page.Revision, after) {
		t.Fatalf("continuation after compaction: %v, want CompactedError{%d, %d}", err, page.Revision, after)
	}
}

// testCompactionDuringWatchReplay compacts while a watch that nobody reads
// yet is far behind: the watch either delivers every event or ends with a
// CompactedError, never a gap.
func testCompactionWatchReplay(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	start := current(t, st)
	var revs []int64
	for i := range 300 {
		revs = append(revs, create(t, st, fmt.Sprintf("cwr/%04d", i), "v"))
	}
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("cwr/"), FromRevision: start})
	// Read a few, then compact past what was delivered.
	for i := range 5 {
		if ev := s.next(t, ch); ev.Revision != revs[i] {
			t.Fatalf("event %d at revision %d, want %d", i, ev.Revision, revs[i])
		}
	}
	if err := st.Compact(ctx, revs[len(revs)-1]); err != nil {
		t.Fatal(err)
	}
	i := 5
	for {
		ev := s.next(t, ch)
		if ev.Type == storage.EventError {
			if !errors.Is(ev.Err, storage.ErrCompacted) {
				t.Fatalf("error event %v, want a compaction error", ev.Err)
			}
			return // ended cleanly
		}
		if i >= len(revs) || ev.Revision != revs[i] {
			t.Fatalf("event %s, want revision %d (index %d)", fmtEvent(ev), revs[min(i, len(revs)-1)], i)
		}
		if i++; i == len(revs) {
			return // delivered everything
		}
	}
}
