package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// TestBackupSubcommands runs the quickstart over TLS with its admin token
// and encryption at rest, takes a full and an incremental backup with
// "quickstart backup" (through the kubeconfig and /backup), verifies them
// and restores them with "quickstart restore", to the latest revision and to
// the full backup's. The backups hold secrets sealed only.
func TestBackupSubcommands(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithMemTableSize(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := parseEncryptionKeys([]byte(keyLine("key1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := apiserver.Config{Storage: store, DisableControllers: true, Encryption: enc}
	tlsConfig, creds, err := secure(&cfg, options{dataDir: dir}, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	api, err := newAPI(ctx, cfg, time.Hour, "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	srv := &http.Server{Handler: api, TLSConfig: tlsConfig}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, ln.Addr().String(), creds); err != nil {
		t.Fatal(err)
	}
	server, client, token, err := loadKubeconfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	post := func(resource, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", server+"/api/v1/namespaces/default/"+resource, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %v %v", body, resp, err)
		}
		resp.Body.Close()
	}
	create := func(name string) {
		t.Helper()
		post("configmaps", fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"visible-value"}}`, name))
	}
	sub := func(args ...string) error {
		t.Helper()
		ok, err := runSubcommand(ctx, args)
		if !ok {
			t.Fatalf("%q is not a subcommand", args[0])
		}
		return err
	}

	create("a")
	create("b")
	const secret = "c2VjcmV0LXBsYWludGV4dA==" // "secret-plaintext"
	post("secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"`+secret+`"}}`)
	full, inc := filepath.Join(dir, "full.kbak"), filepath.Join(dir, "inc.kbak")
	if err := sub("backup", "--kubeconfig", kubeconfig, "--out", full); err != nil {
		t.Fatal(err)
	}
	f := verify(t, full)
	if b, _ := os.ReadFile(full); bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("secret-plaintext")) || !bytes.Contains(b, []byte("visible-value")) {
		t.Fatal("the backup holds the secret's value in plaintext (or not even the configmaps')")
	}
	create("c")
	if err := sub("backup", "--kubeconfig", kubeconfig, "--since", strconv.FormatInt(f.Revision, 10), "--out", inc); err != nil {
		t.Fatal(err)
	}
	if i := verify(t, inc); i.Since != f.Revision {
		t.Fatalf("incremental backup since %d, want %d", i.Since, f.Revision)
	}
	if err := sub("verify-backup", full, inc); err != nil {
		t.Fatal(err)
	}

	// A refused download leaves no file behind.
	bad := filepath.Join(dir, "bad.kbak")
	if err := sub("backup", "--kubeconfig", kubeconfig, "--since", "999999999", "--out", bad); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("backup since a future revision: %v", err)
	}
	if entries, _ := filepath.Glob(bad + "*"); len(entries) != 0 {
		t.Fatalf("a failed backup left %v", entries)
	}
	b, _ := os.ReadFile(full)
	if err := os.WriteFile(bad, b[:len(b)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sub("verify-backup", bad); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("verify-backup of a truncated backup: %v", err)
	}

	latest := filepath.Join(t.TempDir(), "latest")
	if err := sub("restore", "--data-dir", latest, full, inc); err != nil {
		t.Fatal(err)
	}
	if got := restoredNames(t, latest, enc); got != "[a b c]" {
		t.Fatalf("restored to the latest revision: %s", got)
	}
	if err := sub("restore", "--data-dir", latest, full, inc); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore over a restored directory: %v", err)
	}
	earlier := filepath.Join(t.TempDir(), "earlier")
	if err := sub("restore", "--data-dir", earlier, "--to-revision", strconv.FormatInt(f.Revision, 10), full, inc); err != nil {
		t.Fatal(err)
	}
	if got := restoredNames(t, earlier, enc); got != "[a b]" {
		t.Fatalf("restored to the full backup's revision: %s", got)
	}
}

func verify(t *testing.T, path string) (info struct{ Revision, Since int64 }) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bi, err := badger.VerifyBackup(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	info.Revision, info.Since = bi.Revision, bi.Since
	return info
}

// restoredNames serves a restored data directory with the encryption keys,
// checks that its secret opens, and lists its configmaps.
func restoredNames(t *testing.T, dataDir string, enc *registry.Encryption) string {
	t.Helper()
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dataDir, "db")).WithMemTableSize(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := newAPI(context.Background(), apiserver.Config{Storage: store, AllowAnonymous: true, DisableControllers: true, Encryption: enc}, time.Hour, "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ts := httptest.NewServer(api)
	defer ts.Close()
	sec, err := http.Get(ts.URL + "/api/v1/namespaces/default/secrets/s")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(sec.Body)
	sec.Body.Close()
	if sec.StatusCode != 200 || !bytes.Contains(b, []byte("c2VjcmV0LXBsYWludGV4dA==")) {
		t.Fatalf("the restored secret: %d %s", sec.StatusCode, b)
	}
	resp, err := http.Get(ts.URL + "/api/v1/namespaces/default/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct{ Metadata struct{ Name string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return fmt.Sprint(names)
}
