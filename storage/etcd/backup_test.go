package etcd_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// restoreBump is the --bump-revision of the restore: docs/operations.md
// recommends it (a billion revisions, far more than any cluster writes
// between two backups).
const restoreBump = "1000000000"

// TestEtcdSnapshotRestore backs up the etcd under a running API with
// etcdctl snapshot save, writes more, restores the snapshot with etcdutl
// snapshot restore --bump-revision --mark-compacted into a new data
// directory, and starts a new API on it (the documented procedure): the
// objects are those of the snapshot, a new write gets a resourceVersion
// above every one handed out before the restore, and every old
// resourceVersion (list, watch, continue token, storage read and watch)
// answers that it is compacted (410 at the API), so no client is fooled.
func TestEtcdSnapshotRestore(t *testing.T) {
	if testing.Short() && !(etcdtest.ToolAvailable("etcdctl", "") && etcdtest.ToolAvailable("etcdutl", "")) {
		t.Skip("etcdctl and etcdutl not built yet (see etcdtest.Tool); not building them under -short")
	}
	ctx := t.Context()
	srv := etcdtest.Start(t, etcdtest.Options{})
	in := startInstance(t, srv, "api", instanceOptions{})
	for i := range 3 {
		in.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"kept-%d"}}`, i))
	}
	kept := in.must(t, 200, "GET", cmPath+"/kept-0", "")
	keptRV := str(kept, "metadata", "resourceVersion")
	if _, err := in.st.Create(ctx, []byte("raw/kept"), []byte("v")); err != nil {
		t.Fatal(err)
	}

	snap := filepath.Join(t.TempDir(), "kapi.db")
	if err := srv.Snapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}

	// Written after the snapshot: lost by the restore, yet clients saw
	// these resourceVersions.
	for i := range 10 {
		in.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"lost-%d"}}`, i))
	}
	in.must(t, 200, "PUT", cmPath+"/kept-0", fmt.Sprintf(`{"metadata":{"name":"kept-0","resourceVersion":%q},"data":{"k":"after"}}`, keptRV))
	page := in.must(t, 200, "GET", cmPath+"?limit=2", "")
	cont, pageRV := str(page, "metadata", "continue"), str(page, "metadata", "resourceVersion")
	if cont == "" {
		t.Fatalf("no continue token on a first page of 2: %v", page)
	}
	lastRV, err := in.st.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Stop the API and etcd; restore into a new data directory; start both.
	in.stop()
	srv.Kill()
	srv2 := etcdtest.Start(t, etcdtest.Options{Restore: snap, RestoreArgs: []string{"--bump-revision", restoreBump, "--mark-compacted"}})
	in2 := startInstance(t, srv2, "api-restored", instanceOptions{})
	started := time.Now()

	// The snapshot's objects, not the later ones.
	if got := str(in2.must(t, 200, "GET", cmPath+"/kept-0", ""), "metadata", "resourceVersion"); got != keptRV {
		t.Fatalf("kept-0 at resourceVersion %s after the restore, want the snapshot's %s", got, keptRV)
	}
	if r := in2.do(t, "GET", cmPath+"/lost-0", ""); r.code != 404 {
		t.Fatalf("an object written after the snapshot: %d %s, want 404", r.code, r.body)
	}
	if _, err := in2.st.Get(ctx, []byte("raw/kept"), 0); err != nil {
		t.Fatalf("raw key of the snapshot: %v", err)
	}

	// New writes are above every revision handed out before the restore.
	created := in2.must(t, 201, "POST", cmPath, `{"metadata":{"name":"new"}}`)
	newRV, _ := strconv.ParseInt(str(created, "metadata", "resourceVersion"), 10, 64)
	if newRV <= lastRV {
		t.Fatalf("a write after the restore got resourceVersion %d, not above %d handed out before it", newRV, lastRV)
	}
	t.Logf("last revision before the restore %d, first write after it %d", lastRV, newRV)

	// Every old resourceVersion is compacted: 410 at the API.
	for _, rv := range []string{keptRV, pageRV, strconv.FormatInt(lastRV, 10)} {
		if r := in2.do(t, "GET", cmPath+"?resourceVersionMatch=Exact&resourceVersion="+rv, ""); r.code != 410 {
			t.Errorf("an exact list at the old resourceVersion %s: %d %s, want 410", rv, r.code, r.body)
		}
		if code := watchErrorCode(t, in2, cmPath+"?watch=1&timeoutSeconds=5&resourceVersion="+rv); code != 410 {
			t.Errorf("a watch from the old resourceVersion %s: first event code %d, want an ERROR event with 410", rv, code)
		}
	}
	if r := in2.do(t, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(cont), ""); r.code != 410 {
		t.Errorf("a continue token from before the restore: %d %s, want 410", r.code, r.body)
	}
	// And at the storage layer.
	if _, err := in2.st.Get(ctx, []byte("raw/kept"), lastRV); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("a storage read at revision %d: %v, want ErrCompacted", lastRV, err)
	}
	if _, err := in2.st.Watch(ctx, storage.WatchOptions{Prefix: []byte("raw/"), FromRevision: lastRV}); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("a storage watch from revision %d: %v, want ErrCompacted", lastRV, err)
	}
	compacted, err := in2.st.CompactedRevision(ctx)
	if err != nil || compacted <= lastRV {
		t.Errorf("compacted revision after the restore %d, %v; want above %d", compacted, err, lastRV)
	}

	// The snapshot holds the old instance's election key; its lease is not
	// renewed any more, so the new instance leads once it expires.
	eventually(t, 60*time.Second, "the restored instance to lead", func() bool { return in2.el.IsLeader() })
	t.Logf("the restored instance leads %v after it started", time.Since(started).Round(time.Millisecond))
}

// watchErrorCode opens a watch and returns the code of its first event
// when it is an ERROR Status (0 otherwise, or the HTTP code when the watch
// is refused).
func watchErrorCode(t *testing.T, in *instance, path string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, in.ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := in.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		return 0
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Kind string `json:"kind"`
			Code int    `json:"code"`
		} `json:"object"`
	}
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type != "ERROR" || ev.Object.Kind != "Status" {
		return 0
	}
	return ev.Object.Code
}
