package badger

import (
	"context"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

// TestCountLimit: a page counts the keys after it (Remaining) only up to
// countLimit; beyond, Remaining is -1 on that page and on every later page
// of the same walk (nothing is counted again), and exact once a walk starts
// where fewer keys are left.
func TestCountLimit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = countLimit + 1200
	for i := range n {
		if _, err := s.Create(ctx, fmt.Appendf(nil, "big/k%06d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(start []byte) (remaining []int64, keys int) {
		var rev int64
		for {
			page, err := s.List(ctx, storage.ListOptions{Prefix: []byte("big/"), StartKey: start, Revision: rev, Limit: 500, Count: true})
			if err != nil {
				t.Fatal(err)
			}
			rev, keys = page.Revision, keys+len(page.Items)
			if !page.More {
				return remaining, keys
			}
			remaining = append(remaining, page.Remaining)
			start = page.NextKey
		}
	}
	rem, keys := walk(nil)
	if keys != n {
		t.Fatalf("walk saw %d keys, want %d", keys, n)
	}
	for i, r := range rem {
		if r != -1 {
			t.Fatalf("page %d: Remaining %d, want -1 (more than %d keys after the first page)", i+1, r, countLimit)
		}
	}
	// A walk from where 2,000 keys are left counts exactly.
	rem, _ = walk(fmt.Appendf(nil, "big/k%06d", n-2000))
	for i, r := range rem {
		if want := int64(2000 - 500*(i+1)); r != want {
			t.Fatalf("short walk page %d: Remaining %d, want %d", i+1, r, want)
		}
	}
}
