package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage/badger"
)

func keyLine(name string, b byte) string {
	return name + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) + "\n"
}

// TestParseEncryptionKeys: the key file's format and its errors.
func TestParseEncryptionKeys(t *testing.T) {
	enc, err := parseEncryptionKeys([]byte("# comment\n\n" + keyLine("key2", 2) + "  " + keyLine("key1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(enc.Keys) != 2 || enc.Keys[0].Name != "key2" || enc.Keys[1].Name != "key1" || enc.Keys[0].Secret[0] != 2 {
		t.Errorf("keys: %+v", enc.Keys)
	}
	if enc, err := parseEncryptionKeys([]byte("identity\n" + keyLine("key1", 1))); err != nil || enc.Keys[0].Name != "identity" || enc.Keys[0].Secret != nil {
		t.Errorf("identity: %+v, %v", enc, err)
	}
	for _, tc := range []struct{ file, want string }{
		{"", "no keys"},
		{"# only a comment\n", "no keys"},
		{"key1\n", "line 1: want NAME:BASE64"},
		{"\nkey1:not base64!\n", `line 2: key "key1" is not base64`},
		{"key1:" + base64.StdEncoding.EncodeToString([]byte("short")), `line 1: key "key1" has 5 bytes, want 32`},
	} {
		if _, err := parseEncryptionKeys([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.file, err, tc.want)
		}
	}
}

// TestEncryptionKeyFile: the quickstart's API with a key file seals
// secrets in Badger and serves them in the clear; restarted with a key
// file whose key1 is another key, it refuses to start, naming the key.
func TestEncryptionKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, []byte(keyLine("key1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	logger := slog.New(slog.DiscardHandler)
	start := func() (*apiserver.Server, error) {
		enc, err := loadEncryptionKeys(keyFile, logger)
		if err != nil {
			t.Fatal(err)
		}
		return newAPI(context.Background(), apiserver.Config{Storage: store, AllowAnonymous: true, Encryption: enc}, time.Hour, "v1")
	}
	api, err := start()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	const secret = "quickstart-secret-value"
	resp, err := http.Post(srv.URL+"/api/v1/namespaces/default/secrets", "application/json",
		strings.NewReader(`{"metadata":{"name":"db"},"stringData":{"password":"`+secret+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", resp.Status)
	}
	resp, err = http.Get(srv.URL + "/api/v1/namespaces/default/secrets/db")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Errorf("get: %s", body)
	}
	srv.Close()
	api.Close()
	kv, err := store.Get(context.Background(), []byte("/registry/core/secrets/default/db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(kv.Value, []byte("kapi:enc:aesgcm:v1:key1:")) || bytes.Contains(kv.Value, []byte(base64.StdEncoding.EncodeToString([]byte(secret)))) {
		t.Errorf("stored value is not sealed: %q", kv.Value)
	}

	if err := os.WriteFile(keyFile, []byte(keyLine("key1", 7)), 0o600); err != nil {
		t.Fatal(err)
	}
	if api, err := start(); err == nil {
		api.Close()
		t.Fatal("started with the wrong key")
	} else if !strings.Contains(err.Error(), `encryption key "key1" is not the key of that name that values were sealed with`) {
		t.Errorf("wrong key: %v", err)
	}
}
