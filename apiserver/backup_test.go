package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// backupServer serves configmaps on a Badger store in dir, with /backup
// mounted and an RBAC policy: "operator" may take backups (and nothing
// else), "reader" may read every resource but not take backups.
func backupServer(t *testing.T, dir string) (*httptest.Server, *badger.Store) {
	t.Helper()
	store, err := badger.Open(badger.DefaultOptions(dir).WithMemTableSize(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{
			{Name: "backup", Rules: []auth.Rule{{NonResourceURLs: []string{"/backup"}, Verbs: []string{"get"}}}},
			{Name: "view", Rules: []auth.Rule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}},
		},
		Bindings: []auth.Binding{
			{Name: "operators", Role: "backup", Users: []string{"operator"}},
			{Name: "readers", Role: "view", Users: []string{"reader"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(context.Background(), Config{
		Storage: store,
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token":    {Name: "admin", Groups: []string{auth.GroupMasters}},
			"operator-token": {Name: "operator"},
			"reader-token":   {Name: "reader"},
		}),
		Authorizer:          authz,
		DisableControllers:  true,
		NonResourceHandlers: map[string]http.Handler{"/backup": BackupHandler(store, nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(func() {
		ts.Close()
		api.Close()
		store.Close()
	})
	return ts, store
}

func createConfigMaps(t *testing.T, ts *httptest.Server, names ...string) (lastRV string) {
	t.Helper()
	for _, n := range names {
		r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"v"}}`, n), bearer("admin-token")...)
		if r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", n, r.code, r.body)
		}
		lastRV = str(r.object(t), "metadata", "resourceVersion")
	}
	return lastRV
}

// TestBackupEndpoint: /backup is authorized as a non-resource URL (a user
// RBAC grants it gets a backup, others 403, anonymous 401), streams a
// verifiable backup, and answers bad or compacted since revisions with a
// Status.
func TestBackupEndpoint(t *testing.T) {
	ts, store := backupServer(t, t.TempDir())
	createConfigMaps(t, ts, "a", "b")

	do(t, ts, "GET", "/backup", "").status(t, 401, meta.StatusReasonUnauthorized)
	do(t, ts, "GET", "/backup", "", bearer("reader-token")...).status(t, 403, meta.StatusReasonForbidden)
	if r := do(t, ts, "GET", cmPath, "", bearer("operator-token")...); r.code != 403 {
		t.Fatalf("the backup operator listed configmaps: %d", r.code)
	}
	r := do(t, ts, "GET", "/backup", "", bearer("operator-token")...)
	if r.code != 200 || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("backup as operator: %d %q", r.code, r.header.Get("Content-Type"))
	}
	full, err := badger.VerifyBackup(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("the downloaded backup: %v", err)
	}
	cur, _ := store.CurrentRevision(t.Context())
	if full.Revision != cur || full.Since != 0 || full.Bytes != int64(len(r.body)) {
		t.Fatalf("backup %+v, want a full backup at %d of %d bytes", full, cur, len(r.body))
	}

	createConfigMaps(t, ts, "c")
	r = do(t, ts, "GET", "/backup?since="+strconv.FormatInt(full.Revision, 10), "", bearer("operator-token")...)
	inc, err := badger.VerifyBackup(bytes.NewReader(r.body))
	if r.code != 200 || err != nil || inc.Since != full.Revision || inc.Revision <= full.Revision {
		t.Fatalf("incremental backup: %d, %+v, %v", r.code, inc, err)
	}

	do(t, ts, "GET", "/backup?since=x", "", bearer("operator-token")...).status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", "/backup?since=999999", "", bearer("operator-token")...).status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "POST", "/backup", "", bearer("admin-token")...).status(t, 405, meta.StatusReasonMethodNotAllowed)
	cur, _ = store.CurrentRevision(t.Context())
	if err := store.Compact(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	do(t, ts, "GET", "/backup?since="+strconv.FormatInt(full.Revision, 10), "", bearer("operator-token")...).status(t, 410, meta.StatusReasonExpired)
}

// TestRestoreFencesClients restores a backup taken over HTTP and serves it:
// the state is the backup's, and a continue token, a list and a watch at a
// resourceVersion handed out before the restore (before or after the
// backup) answer 410, while new writes get resourceVersions above all of
// them.
func TestRestoreFencesClients(t *testing.T) {
	ts, _ := backupServer(t, t.TempDir())
	createConfigMaps(t, ts, "a", "b", "c", "d")
	page := do(t, ts, "GET", cmPath+"?limit=2", "", bearer("admin-token")...).object(t)
	token, listRV := str(page, "metadata", "continue"), str(page, "metadata", "resourceVersion")
	if token == "" {
		t.Fatal("no continue token")
	}
	r := do(t, ts, "GET", "/backup", "", bearer("operator-token")...)
	if r.code != 200 {
		t.Fatalf("backup: %d %s", r.code, r.body)
	}
	createConfigMaps(t, ts, "lost1", "lost2") // handed out after the backup
	lostB := do(t, ts, "PUT", cmPath+"/b", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"},"data":{"k":"lost"}}`, bearer("admin-token")...)
	if lostB.code != 200 {
		t.Fatalf("update b: %d %s", lostB.code, lostB.body)
	}
	lastRV := str(lostB.object(t), "metadata", "resourceVersion")
	ts.Close()

	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := badger.Restore(t.Context(), dir, badger.RestoreOptions{}, bytes.NewReader(r.body)); err != nil {
		t.Fatal(err)
	}
	ts2, _ := backupServer(t, dir)
	list := do(t, ts2, "GET", cmPath, "", bearer("reader-token")...).object(t)
	var names []string
	for _, it := range list["items"].([]any) {
		names = append(names, str(it.(map[string]any), "metadata", "name"))
	}
	if fmt.Sprint(names) != "[a b c d]" {
		t.Fatalf("restored configmaps %v, want the backup's [a b c d]", names)
	}
	for _, q := range []string{
		"?limit=2&continue=" + url.QueryEscape(token),
		"?resourceVersion=" + listRV + "&resourceVersionMatch=Exact",
		"?resourceVersion=" + lastRV + "&resourceVersionMatch=Exact",
	} {
		do(t, ts2, "GET", cmPath+q, "", bearer("reader-token")...).status(t, 410, meta.StatusReasonExpired)
	}
	for _, rv := range []string{listRV, lastRV} {
		ev := startWatchAs(t, ts2, cmPath+"?watch=1&resourceVersion="+rv, "reader-token").next(t)
		if o := objOf(ev); ev["type"] != "ERROR" || str(o, "code") != "410" {
			t.Fatalf("watch from %s after the restore: %v, want an ERROR event with 410", rv, ev)
		}
	}
	newRV, _ := strconv.ParseInt(createConfigMaps(t, ts2, "new"), 10, 64)
	old, _ := strconv.ParseInt(lastRV, 10, 64)
	if newRV <= old {
		t.Fatalf("a write after the restore got resourceVersion %d, not above %d handed out before", newRV, old)
	}
	// Reads not older than an old resourceVersion are served.
	for _, p := range []string{cmPath + "?resourceVersion=" + listRV, cmPath + "/a?resourceVersion=" + listRV} {
		if r := do(t, ts2, "GET", p, "", bearer("reader-token")...); r.code != 200 {
			t.Fatalf("GET %s after the restore: %d %s", p, r.code, r.body)
		}
	}
	// Objects keep their resourceVersions: an update by the one a client
	// read before the restore succeeds where the object did not change
	// after the backup, and conflicts where the change was lost.
	update := func(name, rv string) int {
		return do(t, ts2, "PUT", cmPath+"/"+name, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"resourceVersion":%q},"data":{"k":"w"}}`,
			name, rv), bearer("admin-token")...).code
	}
	if code := update("b", lastRV); code != 409 {
		t.Fatalf("update of b by the resourceVersion of its lost update: %d, want 409", code)
	}
	if code := update("a", str(page["items"].([]any)[0].(map[string]any), "metadata", "resourceVersion")); code != 200 {
		t.Fatalf("update of a by the resourceVersion read before the backup: %d, want 200", code)
	}
}

// brokenBackuper writes the start of a backup and then fails, as a store
// whose disk fails in the middle of a backup.
type brokenBackuper struct{}

func (brokenBackuper) Backup(_ context.Context, w io.Writer, _ storage.BackupOptions) (storage.BackupInfo, error) {
	if _, err := w.Write(bytes.Repeat([]byte("x"), 4096)); err != nil {
		return storage.BackupInfo{}, err
	}
	return storage.BackupInfo{}, errors.New("read failed")
}

// TestBackupEndpointAbortsBrokenStream: a backup that fails after its
// stream started aborts the response, so a client sees an error rather
// than a clean end of a partial file.
func TestBackupEndpointAbortsBrokenStream(t *testing.T) {
	api := newConfigMapServer(t, Config{NonResourceHandlers: map[string]http.Handler{"/backup": BackupHandler(brokenBackuper{}, nil)}})
	ts := httptest.NewServer(api)
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/backup")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || err == nil {
		t.Fatalf("a backup broken after %d bytes: status %d, read error %v; want 200 and an error", n, resp.StatusCode, err)
	}
}

// unavailableBackuper fails before the stream starts, as a Badger store
// does while it recovers from a failed write (storage.ErrUnavailable).
type unavailableBackuper struct{}

func (unavailableBackuper) Backup(context.Context, io.Writer, storage.BackupOptions) (storage.BackupInfo, error) {
	return storage.BackupInfo{}, fmt.Errorf("backup: %w: reads wait for the store to reopen after a failed write", storage.ErrUnavailable)
}

// TestBackupEndpointUnavailable: a store that cannot serve a backup for now
// is a 503 the client may retry, as the registry answers
// storage.ErrUnavailable, not a 500.
func TestBackupEndpointUnavailable(t *testing.T) {
	api := newConfigMapServer(t, Config{NonResourceHandlers: map[string]http.Handler{"/backup": BackupHandler(unavailableBackuper{}, nil)}})
	ts := httptest.NewServer(api)
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/backup")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("backup of an unavailable store: %d %s, want 503", resp.StatusCode, body)
	}
}
