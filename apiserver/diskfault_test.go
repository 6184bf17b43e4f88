//go:build linux

package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/internal/disktest"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// TestDiskFullStatus serves configmaps from a Badger store on a real tmpfs
// and fills it: writes answer 507 InsufficientStorage naming the directory,
// gets and lists answer 200, and once space is freed writes succeed again
// without a restart.
func TestDiskFullStatus(t *testing.T) {
	vol := disktest.Tmpfs(t, 64<<20)
	dir := filepath.Join(vol, "store")
	store, err := badger.Open(badger.DefaultOptions(dir).WithMemTableSize(8 << 20).WithMaxValueSize(256 << 10).WithMinFreeSpace(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ts := httptest.NewServer(newConfigMapServer(t, Config{Storage: store}))
	t.Cleanup(ts.Close)
	const cms = "/api/v1/namespaces/default/configmaps"
	cm := func(name string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"v"}}`, name)
	}
	if r := do(t, ts, "POST", cms, cm("before")); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	ballast := disktest.Fill(t, vol)

	for _, req := range []struct{ method, path, body string }{
		{"POST", cms, cm("refused")},
		{"PUT", cms + "/before", strings.Replace(cm("before"), `"v"`, `"changed"`, 1)},
		{"DELETE", cms + "/before", ""},
	} {
		st := do(t, ts, req.method, req.path, req.body).status(t, http.StatusInsufficientStorage, meta.StatusReasonInsufficientStorage)
		if !strings.Contains(st.Message, "out of disk space") || !strings.Contains(st.Message, dir) {
			t.Fatalf("%s %s: message %q does not say the disk is full and where", req.method, req.path, st.Message)
		}
	}
	if r := do(t, ts, "GET", cms+"/before", ""); r.code != http.StatusOK {
		t.Fatalf("get on a full disk: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "GET", cms, ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"before"`) {
		t.Fatalf("list on a full disk: %d %s", r.code, r.body)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if r := do(t, ts, "POST", cms, cm("after")); r.code != http.StatusCreated {
		t.Fatalf("create after space was freed: %d %s", r.code, r.body)
	}
}

// failingWrites is a store whose creates of configmaps fail with err: the other storage
// faults need a slow or failing device (the Badger package provokes them
// through its test hooks); here only their Status is checked.
type failingWrites struct {
	storage.Store
	err error
}

func (f failingWrites) Create(ctx context.Context, key, value []byte) (int64, error) {
	if bytes.Contains(key, []byte("configmaps/default/")) {
		return 0, f.err
	}
	return f.Store.Create(ctx, key, value)
}

// TestStorageFaultStatuses checks the Status of each storage fault: a busy
// store is 429 with Retry-After (clients retry), a store that cannot write
// is 503, a full one 507.
func TestStorageFaultStatuses(t *testing.T) {
	for _, c := range []struct {
		err        error
		code       int
		reason     meta.StatusReason
		retryAfter string
	}{
		{fmt.Errorf("create: waited 5s: %w", storage.ErrBusy), http.StatusTooManyRequests, meta.StatusReasonTooManyRequests, "1"},
		{fmt.Errorf("/data is on a read-only file system: %w", storage.ErrUnavailable), http.StatusServiceUnavailable, meta.StatusReasonServiceUnavailable, ""},
		{fmt.Errorf("%w: /data has 0 MiB free", storage.ErrNoSpace), http.StatusInsufficientStorage, meta.StatusReasonInsufficientStorage, ""},
	} {
		mem, err := badger.Open(badger.InMemoryOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		ts := httptest.NewServer(newConfigMapServer(t, Config{Storage: failingWrites{mem, c.err}}))
		r := do(t, ts, "POST", "/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)
		ts.Close()
		st := r.status(t, c.code, c.reason)
		if got := r.header.Get("Retry-After"); got != c.retryAfter {
			t.Errorf("%v: Retry-After %q, want %q", c.err, got, c.retryAfter)
		}
		if !strings.Contains(st.Message, "/data") && c.code != http.StatusTooManyRequests {
			t.Errorf("%v: message %q does not name the directory", c.err, st.Message)
		}
	}
}
