package registry

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// benchSecrets returns the secrets store of a registry over an in-memory
// Badger store, with encryption at rest or without.
func benchSecrets(b *testing.B, sealed bool) *Store {
	b.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	var enc *Encryption
	if sealed {
		enc = &Encryption{Keys: []EncryptionKey{testKey("key1", 1)}}
	}
	reg, err := New(Config{Storage: store, Encryption: enc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.Close)
	if err := reg.Register(Secrets()); err != nil {
		b.Fatal(err)
	}
	st, _ := reg.Store(meta.GroupVersionResource{Version: "v1", Resource: "secrets"})
	return st
}

// benchSecretBody is a secret with 2 KiB of data.
func benchSecretBody(name string) string {
	return `{"metadata":{"name":"` + name + `"},"data":{"tls.key":"` + b64(strings.Repeat("k", 2048)) + `"}}`
}

// BenchmarkSecretGet is a get of a 2 KiB secret from storage, sealed
// (opened on the way out) and plain:
//
//	go test ./apiserver/registry/ -run '^$' -bench 'BenchmarkSecret' -benchmem
func BenchmarkSecretGet(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "sealed"}[sealed], func(b *testing.B) {
			st := benchSecrets(b, sealed)
			ctx := context.Background()
			if _, err := st.Create(ctx, "ns1", mustObjectB(b, benchSecretBody("s1")), WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Get(ctx, "ns1", "s1", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSecretCreate is a create of a 2 KiB secret, sealed and plain.
func BenchmarkSecretCreate(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "sealed"}[sealed], func(b *testing.B) {
			st := benchSecrets(b, sealed)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				b.StopTimer()
				obj := mustObjectB(b, benchSecretBody("s"+strconv.Itoa(i)))
				b.StartTimer()
				if _, err := st.Create(ctx, "ns1", obj, WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustObjectB(b *testing.B, js string) Object {
	b.Helper()
	obj, err := decodeObject([]byte(js))
	if err != nil {
		b.Fatal(err)
	}
	return obj
}
