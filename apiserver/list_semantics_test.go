package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// newListTestServer is newTestServer that also hands back the store (to
// compact it) and uses a short wait for future resourceVersions.
func newListTestServer(t *testing.T, futureWait time.Duration) (*badger.Store, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api, err := New(context.Background(), Config{Storage: store, MaxRequestBodyBytes: 1 << 20, AllowAnonymous: true, FutureRevisionWait: futureWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return store, ts
}

func itemNames(t *testing.T, list map[string]any) []string {
	t.Helper()
	var names []string
	for _, it := range list["items"].([]any) {
		names = append(names, str(it.(map[string]any), "metadata", "name"))
	}
	return names
}

func listRV(t *testing.T, list map[string]any) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(str(list, "metadata", "resourceVersion"), 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion: %v: %v", err, list["metadata"])
	}
	return rv
}

// TestListContinueCompacted: a continue token (or an exact list) whose
// snapshot has been compacted is a 410 Expired; the continue 410 carries a
// fresh token that resumes from the same key at the latest revision.
func TestListContinueCompacted(t *testing.T) {
	store, ts := newListTestServer(t, 0)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	page1 := do(t, ts, "GET", cmPath+"?limit=2", "").object(t)
	oldRV := str(page1, "metadata", "resourceVersion")
	cont := str(page1, "metadata", "continue")
	if got := strings.Join(itemNames(t, page1), ","); got != "c0,c1" || cont == "" {
		t.Fatalf("page 1: %v", page1)
	}
	// Changes after the first page, then compaction of the snapshot.
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c9"}}`)
	do(t, ts, "DELETE", cmPath+"/c3", "")
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"a0"}}`) // before the continue key: not seen
	cur, err := store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}

	st := do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(cont), "").status(t, 410, meta.StatusReasonExpired)
	if st.Continue == "" || st.Continue == cont {
		t.Fatalf("410 carries no fresh continue token: %+v", st)
	}
	if !strings.Contains(st.Message, "too old to display a consistent list result") || !strings.Contains(st.Message, "inconsistent list") {
		t.Fatalf("410 message: %q", st.Message)
	}

	// The fresh token continues, inconsistently, at the latest revision from
	// the same key; its own pages then form one (new) snapshot.
	names := []string{}
	next, firstRV := st.Continue, int64(0)
	for next != "" {
		page := do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(next), "").object(t)
		rv := listRV(t, page)
		if firstRV == 0 {
			firstRV = rv
			if old, _ := strconv.ParseInt(oldRV, 10, 64); rv < cur || rv == old {
				t.Fatalf("continued page at revision %d, want the latest (>= %d)", rv, cur)
			}
		} else if rv != firstRV {
			t.Fatalf("continued pages at revisions %d and %d", firstRV, rv)
		}
		names = append(names, itemNames(t, page)...)
		next = str(page, "metadata", "continue")
	}
	if got := strings.Join(names, ","); got != "c2,c4,c9" {
		t.Fatalf("remainder %s, want c2,c4,c9", got)
	}

	// A mangled "latest" token is still a 400.
	do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(st.Continue+"x"), "").status(t, 400, meta.StatusReasonBadRequest)

	// Exact lists at a compacted revision: 410, without a token.
	for _, q := range []string{
		"?resourceVersion=" + oldRV + "&resourceVersionMatch=Exact",
		"?resourceVersion=" + oldRV + "&resourceVersionMatch=Exact&limit=2",
		"?resourceVersion=" + oldRV + "&limit=2", // limit with a resourceVersion is Exact
	} {
		st := do(t, ts, "GET", cmPath+q, "").status(t, 410, meta.StatusReasonExpired)
		if st.Continue != "" {
			t.Fatalf("%s: exact-list 410 carries a continue token", q)
		}
	}
}

// TestListResourceVersionSemantics walks every row of the API's table of
// resourceVersionMatch × paging parameters × resourceVersion for lists.
func TestListResourceVersionSemantics(t *testing.T) {
	const wait = 300 * time.Millisecond
	_, ts := newListTestServer(t, wait)
	for i := 0; i < 5; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	snap := do(t, ts, "GET", cmPath, "").object(t)
	old := listRV(t, snap) // 5 objects at this revision
	oldS := strconv.FormatInt(old, 10)
	first := do(t, ts, "GET", cmPath+"?limit=2&resourceVersion="+oldS, "").object(t)
	tok := url.QueryEscape(str(first, "metadata", "continue"))
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c5"}}`)
	latest := listRV(t, do(t, ts, "GET", cmPath, "").object(t)) // 6 objects
	future := strconv.FormatInt(latest+100, 10)

	type want struct {
		code   int
		reason meta.StatusReason
		rv     string // "old": exactly old; "latest": exactly latest; "any": anything up to latest
		items  int    // -1: not checked
		more   bool   // a continue token is expected
	}
	invalid := want{code: 422, reason: meta.StatusReasonInvalid}
	badRequest := want{code: 400, reason: meta.StatusReasonBadRequest}
	cases := []struct {
		match, paging, rv string
		want              want
	}{
		// resourceVersionMatch unset
		{"", "", "", want{code: 200, rv: "latest", items: 6}},                                  // Most Recent
		{"", "", "0", want{code: 200, rv: "any", items: -1}},                                   // Any
		{"", "", oldS, want{code: 200, rv: "latest", items: 6}},                                // Not older than
		{"", "limit=2", "", want{code: 200, rv: "latest", items: 2, more: true}},               // Most Recent
		{"", "limit=2", "0", want{code: 200, rv: "any", items: -1}},                            // Any
		{"", "limit=2", oldS, want{code: 200, rv: "old", items: 2, more: true}},                // Exact
		{"", "limit=2&continue=" + tok, "", want{code: 200, rv: "old", items: 2, more: true}},  // Continue Token, Exact
		{"", "limit=2&continue=" + tok, "0", want{code: 200, rv: "old", items: 2, more: true}}, // treated as Continue Token, Exact
		{"", "limit=2&continue=" + tok, oldS, badRequest},                                      // Invalid, 400
		{"Exact", "", "", invalid},                                                             // Invalid
		{"Exact", "", "0", invalid},                                                            // Invalid
		{"Exact", "", oldS, want{code: 200, rv: "old", items: 5}},                              // Exact
		{"Exact", "limit=2", "", invalid},                                                      // Invalid
		{"Exact", "limit=2", "0", invalid},                                                     // Invalid
		{"Exact", "limit=2", oldS, want{code: 200, rv: "old", items: 2, more: true}},           // Exact
		{"NotOlderThan", "", "", invalid},                                                      // Invalid
		{"NotOlderThan", "", "0", want{code: 200, rv: "any", items: -1}},                       // Any
		{"NotOlderThan", "", oldS, want{code: 200, rv: "latest", items: 6}},                    // Not older than
		{"NotOlderThan", "limit=2", "", invalid},                                               // Invalid
		{"NotOlderThan", "limit=2", "0", want{code: 200, rv: "any", items: -1}},                // Any
		{"NotOlderThan", "limit=2", oldS, want{code: 200, rv: "latest", items: 2, more: true}},
		// A match together with continue is invalid (not in the table).
		{"Exact", "limit=2&continue=" + tok, "", invalid},
		{"NotOlderThan", "limit=2&continue=" + tok, "", invalid},
		// Future resourceVersions: 504 Timeout after the wait.
		{"", "", future, want{code: 504, reason: meta.StatusReasonTimeout}},
		{"NotOlderThan", "", future, want{code: 504, reason: meta.StatusReasonTimeout}},
		{"NotOlderThan", "limit=2", future, want{code: 504, reason: meta.StatusReasonTimeout}},
		{"Exact", "", future, want{code: 504, reason: meta.StatusReasonTimeout}},
		{"", "limit=2", future, want{code: 504, reason: meta.StatusReasonTimeout}},
	}
	for _, c := range cases {
		q := url.Values{}
		if c.match != "" {
			q.Set("resourceVersionMatch", c.match)
		}
		if c.rv != "" {
			q.Set("resourceVersion", c.rv)
		}
		query := q.Encode()
		if c.paging != "" {
			query += "&" + c.paging
		}
		name := fmt.Sprintf("match=%s,paging=%s,rv=%s", c.match, strings.SplitN(c.paging, "=", 3)[0]+map[bool]string{true: "+continue", false: ""}[strings.Contains(c.paging, "continue")], c.rv)
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			r := do(t, ts, "GET", cmPath+"?"+query, "")
			if c.want.code != 200 {
				st := r.status(t, c.want.code, c.want.reason)
				if c.want.code == 422 && st.Details.Kind != "ListOptions" {
					t.Fatalf("422 details %+v, want kind ListOptions", st.Details)
				}
				if c.want.code == 504 {
					if r.header.Get("Retry-After") == "" {
						t.Fatalf("504 without Retry-After")
					}
					if el := time.Since(start); el < wait {
						t.Fatalf("504 after %v, want after the %v wait", el, wait)
					}
					if !strings.Contains(st.Message, "Too large resource version: "+future) {
						t.Fatalf("504 message %q", st.Message)
					}
				}
				return
			}
			if r.code != 200 {
				t.Fatalf("code %d: %s", r.code, r.body)
			}
			list := r.object(t)
			rv := listRV(t, list)
			switch c.want.rv {
			case "old":
				if rv != old {
					t.Fatalf("list resourceVersion %d, want exactly %d", rv, old)
				}
			case "latest":
				if rv != latest {
					t.Fatalf("list resourceVersion %d, want the latest %d", rv, latest)
				}
			case "any":
				if rv <= 0 || rv > latest {
					t.Fatalf("list resourceVersion %d, want one in (0, %d]", rv, latest)
				}
			}
			if n := len(list["items"].([]any)); c.want.items >= 0 && n != c.want.items {
				t.Fatalf("%d items, want %d", n, c.want.items)
			}
			if c.want.items >= 0 && (str(list, "metadata", "continue") != "") != c.want.more {
				t.Fatalf("continue %q, want one: %v", str(list, "metadata", "continue"), c.want.more)
			}
		})
	}
}

// TestListStreamed: a whole-collection plain-JSON list is
// streamed (no Content-Length) item by item over several storage pages and
// is byte-for-byte the list the buffered path writes.
func TestListStreamed(t *testing.T) {
	_, ts := newListTestServer(t, 0)
	const n = 1100 // more than two storage pages of a streamed list
	for i := 0; i < n; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%04d","labels":{"odd":"%v"}},"data":{"i":"%d"}}`, i, i%2 == 1, i))
	}
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"empty"}}`)
	for _, path := range []string{
		cmPath,
		cmPath + "?labelSelector=odd%3Dtrue",
		"/api/v1/configmaps",
		"/api/v1/namespaces/empty/configmaps",
		cmPath + "?resourceVersion=0",
	} {
		// The transport asks for gzip (and decompresses): streamed through
		// gzip past 128 KiB (liststream_test.go covers every representation).
		buffered := do(t, ts, "GET", path, "")
		streamed := do(t, ts, "GET", path, "", "Accept-Encoding", "identity")
		if buffered.code != 200 || streamed.code != 200 {
			t.Fatalf("%s: codes %d and %d: %s", path, buffered.code, streamed.code, streamed.body)
		}
		// (net/http adds a Content-Length to small bodies on its own.)
		if len(streamed.body) > 64<<10 && streamed.header.Get("Content-Length") != "" {
			t.Fatalf("%s: streamed list has Content-Length %q", path, streamed.header.Get("Content-Length"))
		}
		if streamed.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: Content-Type %q", path, streamed.header.Get("Content-Type"))
		}
		if string(buffered.body) != string(streamed.body) {
			t.Fatalf("%s: streamed list differs from the buffered one", path)
		}
		if path == cmPath {
			if got := len(streamed.object(t)["items"].([]any)); got != n {
				t.Fatalf("streamed %d items, want %d", got, n)
			}
		}
	}
	// Errors found before the first item are still plain Status responses.
	do(t, ts, "GET", cmPath+"?resourceVersion=abc", "", "Accept-Encoding", "identity").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", cmPath+"?resourceVersionMatch=Exact", "", "Accept-Encoding", "identity").status(t, 422, meta.StatusReasonInvalid)
	// Paged lists are not streamed.
	if r := do(t, ts, "GET", cmPath+"?limit=5", "", "Accept-Encoding", "identity"); r.header.Get("Content-Length") == "" {
		t.Fatalf("paged list without Content-Length")
	}
}
