// Package storagetest is the conformance suite for storage.Store backends. A
// backend runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Store { return openEmpty(t) },
//			storagetest.WithReopen(reopen))
//	}
//
// Every subtest gets a new, empty store from newStore and closes it when it
// ends (Close must be idempotent). Options describe optional capabilities;
// a capability that is not declared is not tested (its subtests are not
// registered), nothing is skipped at run time.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// Option declares a backend capability or limit to the suite.
type Option func(*config)

type config struct {
	reopen        func(t *testing.T, s storage.Store) storage.Store
	maxValueSize  int
	approxRemains bool
	storedForm    bool
	timeout       time.Duration
}

// WithReopen enables the restart tests. reopen must close s (it may already
// be closed) and return a new store over the same data; it must arrange for
// the new store to be closed when the test ends (t.Cleanup).
func WithReopen(reopen func(t *testing.T, s storage.Store) storage.Store) Option {
	return func(c *config) { c.reopen = reopen }
}

// WithMaxValueSize tells the suite the backend's value size limit, so that it
// checks a value of exactly that size round-trips (at past revisions too) and
// one byte more fails with storage.ErrTooLarge. Without it, the suite only
// checks that a 64 MiB value is refused.
func WithMaxValueSize(n int) Option {
	return func(c *config) { c.maxValueSize = n }
}

// WithApproximateRemaining declares that ListResult.Remaining may be -1
// (unknown). By default the suite requires exact counts.
func WithApproximateRemaining() Option {
	return func(c *config) { c.approxRemains = true }
}

// WithStoredForm declares that the store keeps values in another form than
// it returns them (sealed, say), so that ListOptions.MaxBytes, which counts
// what the backend holds, may end a page before the values returned reach
// it. By default the suite requires a page to end only at Limit or at the
// item that reaches MaxBytes.
func WithStoredForm() Option {
	return func(c *config) { c.storedForm = true }
}

// WithTimeout sets how long the suite waits for an expected event or
// condition before failing. Default 20 seconds.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// suite is what every test function receives.
type suite struct {
	cfg      config
	newStore func(t *testing.T) storage.Store
}

type test struct {
	name string
	fn   func(t *testing.T, s *suite)
	// needs reports whether the backend declared what the test needs.
	needs func(c config) bool
}

// Run runs the conformance suite. newStore must return a new, empty store;
// the suite closes it at the end of each subtest.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store, opts ...Option) {
	cfg := config{timeout: 20 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	s := &suite{cfg: cfg, newStore: newStore}
	var tests []test
	tests = append(tests, kvTests...)
	tests = append(tests, listTests...)
	tests = append(tests, watchTests...)
	tests = append(tests, compactTests...)
	tests = append(tests, concurrencyTests...)
	tests = append(tests, lifecycleTests...)
	for _, tc := range tests {
		if tc.needs != nil && !tc.needs(cfg) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// open returns a fresh store that is closed when t ends.
func (s *suite) open(t *testing.T) storage.Store {
	t.Helper()
	st := s.newStore(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// --- helpers ---

func create(t *testing.T, st storage.Store, key, value string) int64 {
	t.Helper()
	rev, err := st.Create(t.Context(), []byte(key), []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	return rev
}

func update(t *testing.T, st storage.Store, key, value string, expected int64) int64 {
	t.Helper()
	rev, err := st.Update(t.Context(), []byte(key), []byte(value), expected)
	if err != nil {
		t.Fatalf("Update(%q, expected %d): %v", key, expected, err)
	}
	return rev
}

func del(t *testing.T, st storage.Store, key string, expected int64) (storage.KeyValue, int64) {
	t.Helper()
	kv, rev, err := st.Delete(t.Context(), []byte(key), expected)
	if err != nil {
		t.Fatalf("Delete(%q, expected %d): %v", key, expected, err)
	}
	return kv, rev
}

func current(t *testing.T, st storage.Store) int64 {
	t.Helper()
	rev, err := st.CurrentRevision(t.Context())
	if err != nil {
		t.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func get(t *testing.T, st storage.Store, key string, rev int64) storage.KeyValue {
	t.Helper()
	kv, err := st.Get(t.Context(), []byte(key), rev)
	if err != nil {
		t.Fatalf("Get(%q, %d): %v", key, rev, err)
	}
	return kv
}

func list(t *testing.T, st storage.Store, opts storage.ListOptions) storage.ListResult {
	t.Helper()
	res, err := st.List(t.Context(), opts)
	if err != nil {
		t.Fatalf("List(prefix %q, start %q, limit %d, rev %d): %v",
			opts.Prefix, opts.StartKey, opts.Limit, opts.Revision, err)
	}
	return res
}

// checkKV compares a key-value with the expected one.
func checkKV(t *testing.T, what string, got, want storage.KeyValue) {
	t.Helper()
	if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) ||
		got.Revision != want.Revision || got.CreateRevision != want.CreateRevision {
		t.Errorf("%s = %s, want %s", what, fmtKV(got), fmtKV(want))
	}
}

func fmtKV(kv storage.KeyValue) string {
	return fmt.Sprintf("{key %q value %q rev %d create %d}", kv.Key, short(kv.Value), kv.Revision, kv.CreateRevision)
}

func short(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", b[:40], len(b))
	}
	return string(b)
}

func fmtEvent(e storage.Event) string {
	return fmt.Sprintf("{%v key %q value %q prev %q rev %d prevRev %d create %d err %v}",
		e.Type, e.Key, short(e.Value), short(e.PrevValue), e.Revision, e.PrevRevision, e.CreateRevision, e.Err)
}

// checkEvent compares an event with the expected one, every field.
func checkEvent(t *testing.T, what string, got, want storage.Event) bool {
	t.Helper()
	if got.Type != want.Type || !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) ||
		!bytes.Equal(got.PrevValue, want.PrevValue) || got.Revision != want.Revision ||
		got.PrevRevision != want.PrevRevision || got.CreateRevision != want.CreateRevision {
		t.Errorf("%s = %s, want %s", what, fmtEvent(got), fmtEvent(want))
		return false
	}
	if want.Type == storage.EventDelete && got.Value != nil {
		t.Errorf("%s: delete event with non-nil Value %q", what, got.Value)
		return false
	}
	if want.PrevRevision == 0 && got.PrevValue != nil {
		t.Errorf("%s: create event with non-nil PrevValue %q", what, got.PrevValue)
		return false
	}
	return true
}

// watch starts a watch that is cancelled when t ends.
func watch(t *testing.T, st storage.Store, opts storage.WatchOptions) <-chan storage.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ch, err := st.Watch(ctx, opts)
	if err != nil {
		t.Fatalf("Watch(prefix %q, from %d): %v", opts.Prefix, opts.FromRevision, err)
	}
	return ch
}

// next returns the next event that is not a progress event.
func (s *suite) next(t *testing.T, ch <-chan storage.Event) storage.Event {
	t.Helper()
	deadline := time.NewTimer(s.cfg.timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch channel closed, expected an event")
			}
			if ev.Type == storage.EventProgress {
				continue
			}
			return ev
		case <-deadline.C:
			t.Fatalf("no watch event within %v", s.cfg.timeout)
		}
	}
}

// expectEvents reads len(want) change events and compares them in order.
func (s *suite) expectEvents(t *testing.T, what string, ch <-chan storage.Event, want []storage.Event) {
	t.Helper()
	for i, w := range want {
		got := s.next(t, ch)
		if !checkEvent(t, fmt.Sprintf("%s: event %d of %d", what, i+1, len(want)), got, w) {
			t.FailNow()
		}
	}
}

func isCompacted(err error, requested, oldest int64) bool {
	var ce *storage.CompactedError
	return errors.As(err, &ce) && errors.Is(err, storage.ErrCompacted) &&
		ce.Requested == requested && ce.Oldest == oldest
}

func isFuture(err error, requested, cur int64) bool {
	var fe *storage.FutureRevisionError
	return errors.As(err, &fe) && errors.Is(err, storage.ErrFutureRev) &&
		fe.Requested == requested && fe.Current == cur
}

// putEvent and deleteEvent build expected events.
func putEvent(key, value string, rev int64, prev string, prevRev, createRev int64) storage.Event {
	e := storage.Event{Type: storage.EventPut, Key: []byte(key), Value: []byte(value), Revision: rev,
		PrevRevision: prevRev, CreateRevision: createRev}
	if prevRev != 0 {
		e.PrevValue = []byte(prev)
	}
	return e
}

func deleteEvent(key string, rev int64, prev string, prevRev, createRev int64) storage.Event {
	return storage.Event{Type: storage.EventDelete, Key: []byte(key), PrevValue: []byte(prev), Revision: rev,
		PrevRevision: prevRev, CreateRevision: createRev}
}
