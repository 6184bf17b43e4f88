package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/controllers"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

var secrets = meta.GroupVersionResource{Version: "v1", Resource: "secrets"}

// encryptedRegistry returns a registry over store with encryption under
// keys, serving namespaces and secrets.
func encryptedRegistry(t *testing.T, store storage.Store, keys ...registry.EncryptionKey) *registry.Registry {
	t.Helper()
	reg, err := registry.New(registry.Config{Storage: store, Encryption: &registry.Encryption{Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	for _, res := range []registry.Resource{registry.Namespaces(), registry.Secrets()} {
		if err := reg.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func key(name string, b byte) registry.EncryptionKey {
	return registry.EncryptionKey{Name: name, Secret: bytes.Repeat([]byte{b}, 32)}
}

// sealedUnder counts the stored secrets by the key they are sealed under.
func sealedUnder(t *testing.T, store storage.Store) map[string]int {
	t.Helper()
	page, err := store.List(context.Background(), storage.ListOptions{Prefix: []byte("/registry/core/secrets/")})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, kv := range page.Items {
		name, _ := registry.SealedKeyName(kv.Value)
		out[name]++
	}
	return out
}

// TestResealController: after a restart with a new first key, the
// controllers reseal every secret under it on their own (the garbage
// collector reading the same storage meanwhile), report it in
// Controllers.Reseal and in metrics, and a value that cannot be opened
// fails the pass with a count of it.
func TestResealController(t *testing.T) {
	store, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := encryptedRegistry(t, store, key("key1", 1))
	const n = 30
	nss, _ := reg.Store(namespaces)
	if _, err := nss.Create(context.Background(), "", registry.Object{"metadata": map[string]any{"name": "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ := reg.Store(secrets)
	for i := range n {
		obj := registry.Object{"metadata": map[string]any{"name": fmt.Sprintf("s%d", i)}, "stringData": map[string]any{"k": "v"}}
		if _, err := st.Create(context.Background(), "default", obj, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reg.Close()
	if got := sealedUnder(t, store); got["key1"] != n {
		t.Fatalf("before: %v", got)
	}

	reg = encryptedRegistry(t, store, key("key2", 2), key("key1", 1))
	metrics := prometheus.NewRegistry()
	c, err := controllers.New(reg, controllers.Config{Metrics: metrics, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	f := &fixture{metrics: metrics}
	eventually(t, "a complete reseal pass", func() bool { return !c.Reseal().CompletedAt.IsZero() })
	s := c.Reseal()
	if !s.Enabled || s.WriteKey != "key2" || s.Last.Resealed != n || s.Last.Failed != 0 || s.LastError != "" {
		t.Errorf("status: %+v", s)
	}
	if got := sealedUnder(t, store); got["key2"] != n {
		t.Errorf("after: %v, want all %d under key2", got, n)
	}
	if v, _ := f.value(t, "kapi_encryption_values_resealed_total", ""); v != n {
		t.Errorf("kapi_encryption_values_resealed_total = %v, want %d", v, n)
	}
	stop()

	// A value changed in storage: the next pass cannot open it.
	kv, err := store.Get(context.Background(), []byte("/registry/core/secrets/default/s7"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.Value[len(kv.Value)-1] ^= 1
	if _, err := store.Update(context.Background(), kv.Key, kv.Value, kv.Revision); err != nil {
		t.Fatal(err)
	}
	reg = encryptedRegistry(t, store, key("key3", 3), key("key2", 2))
	metrics = prometheus.NewRegistry()
	c, err = controllers.New(reg, controllers.Config{Metrics: metrics, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { defer close(done2); c.Run(ctx2) }()
	defer func() { cancel2(); <-done2 }()
	f = &fixture{metrics: metrics}
	eventually(t, "a failed reseal pass", func() bool { return c.Reseal().Passes > 0 })
	s = c.Reseal()
	if s.Last.Failed != 1 || s.Last.Resealed != n-1 || !strings.Contains(s.LastError, "1 values could not be opened") || !s.CompletedAt.IsZero() {
		t.Errorf("status with a changed value: %+v", s)
	}
	if v, _ := f.value(t, "kapi_encryption_values_unopenable", ""); v != 1 {
		t.Errorf("kapi_encryption_values_unopenable = %v, want 1", v)
	}
	if got := sealedUnder(t, store); got["key3"] != n-1 || got["key2"] != 1 {
		t.Errorf("after the failed pass: %v", got)
	}
}
