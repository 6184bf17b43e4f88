package storagetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

var kvTests = []test{
	{name: "Revisions", fn: testRevisions},
	{name: "CreateGet", fn: testCreateGet},
	{name: "UpdateCAS", fn: testUpdateCAS},
	{name: "DeleteCAS", fn: testDeleteCAS},
	{name: "InvalidArguments", fn: testInvalidArguments},
	{name: "ValueLimit", fn: testValueLimit, needs: func(c config) bool { return c.maxValueSize > 0 }},
	{name: "TooLarge", fn: testTooLarge, needs: func(c config) bool { return c.maxValueSize == 0 }},
	{name: "GetAtRevision", fn: testGetAtRevision},
	{name: "FutureRevision", fn: testFutureRevision},
}

func testRevisions(t *testing.T, s *suite) {
	st := s.open(t)
	r0 := current(t, st)
	if r0 < 0 {
		t.Fatalf("CurrentRevision of an empty store = %d", r0)
	}
	if c, err := st.CompactedRevision(t.Context()); err != nil || c > r0 {
		t.Fatalf("CompactedRevision = %d, %v; want <= current %d", c, err, r0)
	}
	last := r0
	step := func(what string, rev int64) {
		t.Helper()
		if rev <= last {
			t.Fatalf("%s: revision %d not above the previous %d", what, rev, last)
		}
		if cur := current(t, st); cur != rev {
			t.Fatalf("%s: CurrentRevision = %d, want the write's revision %d", what, cur, rev)
		}
		last = rev
	}
	step("create a", create(t, st, "rev/a", "1"))
	step("create b", create(t, st, "rev/b", "1"))
	step("update a", update(t, st, "rev/a", "2", 0))
	_, r := del(t, st, "rev/b", 0)
	step("delete b", r)

	// Failed writes do not consume revisions.
	if _, err := st.Create(t.Context(), []byte("rev/a"), []byte("x")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("Create existing: %v, want ErrAlreadyExists", err)
	}
	if _, err := st.Update(t.Context(), []byte("rev/a"), []byte("x"), 1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Update with a stale revision: %v, want ErrConflict", err)
	}
	if cur := current(t, st); cur != last {
		t.Fatalf("CurrentRevision after failed writes = %d, want %d", cur, last)
	}
	step("recreate b", create(t, st, "rev/b", "2"))
}

func testCreateGet(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	value := []byte("v1")
	rev := create(t, st, "cg/k", string(value))
	checkKV(t, "Get", get(t, st, "cg/k", 0), storage.KeyValue{Key: []byte("cg/k"), Value: value, Revision: rev, CreateRevision: rev})
	checkKV(t, "Get at its revision", get(t, st, "cg/k", rev), storage.KeyValue{Key: []byte("cg/k"), Value: value, Revision: rev, CreateRevision: rev})

	if _, err := st.Create(ctx, []byte("cg/k"), []byte("v2")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
	checkKV(t, "Get after a failed Create", get(t, st, "cg/k", 0), storage.KeyValue{Key: []byte("cg/k"), Value: value, Revision: rev, CreateRevision: rev})

	if _, err := st.Get(ctx, []byte("cg/missing"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}

	// Empty values, binary keys and values.
	r2 := create(t, st, "cg/empty", "")
	if kv := get(t, st, "cg/empty", 0); len(kv.Value) != 0 || kv.Revision != r2 {
		t.Fatalf("Get empty value = %s", fmtKV(kv))
	}
	bkey := []byte("cg/\x00\xff\x01")
	bval := []byte{0, 0xff, 0, 1, 2}
	r3, err := st.Create(ctx, bkey, bval)
	if err != nil {
		t.Fatalf("Create binary: %v", err)
	}
	if kv, err := st.Get(ctx, bkey, 0); err != nil || !bytes.Equal(kv.Value, bval) || kv.Revision != r3 {
		t.Fatalf("Get binary = %s, %v", fmtKV(kv), err)
	}

	// The store keeps its own copy of the caller's buffers.
	buf := []byte("original")
	r4, err := st.Create(ctx, []byte("cg/copy"), buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "CHANGED!")
	checkKV(t, "Get after the caller reused its buffer", get(t, st, "cg/copy", 0),
		storage.KeyValue{Key: []byte("cg/copy"), Value: []byte("original"), Revision: r4, CreateRevision: r4})
	kv := get(t, st, "cg/copy", 0)
	copy(kv.Value, "MUTATED!")
	if kv2 := get(t, st, "cg/copy", 0); string(kv2.Value) != "original" {
		t.Fatalf("mutating a returned value changed the store: %q", kv2.Value)
	}
}

func testUpdateCAS(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	key := []byte("up/k")
	r1 := create(t, st, "up/k", "v1")
	r2 := update(t, st, "up/k", "v2", r1)
	if r2 <= r1 {
		t.Fatalf("update revision %d not above %d", r2, r1)
	}
	checkKV(t, "Get after update", get(t, st, "up/k", 0), storage.KeyValue{Key: key, Value: []byte("v2"), Revision: r2, CreateRevision: r1})

	_, err := st.Update(ctx, key, []byte("v3"), r1)
	var ce *storage.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("Update with a stale revision: %v, want a *ConflictError", err)
	}
	if !bytes.Equal(ce.Key, key) || ce.Expected != r1 || ce.Actual != r2 {
		t.Fatalf("ConflictError = %+v, want key %q expected %d actual %d", ce, key, r1, r2)
	}
	checkKV(t, "Get after a conflict", get(t, st, "up/k", 0), storage.KeyValue{Key: key, Value: []byte("v2"), Revision: r2, CreateRevision: r1})

	r3 := update(t, st, "up/k", "v3", 0) // unconditional
	checkKV(t, "Get after an unconditional update", get(t, st, "up/k", 0), storage.KeyValue{Key: key, Value: []byte("v3"), Revision: r3, CreateRevision: r1})

	for _, exp := range []int64{0, r3} {
		if _, err := st.Update(ctx, []byte("up/missing"), []byte("x"), exp); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Update missing (expected %d): %v, want ErrNotFound", exp, err)
		}
	}
	if _, err := st.Get(ctx, []byte("up/missing"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Update of a missing key created it: %v", err)
	}

	// The store keeps its own copy of an update's buffers too, and so do
	// the events of a watch: the caller reuses its buffer as soon as the
	// call returns (the registry encodes writes into pooled buffers).
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("up/"), FromRevision: r3})
	kbuf, vbuf := []byte("up/k"), []byte("reused-1")
	r4, err := st.Update(ctx, kbuf, vbuf, r3)
	if err != nil {
		t.Fatal(err)
	}
	copy(kbuf, "up/X")
	copy(vbuf, "SCRIBBLE")
	checkKV(t, "Get after the caller reused its update buffers", get(t, st, "up/k", 0),
		storage.KeyValue{Key: key, Value: []byte("reused-1"), Revision: r4, CreateRevision: r1})
	s.expectEvents(t, "watch after the caller reused its update buffers", ch, []storage.Event{
		{Type: storage.EventPut, Key: key, Value: []byte("reused-1"), PrevValue: []byte("v3"), Revision: r4, PrevRevision: r3, CreateRevision: r1},
	})
}

func testDeleteCAS(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	key := []byte("del/k")
	r1 := create(t, st, "del/k", "v1")
	r2 := update(t, st, "del/k", "v2", 0)

	_, _, err := st.Delete(ctx, key, r1)
	var ce *storage.ConflictError
	if !errors.As(err, &ce) || ce.Expected != r1 || ce.Actual != r2 {
		t.Fatalf("Delete with a stale revision: %v, want ConflictError expected %d actual %d", err, r1, r2)
	}
	prev, r3 := del(t, st, "del/k", r2)
	checkKV(t, "deleted key-value", prev, storage.KeyValue{Key: key, Value: []byte("v2"), Revision: r2, CreateRevision: r1})
	if r3 <= r2 {
		t.Fatalf("delete revision %d not above %d", r3, r2)
	}
	if cur := current(t, st); cur != r3 {
		t.Fatalf("CurrentRevision = %d, want %d", cur, r3)
	}
	if _, err := st.Get(ctx, key, 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, _, err := st.Delete(ctx, key, 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Delete again: %v, want ErrNotFound", err)
	}
	if _, err := st.Update(ctx, key, []byte("x"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Update after Delete: %v, want ErrNotFound", err)
	}
	r4 := create(t, st, "del/k", "v3")
	checkKV(t, "Get after re-create", get(t, st, "del/k", 0), storage.KeyValue{Key: key, Value: []byte("v3"), Revision: r4, CreateRevision: r4})
	prev, _ = del(t, st, "del/k", 0) // unconditional
	checkKV(t, "deleted re-created key-value", prev, storage.KeyValue{Key: key, Value: []byte("v3"), Revision: r4, CreateRevision: r4})
}

func testInvalidArguments(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	create(t, st, "inv/a", "x")
	cur := current(t, st)
	isInvalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	_, err := st.Create(ctx, nil, []byte("x"))
	isInvalid("Create empty key", err)
	_, err = st.Update(ctx, []byte{}, []byte("x"), 0)
	isInvalid("Update empty key", err)
	_, _, err = st.Delete(ctx, nil, 0)
	isInvalid("Delete empty key", err)
	_, err = st.Get(ctx, nil, 0)
	isInvalid("Get empty key", err)
	_, err = st.Get(ctx, []byte("inv/a"), -1)
	isInvalid("Get negative revision", err)
	long := bytes.Repeat([]byte("k"), 1<<20)
	isTooLong := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrKeyTooLong) || !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("%s: %v, want ErrKeyTooLong", what, err)
		}
	}
	_, err = st.Create(ctx, long, []byte("x"))
	isTooLong("Create 1 MiB key", err)
	_, err = st.Get(ctx, long, 0)
	isTooLong("Get 1 MiB key", err)
	_, err = st.Update(ctx, long, []byte("x"), 0)
	isTooLong("Update 1 MiB key", err)
	_, _, err = st.Delete(ctx, long, 0)
	isTooLong("Delete 1 MiB key", err)
	_, err = st.Update(ctx, []byte("inv/a"), []byte("y"), -1)
	isInvalid("Update negative expected revision", err)
	_, err = st.List(ctx, storage.ListOptions{})
	isInvalid("List empty prefix", err)
	_, err = st.List(ctx, storage.ListOptions{Prefix: []byte("inv/"), StartKey: []byte("other/")})
	isInvalid("List start key outside prefix", err)
	_, err = st.List(ctx, storage.ListOptions{Prefix: []byte("inv/"), Limit: -1})
	isInvalid("List negative limit", err)
	_, err = st.List(ctx, storage.ListOptions{Prefix: []byte("inv/"), MaxBytes: -1})
	isInvalid("List negative byte bound", err)
	_, err = st.List(ctx, storage.ListOptions{Prefix: []byte("inv/"), Revision: -1})
	isInvalid("List negative revision", err)
	_, err = st.Watch(ctx, storage.WatchOptions{})
	isInvalid("Watch empty prefix", err)
	_, err = st.Watch(ctx, storage.WatchOptions{Prefix: []byte("inv/"), FromRevision: -1})
	isInvalid("Watch negative revision", err)
	_, err = st.Watch(ctx, storage.WatchOptions{Prefix: []byte("inv/"), BufferBytes: -1})
	isInvalid("Watch negative buffer bound", err)
	if c := current(t, st); c != cur {
		t.Errorf("invalid calls changed the revision from %d to %d", cur, c)
	}
	if kv := get(t, st, "inv/a", 0); string(kv.Value) != "x" {
		t.Errorf("invalid update changed the value to %q", kv.Value)
	}
}

func bigValue(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/251)
	}
	return b
}

func testValueLimit(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	n := s.cfg.maxValueSize
	key := []byte("big/k")
	big := bigValue(n, 1)
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("big/")})
	r1, err := st.Create(ctx, key, big)
	if err != nil {
		t.Fatalf("Create with a value of the limit (%d bytes): %v", n, err)
	}
	if _, err := st.Create(ctx, []byte("big/over"), bigValue(n+1, 2)); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("Create with a value one byte over the limit: %v, want ErrTooLarge", err)
	}
	if _, err := st.Update(ctx, key, bigValue(n+1, 2), 0); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("Update with a value one byte over the limit: %v, want ErrTooLarge", err)
	}
	half := bigValue(n/2, 3)
	r2 := update(t, st, "big/k", string(half), r1)
	r3 := update(t, st, "big/k", "small", r2)
	prev, r4 := del(t, st, "big/k", r3)
	checkKV(t, "Get big at its revision", get(t, st, "big/k", r1), storage.KeyValue{Key: key, Value: big, Revision: r1, CreateRevision: r1})
	checkKV(t, "Get half at its revision", get(t, st, "big/k", r2), storage.KeyValue{Key: key, Value: half, Revision: r2, CreateRevision: r1})
	checkKV(t, "Get small at its revision", get(t, st, "big/k", r3), storage.KeyValue{Key: key, Value: []byte("small"), Revision: r3, CreateRevision: r1})
	checkKV(t, "deleted", prev, storage.KeyValue{Key: key, Value: []byte("small"), Revision: r3, CreateRevision: r1})
	res := list(t, st, storage.ListOptions{Prefix: []byte("big/"), Revision: r1})
	if len(res.Items) != 1 || !bytes.Equal(res.Items[0].Value, big) {
		t.Fatalf("List at %d did not return the big value", r1)
	}
	s.expectEvents(t, "watch of big values", ch, []storage.Event{
		putEvent("big/k", string(big), r1, "", 0, r1),
		putEvent("big/k", string(half), r2, string(big), r1, r1),
		putEvent("big/k", "small", r3, string(half), r2, r1),
		deleteEvent("big/k", r4, "small", r3, r1),
	})
	// A big value again after a delete, read back whole.
	r5, err := st.Create(ctx, key, big)
	if err != nil {
		t.Fatal(err)
	}
	checkKV(t, "Get re-created big", get(t, st, "big/k", 0), storage.KeyValue{Key: key, Value: big, Revision: r5, CreateRevision: r5})
}

func testTooLarge(t *testing.T, s *suite) {
	st := s.open(t)
	if _, err := st.Create(t.Context(), []byte("big/k"), make([]byte, 64<<20)); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("Create with a 64 MiB value: %v, want ErrTooLarge", err)
	}
}

func testGetAtRevision(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	a, b := []byte("hist/a"), []byte("hist/b")
	r1 := create(t, st, "hist/a", "a1")
	r2 := update(t, st, "hist/a", "a2", r1)
	r3 := create(t, st, "hist/b", "b1")
	_, r4 := del(t, st, "hist/a", r2)
	r5 := create(t, st, "hist/a", "a3")
	_, r6 := del(t, st, "hist/b", 0)

	type want struct {
		rev    int64
		a, b   *storage.KeyValue
		listed []string
	}
	kv := func(k []byte, v string, rev, create int64) *storage.KeyValue {
		return &storage.KeyValue{Key: k, Value: []byte(v), Revision: rev, CreateRevision: create}
	}
	cases := []want{
		{rev: r1, a: kv(a, "a1", r1, r1), listed: []string{"a1"}},
		{rev: r2, a: kv(a, "a2", r2, r1), listed: []string{"a2"}},
		{rev: r3, a: kv(a, "a2", r2, r1), b: kv(b, "b1", r3, r3), listed: []string{"a2", "b1"}},
		{rev: r4, b: kv(b, "b1", r3, r3), listed: []string{"b1"}},
		{rev: r5, a: kv(a, "a3", r5, r5), b: kv(b, "b1", r3, r3), listed: []string{"a3", "b1"}},
		{rev: r6, a: kv(a, "a3", r5, r5), listed: []string{"a3"}},
		{rev: 0, a: kv(a, "a3", r5, r5), listed: []string{"a3"}},
	}
	for _, c := range cases {
		for _, k := range []struct {
			key  []byte
			want *storage.KeyValue
		}{{a, c.a}, {b, c.b}} {
			got, err := st.Get(ctx, k.key, c.rev)
			switch {
			case k.want == nil && !errors.Is(err, storage.ErrNotFound):
				t.Errorf("Get(%q, %d) = %s, %v; want ErrNotFound", k.key, c.rev, fmtKV(got), err)
			case k.want != nil && err != nil:
				t.Errorf("Get(%q, %d): %v", k.key, c.rev, err)
			case k.want != nil:
				checkKV(t, "Get at a past revision", got, *k.want)
			}
		}
		res := list(t, st, storage.ListOptions{Prefix: []byte("hist/"), Revision: c.rev})
		var vals []string
		for _, it := range res.Items {
			vals = append(vals, string(it.Value))
		}
		wantRev := c.rev
		if wantRev == 0 {
			wantRev = r6
		}
		if res.Revision != wantRev || !equalStrings(vals, c.listed) {
			t.Errorf("List at %d = %q at revision %d; want %q at %d", c.rev, vals, res.Revision, c.listed, wantRev)
		}
	}
}

func testFutureRevision(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	create(t, st, "fut/a", "x")
	cur := current(t, st)
	if _, err := st.Get(ctx, []byte("fut/a"), cur+1); !isFuture(err, cur+1, cur) {
		t.Errorf("Get at current+1: %v, want FutureRevisionError{%d, %d}", err, cur+1, cur)
	}
	if _, err := st.List(ctx, storage.ListOptions{Prefix: []byte("fut/"), Revision: cur + 100}); !isFuture(err, cur+100, cur) {
		t.Errorf("List at current+100: %v, want FutureRevisionError{%d, %d}", err, cur+100, cur)
	}
	if err := st.Compact(ctx, cur+1); !isFuture(err, cur+1, cur) {
		t.Errorf("Compact at current+1: %v, want FutureRevisionError{%d, %d}", err, cur+1, cur)
	}
	if kv := get(t, st, "fut/a", cur); string(kv.Value) != "x" {
		t.Errorf("Get at current = %s", fmtKV(kv))
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
