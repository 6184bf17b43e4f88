package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

var listTests = []test{
	{name: "ListPrefix", fn: testListPrefix},
	{name: "ListPaging", fn: testListPaging},
	{name: "ListMaxBytes", fn: testListMaxBytes},
	{name: "ListSnapshotIsolation", fn: testListSnapshotIsolation},
}

func listKey(i int) string { return fmt.Sprintf("list/k%03d", i) }

func testListPrefix(t *testing.T, s *suite) {
	st := s.open(t)
	// Neighbours that share a textual prefix but are not under "list/".
	for _, k := range []string{"lis", "list", "list0/x", "lisu/x", "k"} {
		create(t, st, k, "outside")
	}
	var revs []int64
	for i := range 5 {
		revs = append(revs, create(t, st, listKey(i), fmt.Sprintf("v%d", i)))
	}
	r2b := update(t, st, listKey(2), "v2b", revs[2])
	create(t, st, "list/", "the prefix itself")
	cur := current(t, st)

	res := list(t, st, storage.ListOptions{Prefix: []byte("list/")})
	want := []string{"list/", listKey(0), listKey(1), listKey(2), listKey(3), listKey(4)}
	if got := keys(res.Items); !equalStrings(got, want) {
		t.Fatalf("List keys = %q, want %q", got, want)
	}
	if res.Revision != cur || res.More || res.Remaining != 0 || res.NextKey != nil {
		t.Fatalf("List = revision %d more %v remaining %d next %q; want revision %d and nothing more",
			res.Revision, res.More, res.Remaining, res.NextKey, cur)
	}
	checkKV(t, "listed updated item", res.Items[3], storage.KeyValue{Key: []byte(listKey(2)), Value: []byte("v2b"),
		Revision: r2b, CreateRevision: revs[2]})
	checkKV(t, "listed item", res.Items[1], storage.KeyValue{Key: []byte(listKey(0)), Value: []byte("v0"),
		Revision: revs[0], CreateRevision: revs[0]})

	// KeysOnly leaves values out but keeps revisions.
	ko := list(t, st, storage.ListOptions{Prefix: []byte("list/"), KeysOnly: true})
	if got := keys(ko.Items); !equalStrings(got, want) {
		t.Fatalf("KeysOnly keys = %q, want %q", got, want)
	}
	for i, it := range ko.Items {
		if it.Value != nil || it.Revision != res.Items[i].Revision || it.CreateRevision != res.Items[i].CreateRevision {
			t.Fatalf("KeysOnly item %d = %s, want no value and revisions of %s", i, fmtKV(it), fmtKV(res.Items[i]))
		}
	}

	// StartKey is inclusive, and need not exist.
	from := list(t, st, storage.ListOptions{Prefix: []byte("list/"), StartKey: []byte(listKey(2))})
	if got := keys(from.Items); !equalStrings(got, want[3:]) {
		t.Fatalf("List from %q = %q, want %q", listKey(2), got, want[3:])
	}
	from = list(t, st, storage.ListOptions{Prefix: []byte("list/"), StartKey: []byte("list/k0015")})
	if got := keys(from.Items); !equalStrings(got, want[3:]) {
		t.Fatalf("List from a missing start key = %q, want %q", got, want[3:])
	}

	// An empty prefix range.
	empty := list(t, st, storage.ListOptions{Prefix: []byte("nothing/"), Limit: 10})
	if len(empty.Items) != 0 || empty.More || empty.Remaining != 0 || empty.Revision != cur {
		t.Fatalf("List of an empty range = %+v", empty)
	}
	// A limit above the count.
	all := list(t, st, storage.ListOptions{Prefix: []byte("list/"), Limit: 100})
	if len(all.Items) != len(want) || all.More || all.Remaining != 0 {
		t.Fatalf("List with a large limit: %d items more %v remaining %d", len(all.Items), all.More, all.Remaining)
	}
	// A prefix of 0xff bytes (no PrefixEnd).
	ff := []byte{0xff, 0xff}
	if _, err := st.Create(t.Context(), append(ff, 'a'), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if res := list(t, st, storage.ListOptions{Prefix: ff}); len(res.Items) != 1 {
		t.Fatalf("List under 0xffff = %d items, want 1", len(res.Items))
	}
}

func keys(items []storage.KeyValue) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Key)
	}
	return out
}

func (s *suite) checkRemaining(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got == want || (s.cfg.approxRemains && got == -1) {
		return
	}
	t.Errorf("%s: Remaining = %d, want %d", what, got, want)
}

func testListPaging(t *testing.T, s *suite) {
	st := s.open(t)
	const n = 25
	for i := range n {
		create(t, st, listKey(i), fmt.Sprintf("v%d", i))
	}
	create(t, st, "list0", "outside")
	full := list(t, st, storage.ListOptions{Prefix: []byte("list/")})
	if len(full.Items) != n {
		t.Fatalf("full list: %d items, want %d", len(full.Items), n)
	}

	for _, c := range []struct {
		limit int64
		count bool
	}{{1, true}, {7, true}, {24, true}, {25, true}, {1, false}, {7, false}, {24, false}} {
		opts := storage.ListOptions{Prefix: []byte("list/"), Limit: c.limit, Count: c.count}
		s.walkPages(t, st, fmt.Sprintf("limit %d", c.limit), opts, full.Items, func(page string, res storage.ListResult) {
			if int64(len(res.Items)) > c.limit {
				t.Fatalf("%s: %d items", page, len(res.Items))
			}
		})
	}
}

// walkPages lists opts page after page until the last and checks what
// every paged list promises: each page at the first page's revision, More
// and Remaining right for what is left, NextKey the next item's key (none
// after the last), and the pages together the items of full. check sees
// each page as well.
func (s *suite) walkPages(t *testing.T, st storage.Store, name string, opts storage.ListOptions, full []storage.KeyValue, check func(page string, res storage.ListResult)) {
	t.Helper()
	var got []storage.KeyValue
	var rev int64
	for n := 1; ; n++ {
		page := fmt.Sprintf("%s page %d", name, n)
		if n > len(full)+1 {
			t.Fatalf("%s: more pages than items", page)
		}
		res := list(t, st, opts)
		if n == 1 {
			rev = res.Revision
		} else if res.Revision != rev {
			t.Fatalf("%s: revision %d, want the first page's %d", page, res.Revision, rev)
		}
		check(page, res)
		got = append(got, res.Items...)
		left := int64(len(full) - len(got))
		if res.More != (left > 0) {
			t.Fatalf("%s: More = %v with %d left", page, res.More, left)
		}
		switch {
		case opts.Count:
			s.checkRemaining(t, page, res.Remaining, left)
		case res.More && res.Remaining != -1 && res.Remaining != left:
			t.Errorf("%s without Count: Remaining = %d, want -1 or %d", page, res.Remaining, left)
		case !res.More && res.Remaining != 0:
			t.Errorf("%s, the last, without Count: Remaining = %d, want 0", page, res.Remaining)
		}
		if !res.More {
			if res.NextKey != nil {
				t.Errorf("%s, the last: NextKey %q", page, res.NextKey)
			}
			break
		}
		if want := full[len(got)].Key; !bytes.Equal(res.NextKey, want) {
			t.Fatalf("%s: NextKey %q, want %q", page, res.NextKey, want)
		}
		opts.StartKey, opts.Revision = res.NextKey, res.Revision
	}
	if len(got) != len(full) {
		t.Fatalf("%s: %d items in all pages, want %d", name, len(got), len(full))
	}
	for i := range got {
		checkKV(t, fmt.Sprintf("%s item %d", name, i), got[i], full[i])
	}
}

// testListMaxBytes pages through values of mixed sizes with a byte bound,
// alone and with a limit: every page but the last stops at the first item
// that reaches the bound, and the pages together are the whole list.
func testListMaxBytes(t *testing.T, s *suite) {
	st := s.open(t)
	const n = 20
	for i := range n {
		size := 10
		if i%5 == 2 {
			size = 1000 // a large value among small ones
		}
		create(t, st, listKey(i), strings.Repeat(string(rune('a'+i)), size))
	}
	create(t, st, "list0", "outside")
	full := list(t, st, storage.ListOptions{Prefix: []byte("list/")})
	if len(full.Items) != n {
		t.Fatalf("full list: %d items, want %d", len(full.Items), n)
	}
	for _, c := range []struct {
		maxBytes, limit int64
		count           bool
	}{{1, 0, true}, {50, 0, true}, {100, 3, true}, {500, 0, false}, {1500, 4, true}, {1 << 20, 0, true}} {
		opts := storage.ListOptions{Prefix: []byte("list/"), MaxBytes: c.maxBytes, Limit: c.limit, Count: c.count}
		s.walkPages(t, st, fmt.Sprintf("max %d limit %d", c.maxBytes, c.limit), opts, full.Items, func(page string, res storage.ListResult) {
			if len(res.Items) == 0 {
				t.Fatalf("%s: no items", page)
			}
			var size int64
			for i, kv := range res.Items {
				if size += int64(len(kv.Key) + len(kv.Value)); i < len(res.Items)-1 && size >= c.maxBytes {
					t.Fatalf("%s: item %d reaches the bound, yet %d more follow", page, i, len(res.Items)-1-i)
				}
			}
			// A page ends at the limit or at the bound, nowhere else.
			if res.More && int64(len(res.Items)) != c.limit && size < c.maxBytes && !s.cfg.storedForm {
				t.Fatalf("%s: %d items of %d bytes ended early", page, len(res.Items), size)
			}
		})
	}
}

// testListSnapshotIsolation pages through a list at the first page's
// revision while other writers change the listed range.
func testListSnapshotIsolation(t *testing.T, s *suite) {
	st := s.open(t)
	const n = 30
	revs := make([]int64, n)
	for i := range n {
		revs[i] = create(t, st, listKey(i), fmt.Sprintf("v%d", i))
	}
	first := list(t, st, storage.ListOptions{Prefix: []byte("list/"), Limit: 10, Count: true})
	s.checkRemaining(t, "page 1", first.Remaining, n-10)

	// Changes after the first page: update and delete keys on later pages,
	// delete one of the first page, create keys inside the range.
	update(t, st, listKey(15), "changed", revs[15])
	del(t, st, listKey(25), 0)
	del(t, st, listKey(5), 0)
	create(t, st, "list/k0125", "new") // between k012 and k013
	create(t, st, "list/k999", "new at the end")

	// And keep writing while the pages are read.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := []byte(listKey(i % n))
			if _, err := st.Update(t.Context(), k, []byte(fmt.Sprintf("busy%d", i)), 0); err != nil &&
				!errors.Is(err, storage.ErrNotFound) {
				t.Errorf("background update: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	got := append([]storage.KeyValue(nil), first.Items...)
	opts := storage.ListOptions{Prefix: []byte("list/"), Limit: 10, StartKey: first.NextKey, Revision: first.Revision, Count: true}
	for page := 2; ; page++ {
		res := list(t, st, opts)
		if res.Revision != first.Revision {
			t.Fatalf("page %d revision %d, want %d", page, res.Revision, first.Revision)
		}
		got = append(got, res.Items...)
		s.checkRemaining(t, fmt.Sprintf("page %d", page), res.Remaining, int64(n-len(got)))
		if !res.More {
			break
		}
		opts.StartKey = res.NextKey
	}
	if len(got) != n {
		t.Fatalf("snapshot pages hold %d items (%q), want %d", len(got), keys(got), n)
	}
	for i := range n {
		checkKV(t, fmt.Sprintf("snapshot item %d", i), got[i], storage.KeyValue{Key: []byte(listKey(i)),
			Value: []byte(fmt.Sprintf("v%d", i)), Revision: revs[i], CreateRevision: revs[i]})
	}
}
