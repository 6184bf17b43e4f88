package etcd_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// TestEtcdRestart kills etcd (SIGKILL) under a running API server and
// starts it again: the storage watch and the API watch on top of it resume
// where they were, with no event lost or repeated, and writes go on.
func TestEtcdRestart(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	in := startInstance(t, srv, "api", instanceOptions{})
	ctx := t.Context()

	raw, err := in.st.Watch(ctx, storage.WatchOptions{Prefix: []byte("raw/"), ProgressInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rv := str(in.must(t, 200, "GET", cmPath, ""), "metadata", "resourceVersion")
	api := in.watch(t, cmPath+"?watch=1&resourceVersion="+rv)

	var rawRevs, apiRevs []int64
	write := func(round, n int) {
		t.Helper()
		for i := range n {
			rev, err := in.st.Create(ctx, []byte(fmt.Sprintf("raw/%d-%d", round, i)), []byte("v"))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			rawRevs = append(rawRevs, rev)
			obj := in.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"cm-%d-%d"}}`, round, i))
			r, _ := strconv.ParseInt(str(obj, "metadata", "resourceVersion"), 10, 64)
			apiRevs = append(apiRevs, r)
		}
	}
	write(0, 10)
	before, err := in.st.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	srv.Restart()
	// Calls wait for the client to reconnect; bound them.
	eventually(t, 60*time.Second, "etcd to answer after the restart", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cur, err := in.st.CurrentRevision(cctx)
		if err == nil && cur != before {
			t.Fatalf("revision %d after the restart, want %d", cur, before)
		}
		return err == nil
	})
	t.Logf("etcd answered %v after the kill", time.Since(killed).Round(time.Millisecond))
	write(1, 10)

	// The storage watch: every create, once, in order (progress between).
	deadline := time.After(30 * time.Second)
	for i := 0; i < len(rawRevs); {
		select {
		case ev, ok := <-raw:
			if !ok {
				t.Fatalf("storage watch closed after %d of %d events", i, len(rawRevs))
			}
			switch ev.Type {
			case storage.EventProgress:
				continue
			case storage.EventPut:
				if ev.Revision != rawRevs[i] {
					t.Fatalf("storage watch event %d at revision %d, want %d", i, ev.Revision, rawRevs[i])
				}
				i++
			default:
				t.Fatalf("storage watch event %v: %v", ev.Type, ev.Err)
			}
		case <-deadline:
			t.Fatalf("storage watch: %d of %d events within 30s", i, len(rawRevs))
		}
	}
	// The API watch likewise.
	evs := api.waitFor(t, len(apiRevs), 30*time.Second)
	if len(evs) != len(apiRevs) {
		t.Fatalf("API watch: %d events, want %d: %v", len(evs), len(apiRevs), evs)
	}
	for i, ev := range evs {
		if ev.Type != "ADDED" || ev.RV != strconv.FormatInt(apiRevs[i], 10) {
			t.Fatalf("API watch event %d = %+v, want ADDED at %d", i, ev, apiRevs[i])
		}
	}
}

// TestCompactionElected runs two instances with a short compaction
// interval: history gets compacted (by whichever instance is elected), and
// a read at a compacted resourceVersion gets 410 Gone from either.
func TestCompactionElected(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	a := startInstance(t, srv, "api-a", instanceOptions{compaction: 200 * time.Millisecond})
	b := startInstance(t, srv, "api-b", instanceOptions{compaction: 200 * time.Millisecond})
	first := a.must(t, 201, "POST", cmPath, `{"metadata":{"name":"old"}}`)
	a.must(t, 200, "PUT", cmPath+"/old", fmt.Sprintf(`{"metadata":{"name":"old","resourceVersion":%q},"data":{"k":"v"}}`,
		str(first, "metadata", "resourceVersion")))
	old, _ := strconv.ParseInt(str(first, "metadata", "resourceVersion"), 10, 64)
	eventually(t, 30*time.Second, "a compaction past the first write", func() bool {
		rev, err := b.st.CompactedRevision(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return rev > old
	})
	for _, in := range []*instance{a, b} {
		r := in.do(t, "GET", cmPath+"?resourceVersionMatch=Exact&resourceVersion="+str(first, "metadata", "resourceVersion"), "")
		if r.code != 410 {
			t.Fatalf("%s: list at a compacted resourceVersion: %d %s, want 410", in.name, r.code, r.body)
		}
	}
	// Still serving.
	a.must(t, 200, "GET", cmPath+"/old", "")
}
