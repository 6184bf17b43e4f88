package registry

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/storage/storagetest"
)

// testKey is a 32-byte key made of b.
func testKey(name string, b byte) EncryptionKey {
	return EncryptionKey{Name: name, Secret: bytes.Repeat([]byte{b}, 32)}
}

// encEnv is a registry over a Badger store on disk that tests restart with
// another encryption configuration, as a server restarted with another key
// file.
type encEnv struct {
	t     *testing.T
	dir   string
	store *badger.Store
	reg   *Registry
}

func newEncEnv(t *testing.T) *encEnv {
	t.Helper()
	e := &encEnv{t: t, dir: t.TempDir()}
	e.openStore()
	t.Cleanup(func() {
		if e.reg != nil {
			e.reg.Close()
		}
		e.store.Close()
	})
	return e
}

func (e *encEnv) openStore() {
	e.t.Helper()
	store, err := badger.Open(badger.DefaultOptions(e.dir).WithNoSync(true))
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = store
}

// start replaces the registry with a new one configured with enc; the
// error is New's.
func (e *encEnv) start(enc *Encryption) error {
	e.t.Helper()
	if e.reg != nil {
		e.reg.Close()
		e.reg = nil
	}
	reg, err := New(Config{Storage: e.store, Encryption: enc})
	if err != nil {
		return err
	}
	for _, res := range []Resource{Secrets(), ConfigMaps()} {
		if err := reg.Register(res); err != nil {
			e.t.Fatal(err)
		}
	}
	e.reg = reg
	return nil
}

func (e *encEnv) mustStart(enc *Encryption) {
	e.t.Helper()
	if err := e.start(enc); err != nil {
		e.t.Fatal(err)
	}
}

func (e *encEnv) secrets() *Store {
	st, _ := e.reg.Store(meta.GroupVersionResource{Version: "v1", Resource: "secrets"})
	return st
}

func (e *encEnv) createSecret(name, data string) {
	e.t.Helper()
	obj := mustObject(e.t, `{"metadata":{"name":"`+name+`"},"data":{"token":"`+b64(data)+`"}}`)
	if _, err := e.secrets().Create(context.Background(), "ns1", obj, WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// checkSecret reads a secret through the API's store.
func (e *encEnv) checkSecret(name, data string) {
	e.t.Helper()
	obj, err := e.secrets().GetObject(context.Background(), "ns1", name)
	if err != nil {
		e.t.Fatalf("reading secret %s: %v", name, err)
	}
	if got := obj["data"].(map[string]any)["token"]; got != b64(data) {
		e.t.Fatalf("secret %s: data.token %v, want %q", name, got, b64(data))
	}
}

// raw is the value of a secret as storage holds it.
func (e *encEnv) raw(name string) storage.KeyValue {
	e.t.Helper()
	kv, err := e.store.Get(context.Background(), []byte("/registry/core/secrets/ns1/"+name), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return kv
}

// sealedUnder returns the key name a secret is sealed under ("" for
// plaintext).
func (e *encEnv) sealedUnder(name string) string {
	e.t.Helper()
	kv := e.raw(name)
	key, sealed := SealedKeyName(kv.Value)
	if !sealed && kv.Value[0] != storedMagic {
		e.t.Fatalf("secret %s: raw value is neither sealed nor a stored object: %q", name, kv.Value)
	}
	return key
}

// filesContain reports whether a file of dir holds b.
func filesContain(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(data, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestEncryptionSealsSecrets: with encryption on, storage (its values and
// every file of the data directory) holds no plaintext of a secret, while
// gets, lists and Registry.Storage return it; other types stay plaintext.
// Without encryption the same check finds the secret in the files.
func TestEncryptionSealsSecrets(t *testing.T) {
	const data = "hunter2-correct-horse-battery"
	for _, encrypted := range []bool{true, false} {
		e := newEncEnv(t)
		var enc *Encryption
		if encrypted {
			enc = &Encryption{Keys: []EncryptionKey{testKey("key1", 1)}}
		}
		e.mustStart(enc)
		e.createSecret("s1", data)
		cm := mustObject(t, `{"metadata":{"name":"c1"},"data":{"k":"visible-configmap-value"}}`)
		cms, _ := e.reg.Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
		if _, err := cms.Create(context.Background(), "ns1", cm, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.checkSecret("s1", data)

		raw := e.raw("s1").Value
		if got := bytes.Contains(raw, []byte(b64(data))); got == encrypted {
			t.Errorf("encrypted=%v: raw value holds the secret's data: %v", encrypted, got)
		}
		if encrypted {
			if !bytes.HasPrefix(raw, []byte("kapi:enc:aesgcm:v1:key1:")) {
				t.Errorf("raw value does not start with the sealed prefix: %q", raw[:min(len(raw), 40)])
			}
			// Registry.Storage, what controllers read, opens it.
			kv, err := e.reg.Storage().Get(context.Background(), e.raw("s1").Key, 0)
			if err != nil || !bytes.Contains(kv.Value, []byte(b64(data))) {
				t.Errorf("Registry.Storage get: %q, %v", kv.Value, err)
			}
			page, err := e.reg.Storage().List(context.Background(), storage.ListOptions{Prefix: []byte("/registry/")})
			if err != nil {
				t.Fatal(err)
			}
			opened := 0
			for _, kv := range page.Items {
				if bytes.Contains(kv.Value, []byte(b64(data))) {
					opened++
				}
			}
			if opened != 1 {
				t.Errorf("a list of the whole registry shows the secret's data %d times, want 1", opened)
			}
		}
		if cmRaw, err := e.store.Get(context.Background(), []byte("/registry/core/configmaps/ns1/c1"), 0); err != nil || cmRaw.Value[0] != storedMagic {
			t.Errorf("configmap raw value: %q, %v; want plaintext", cmRaw.Value, err)
		}
		e.reg.Close()
		e.reg = nil
		e.store.Close()
		if got := filesContain(t, e.dir, []byte(b64(data))); got == encrypted {
			t.Errorf("encrypted=%v: the data directory's files hold the secret's data: %v", encrypted, got)
		}
		if !filesContain(t, e.dir, []byte("visible-configmap-value")) {
			t.Errorf("encrypted=%v: the configmap is not found in the files: the file check cannot see values", encrypted)
		}
		e.openStore()
	}
}

// TestEncryptionWatch: a watch of secrets through the registry (the watch
// cache over Registry.Storage) delivers plaintext.
func TestEncryptionWatch(t *testing.T) {
	e := newEncEnv(t)
	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key1", 1)}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs, err := e.reg.Storage().Watch(ctx, storage.WatchOptions{Prefix: []byte("/registry/")})
	if err != nil {
		t.Fatal(err)
	}
	e.createSecret("s1", "watched-value")
	if _, _, err := e.reg.Storage().Delete(ctx, e.raw("s1").Key, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []storage.EventType{storage.EventPut, storage.EventDelete} {
		ev := <-evs
		v := ev.Value
		if want == storage.EventDelete {
			v = ev.PrevValue
		}
		if ev.Type != want || !bytes.Contains(v, []byte(b64("watched-value"))) {
			t.Fatalf("event %v %s: %q, want %v with the plaintext", ev.Type, ev.Key, v, want)
		}
	}
}

// TestEncryptionRotation: a new key added first seals new writes, values
// under the old key still read, dropping the old key is refused while
// values are sealed under it, a reseal moves everything to the new key,
// after which the old key can go.
func TestEncryptionRotation(t *testing.T) {
	e := newEncEnv(t)
	key1, key2 := testKey("key1", 1), testKey("key2", 2)
	e.mustStart(&Encryption{Keys: []EncryptionKey{key1}})
	e.createSecret("s1", "one")
	e.createSecret("s2", "two")

	e.mustStart(&Encryption{Keys: []EncryptionKey{key1, key2}}) // step 1: key2 known, key1 still writes
	e.createSecret("s3", "three")
	if got := e.sealedUnder("s3"); got != "key1" {
		t.Fatalf("s3 sealed under %q, want key1", got)
	}
	e.mustStart(&Encryption{Keys: []EncryptionKey{key2, key1}}) // step 2: key2 writes
	e.createSecret("s4", "four")
	for name, want := range map[string]string{"s1": "key1", "s2": "key1", "s3": "key1", "s4": "key2"} {
		if got := e.sealedUnder(name); got != want {
			t.Errorf("%s sealed under %q, want %q", name, got, want)
		}
	}
	for name, data := range map[string]string{"s1": "one", "s2": "two", "s3": "three", "s4": "four"} {
		e.checkSecret(name, data)
	}

	err := e.start(&Encryption{Keys: []EncryptionKey{key2}}) // too early
	if err == nil || !strings.Contains(err.Error(), `3 stored values`) || !strings.Contains(err.Error(), `"key1", which is not configured`) {
		t.Fatalf("dropping key1 before the reseal: %v, want an error naming key1 and 3 values", err)
	}

	e.mustStart(&Encryption{Keys: []EncryptionKey{key2, key1}})
	var progress []ResealResult
	res, err := e.reg.Reseal(context.Background(), ResealOptions{Progress: func(r ResealResult) { progress = append(progress, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.WriteKey != "key2" || res.Scanned != 4 || res.Resealed != 3 || res.Failed != 0 || len(progress) == 0 {
		t.Fatalf("reseal: %+v (progress %v), want 4 scanned, 3 resealed under key2", res, progress)
	}
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		if got := e.sealedUnder(name); got != "key2" {
			t.Errorf("after the reseal %s is sealed under %q, want key2", name, got)
		}
	}
	if res, err := e.reg.Reseal(context.Background(), ResealOptions{}); err != nil || res.Resealed != 0 {
		t.Errorf("second reseal: %+v, %v; want nothing to do", res, err)
	}

	e.mustStart(&Encryption{Keys: []EncryptionKey{key2}}) // step 4: key1 removed
	for name, data := range map[string]string{"s1": "one", "s2": "two", "s3": "three", "s4": "four"} {
		e.checkSecret(name, data)
	}
}

// TestEncryptionStartupChecks: a configured key that is not the one values
// were sealed with, a sealed store opened without encryption, and a bad
// configuration all fail New with an error that names the problem.
func TestEncryptionStartupChecks(t *testing.T) {
	e := newEncEnv(t)
	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key1", 1)}})
	e.createSecret("s1", "one")

	for _, tc := range []struct {
		what string
		enc  *Encryption
		want string
	}{
		{"wrong key material", &Encryption{Keys: []EncryptionKey{testKey("key1", 9)}},
			`encryption key "key1" is not the key of that name that values were sealed with`},
		{"wrong second key", &Encryption{Keys: []EncryptionKey{testKey("key2", 2), testKey("key1", 9)}},
			`encryption key "key1" is not the key of that name`},
		{"key missing", &Encryption{Keys: []EncryptionKey{testKey("key2", 2)}},
			`1 stored values (the first /registry/core/secrets/ns1/s1) are sealed under encryption key "key1", which is not configured`},
		{"no encryption", nil, `sealed under encryption key "key1", which is not configured`},
		{"short key", &Encryption{Keys: []EncryptionKey{{Name: "key1", Secret: []byte("short")}}}, `encryption key "key1" has 5 bytes, want 32`},
		{"bad name", &Encryption{Keys: []EncryptionKey{testKey("key:1", 1)}}, `may only hold letters`},
		{"no keys", &Encryption{}, `Config.Encryption has no keys`},
		{"twice", &Encryption{Keys: []EncryptionKey{testKey("key1", 1), testKey("key1", 1)}}, `configured twice`},
	} {
		err := e.start(tc.enc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want an error with %q", tc.what, err, tc.want)
		}
	}
	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key1", 1)}}) // the right key still works
	e.checkSecret("s1", "one")
}

// TestEncryptionTamperedValue: a sealed value changed in storage, or
// moved to another object's key, is a 500 naming the object and the key,
// never garbage; the other secrets still read.
func TestEncryptionTamperedValue(t *testing.T) {
	e := newEncEnv(t)
	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key1", 1)}})
	e.createSecret("s1", "one")
	e.createSecret("s2", "two")
	e.createSecret("s3", "three")
	ctx := context.Background()

	kv := e.raw("s1")
	tampered := bytes.Clone(kv.Value)
	tampered[len(tampered)-20] ^= 1
	if _, err := e.store.Update(ctx, kv.Key, tampered, kv.Revision); err != nil {
		t.Fatal(err)
	}
	moved := e.raw("s3")
	if _, err := e.store.Update(ctx, e.raw("s2").Key, moved.Value, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s1", "s2"} {
		_, err := e.secrets().Get(ctx, "ns1", name, "")
		se := wantStatus(t, name, err, 500, "")
		for _, want := range []string{`secrets "` + name + `"`, `/registry/core/secrets/ns1/` + name, `encryption key "key1"`, "does not authenticate"} {
			if !strings.Contains(se.Status.Message, want) {
				t.Errorf("%s: message %q lacks %q", name, se.Status.Message, want)
			}
		}
	}
	e.checkSecret("s3", "three")

	// Every value names key1, the write key: a reseal has nothing to open.
	res, err := e.reg.Reseal(ctx, ResealOptions{})
	if err != nil || res.Resealed != 0 || res.Failed != 0 {
		t.Fatalf("reseal over values already under the write key: %+v, %v", res, err)
	}
	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key2", 2), testKey("key1", 1)}})
	res, err = e.reg.Reseal(ctx, ResealOptions{})
	if err == nil || res.Failed != 2 || res.Resealed != 1 {
		t.Errorf("reseal with two tampered values: %+v, %v; want 2 failed, 1 resealed and an error", res, err)
	}
}

// TestEncryptionPlaintextBefore: values written before encryption was
// turned on still read, are sealed when rewritten (by a client or a
// reseal), and an identity first key turns everything back into plaintext,
// after which encryption can be turned off.
func TestEncryptionPlaintextBefore(t *testing.T) {
	e := newEncEnv(t)
	ctx := context.Background()
	e.mustStart(nil)
	e.createSecret("s1", "one")
	e.createSecret("s2", "two")

	e.mustStart(&Encryption{Keys: []EncryptionKey{testKey("key1", 1)}})
	e.checkSecret("s1", "one")
	if got := e.sealedUnder("s1"); got != "" {
		t.Fatalf("s1 under %q before any rewrite, want plaintext", got)
	}
	obj, err := e.secrets().GetObject(ctx, "ns1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	obj["data"] = map[string]any{"token": b64("one again")}
	if _, err := e.secrets().Update(ctx, "ns1", "s1", obj, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.sealedUnder("s1"); got != "key1" {
		t.Errorf("s1 under %q after an update, want key1", got)
	}
	if got := e.sealedUnder("s2"); got != "" {
		t.Errorf("s2 under %q, want still plaintext", got)
	}
	res, err := e.reg.Reseal(ctx, ResealOptions{})
	if err != nil || res.Resealed != 1 {
		t.Fatalf("reseal: %+v, %v; want s2 resealed", res, err)
	}
	if got := e.sealedUnder("s2"); got != "key1" {
		t.Errorf("s2 under %q after the reseal, want key1", got)
	}

	// Turning encryption off: identity first, reseal, then no encryption.
	if err := e.start(nil); err == nil {
		t.Fatal("encryption turned off while values are sealed: New succeeded")
	}
	e.mustStart(&Encryption{Keys: []EncryptionKey{{Name: IdentityKey}, testKey("key1", 1)}})
	if res, err := e.reg.Reseal(ctx, ResealOptions{}); err != nil || res.Resealed != 2 {
		t.Fatalf("reseal to identity: %+v, %v", res, err)
	}
	for _, name := range []string{"s1", "s2"} {
		if got := e.sealedUnder(name); got != "" {
			t.Errorf("%s under %q after the reseal to identity, want plaintext", name, got)
		}
	}
	e.mustStart(nil)
	e.checkSecret("s1", "one again")
	e.checkSecret("s2", "two")
}

// TestSealedValueFormat: the additional data binds a value to its key name
// and storage key; the nonce differs for each value.
func TestSealedValueFormat(t *testing.T) {
	s, err := newSealer(&Encryption{Keys: []EncryptionKey{testKey("a", 1), testKey("b", 1)}}, func(meta.GroupResource) []byte { return []byte("/p/") })
	if err != nil {
		t.Fatal(err)
	}
	v1, _ := s.seal([]byte("/p/x"), []byte("plain"))
	v2, _ := s.seal([]byte("/p/x"), []byte("plain"))
	if bytes.Equal(v1, v2) {
		t.Error("two seals of one value are equal: the nonce repeats")
	}
	if p, name, err := s.open([]byte("/p/x"), v1); err != nil || string(p) != "plain" || name != "a" {
		t.Errorf("open: %q %q %v", p, name, err)
	}
	if _, _, err := s.open([]byte("/p/y"), v1); err == nil {
		t.Error("a value opened under another storage key")
	}
	// Same key material under another name: the name is authenticated.
	renamed := append([]byte("kapi:enc:aesgcm:v1:b:"), v1[len("kapi:enc:aesgcm:v1:a:"):]...)
	if _, _, err := s.open([]byte("/p/x"), renamed); err == nil {
		t.Error("a value opened under another key name")
	}
	if _, _, err := s.open([]byte("/p/x"), v1[:len(v1)-1]); err == nil {
		t.Error("a truncated value opened")
	}
}

// TestSealingStorageConformance runs the storage conformance suite on the
// sealing storage with every key sensitive: sealing keeps every promise of
// storage.Store (values, previous values, events, errors, paging).
func TestSealingStorageConformance(t *testing.T) {
	s, err := newSealer(&Encryption{Keys: []EncryptionKey{testKey("k", 1)}}, func(meta.GroupResource) []byte { return nil })
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Run(t, func(t *testing.T) storage.Store {
		st, err := badger.Open(badger.InMemoryOptions())
		if err != nil {
			t.Fatal(err)
		}
		return newSealingStorage(st, s)
	}, storagetest.WithStoredForm())
}
