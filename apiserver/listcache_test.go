package apiserver

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"testing"
)

// TestListsFromWatchCache: consistent lists (resourceVersion ""), lists not
// older than a revision, exact snapshots and every page of a paged list are
// served from the watch cache's memory (no storage list page is read), see
// the client's own writes, and a paged walk sees one snapshot while writers
// change the collection.
func TestListsFromWatchCache(t *testing.T) {
	api, fs, ts := newStreamTestServer(t, false)
	type list struct {
		Metadata struct {
			ResourceVersion    string `json:"resourceVersion"`
			Continue           string `json:"continue"`
			RemainingItemCount *int64 `json:"remainingItemCount"`
		} `json:"metadata"`
		Items []struct {
			Metadata struct {
				Name            string `json:"name"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		} `json:"items"`
	}
	getList := func(path string) list {
		t.Helper()
		r := do(t, ts, "GET", path, "")
		if r.code != 200 {
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
		var l list
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return l
	}
	getList(cmPath + "?limit=1") // starts the cache (its first list reads storage)
	fs.pages.Store(0)

	l := getList(cmPath)
	if len(l.Items) != 1300 {
		t.Fatalf("consistent list: %d items", len(l.Items))
	}
	// The client's own write, then a consistent list: it is there.
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"zz-new"},"data":{"k":"v"}}`)
	l = getList(cmPath)
	if n := len(l.Items); n != 1301 || l.Items[n-1].Metadata.Name != "zz-new" {
		t.Fatalf("list after a create: %d items", n)
	}
	rv, _ := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
	// Not older than, and exactly at, that revision.
	if l2 := getList(cmPath + "?resourceVersion=" + l.Metadata.ResourceVersion + "&resourceVersionMatch=NotOlderThan"); len(l2.Items) != 1301 {
		t.Fatalf("NotOlderThan: %d items", len(l2.Items))
	}
	if l2 := getList(cmPath + "?limit=1000&resourceVersion=" + l.Metadata.ResourceVersion + "&resourceVersionMatch=Exact"); len(l2.Items) != 1000 || l2.Metadata.ResourceVersion != l.Metadata.ResourceVersion {
		t.Fatalf("Exact: %d items at %s", len(l2.Items), l2.Metadata.ResourceVersion)
	}

	// A paged walk while another client updates and deletes objects: every
	// page comes from the first page's snapshot.
	first := getList(cmPath + "?limit=100")
	snapRV := first.Metadata.ResourceVersion
	snap, _ := strconv.ParseInt(snapRV, 10, 64)
	if snap < rv {
		t.Fatalf("paged list at %d, before the revision %d already listed", snap, rv)
	}
	if first.Metadata.RemainingItemCount == nil || *first.Metadata.RemainingItemCount != 1201 {
		t.Fatalf("first page: remainingItemCount %v", first.Metadata.RemainingItemCount)
	}
	do(t, ts, "PUT", cmPath+"/default-0150", `{"metadata":{"name":"default-0150"},"data":{"changed":"yes"}}`)
	do(t, ts, "DELETE", cmPath+"/default-0151", "")
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"default-0150a"}}`)
	names := map[string]bool{}
	for _, it := range first.Items {
		names[it.Metadata.Name] = true
	}
	cont, pages := first.Metadata.Continue, 1
	for cont != "" {
		p := getList(cmPath + "?limit=100&continue=" + url.QueryEscape(cont))
		pages++
		if p.Metadata.ResourceVersion != snapRV {
			t.Fatalf("page %d at %s, want the snapshot's %s", pages, p.Metadata.ResourceVersion, snapRV)
		}
		for _, it := range p.Items {
			if names[it.Metadata.Name] {
				t.Fatalf("page %d repeats %s", pages, it.Metadata.Name)
			}
			names[it.Metadata.Name] = true
			if it.Metadata.Name == "default-0150" && it.Data["changed"] != "" {
				t.Fatalf("page %d shows an update made after the snapshot", pages)
			}
			if irv, _ := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64); irv > snap {
				t.Fatalf("page %d: %s at %d, after the snapshot", pages, it.Metadata.Name, irv)
			}
		}
		if p.Metadata.Continue != "" {
			want := int64(1301 - 100*pages)
			if p.Metadata.RemainingItemCount == nil || *p.Metadata.RemainingItemCount != want {
				t.Fatalf("page %d: remainingItemCount %v, want %d", pages, p.Metadata.RemainingItemCount, want)
			}
		}
		cont = p.Metadata.Continue
	}
	if len(names) != 1301 || !names["default-0151"] || names["default-0150a"] || pages != 14 {
		t.Fatalf("walk: %d names in %d pages", len(names), pages)
	}
	// Protobuf and resourceVersion=0 lists too.
	if resp, body, err := get(t, ts, cmPath, "application/vnd.kubernetes.protobuf", ""); err != nil || resp.StatusCode != 200 || len(body) < 1300*600 {
		t.Fatalf("protobuf list: %v %d %d bytes", err, resp.StatusCode, len(body))
	}
	if l := getList(cmPath + "?resourceVersion=0"); len(l.Items) != 1301 {
		t.Fatalf("resourceVersion=0: %d items", len(l.Items))
	}
	if n := fs.pages.Load(); n != 0 {
		t.Fatalf("%d storage list pages read; every list should have come from the watch cache", n)
	}
	// A namespace's list is a slice of the same snapshot.
	if l := getList("/api/v1/namespaces/other/configmaps"); len(l.Items) != 5 {
		t.Fatalf("namespace list: %d items", len(l.Items))
	}
	if n := fs.pages.Load(); n != 0 {
		t.Fatalf("namespace list read %d storage pages", n)
	}

	// Pages from the cache are streamed: byte for byte what the buffered
	// path writes, in JSON and protobuf, with and without gzip.
	cont = getList(cmPath + "?limit=600").Metadata.Continue
	paths := []string{
		cmPath + "?limit=600",
		cmPath + "?limit=600&continue=" + url.QueryEscape(cont),
		cmPath + "?limit=400&labelSelector=odd%3Dtrue",
		"/api/v1/configmaps?limit=3",
		cmPath + "?resourceVersion=0&limit=10",
		cmPath + "?limit=10&resourceVersion=" + snapRV + "&resourceVersionMatch=NotOlderThan",
		// Whole lists: a protobuf one measures its items once per state
		// (ItemEncoding.FramedSize, remembered per snapshot); each path is read several times.
		cmPath,
		cmPath + "?labelSelector=odd%3Dtrue",
		"/api/v1/configmaps",
	}
	for _, path := range paths {
		for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
			for _, enc := range []string{"", "gzip"} {
				read := func(buffered bool) []byte {
					api.bufferLists.Store(buffered)
					defer api.bufferLists.Store(false)
					resp, body, err := get(t, ts, path, accept, enc)
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("%s %s %s: %v %d %s", path, accept, enc, err, resp.StatusCode, body)
					}
					if resp.Header.Get("Content-Encoding") == "gzip" {
						body = gunzip(t, body)
					}
					return body
				}
				if streamed, buffered := read(false), read(true); !bytes.Equal(streamed, buffered) {
					t.Fatalf("%s %s %s: streamed %d bytes differ from buffered %d", path, accept, enc, len(streamed), len(buffered))
				}
			}
		}
	}

	// A snapshot the cache still holds but storage has compacted away is
	// gone for the API too: 410, for an exact list and a continue token.
	token := first.Metadata.Continue
	cur, err := fs.Store.CurrentRevision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Store.Compact(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		cmPath + "?limit=100&resourceVersion=" + snapRV + "&resourceVersionMatch=Exact",
		cmPath + "?limit=100&continue=" + url.QueryEscape(token),
	} {
		if r := do(t, ts, "GET", path, ""); r.code != 410 {
			t.Fatalf("GET %s after compaction: %d %.200s", path, r.code, r.body)
		}
	}
}
