package apiserver

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/watch"
)

// A limited list read from storage ends its page at about 4 MiB of values
// (registry's pageBytes) with a continue token, so that one request for a
// large limit of large objects holds a bounded page; the walk still returns
// every object once, in order, with a correct remainingItemCount.
func TestLimitedListPageBoundedInBytes(t *testing.T) {
	// No watch cache state: every page is read from storage.
	api := newConfigMapServer(t, Config{MaxRequestBodyBytes: 1 << 20, Watch: watch.Settings{StateBytes: -1}})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	const n, size = 12, 900_000 // four fill less than 4 MiB, five more
	big := strings.Repeat("x", size)
	for i := range n {
		body := fmt.Sprintf(`{"metadata":{"name":"cm-%02d","labels":{"a":"b"}},"data":{"v":%q}}`, i, big)
		if r := do(t, ts, "POST", cmPath, body); r.code != 201 {
			t.Fatalf("create %d: %d %s", i, r.code, r.body)
		}
	}
	for _, sel := range []string{"", "&labelSelector=a%3Db"} {
		first := do(t, ts, "GET", cmPath+"?limit=1"+sel, "").object(t)
		names := itemNames(t, first)
		cont := str(first, "metadata", "continue")
		var sizes []int
		for cont != "" && len(sizes) < n {
			page := do(t, ts, "GET", cmPath+"?limit=10&continue="+url.QueryEscape(cont)+sel, "").object(t)
			got := itemNames(t, page)
			sizes = append(sizes, len(got))
			names = append(names, got...)
			cont = str(page, "metadata", "continue")
			rem, hasRem := page["metadata"].(map[string]any)["remainingItemCount"]
			switch {
			case sel == "" && cont != "" && (!hasRem || int(rem.(float64)) != n-len(names)):
				t.Errorf("selector %q: remainingItemCount %v after %d items, want %d", sel, rem, len(names), n-len(names))
			case sel != "" && hasRem:
				t.Errorf("selector %q: remainingItemCount %v on a filtered list", sel, rem)
			}
		}
		if want := []int{5, 5, 1}; fmt.Sprint(sizes) != fmt.Sprint(want) {
			t.Errorf("selector %q: pages after the first hold %v items, want %v", sel, sizes, want)
		}
		for i, name := range names {
			if want := fmt.Sprintf("cm-%02d", i); name != want {
				t.Fatalf("selector %q: item %d is %s, want %s (all: %v)", sel, i, name, want, names)
			}
		}
		if len(names) != n {
			t.Errorf("selector %q: %d items, want %d", sel, len(names), n)
		}
	}
}
