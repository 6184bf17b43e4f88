package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

var widgetsGR = meta.GroupResource{Group: "example.dev", Resource: "widgets"}

// rawWidget reads widget name from storage as it is stored.
func rawWidget(t *testing.T, reg *Registry, name string) storage.KeyValue {
	t.Helper()
	kv, err := reg.Storage().Get(context.Background(), versionStore(t, reg, "v2").key("default", name), 0)
	if err != nil {
		t.Fatalf("raw %s: %v", name, err)
	}
	return kv
}

func storedIn(t *testing.T, kv storage.KeyValue) string {
	t.Helper()
	so, err := parseStored(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeObject(so.json)
	if err != nil {
		t.Fatal(err)
	}
	return obj["apiVersion"].(string)
}

// withoutRV is obj's JSON without metadata.resourceVersion.
func withoutRV(t *testing.T, obj map[string]any) string {
	t.Helper()
	md := shallowCopy(obj["metadata"].(map[string]any))
	delete(md, "resourceVersion")
	c := shallowCopy(obj)
	c["metadata"] = md
	b, err := encodeStored(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMigrateStoredRewritesIntoStorageVersion: an object stored in v1 is
// rewritten in v2 by a compare-and-swap that changes nothing but its
// stored version and resourceVersion; one already in v2 is left alone.
func TestMigrateStoredRewritesIntoStorageVersion(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"l":"1"},"annotations":{"n":"2"}},"spec":{"size":3,"color":"red"}}`),
		WriteOptions{FieldManager: "tester"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]any{"v1": getAs(t, reg, "v1", "a"), "v2": getAs(t, reg, "v2", "a")}
	if md := before["v1"]["metadata"].(map[string]any); md["managedFields"] == nil {
		t.Fatalf("no managedFields to check: %v", md)
	}
	kv := rawWidget(t, reg, "a")
	if _, err := reg.MigrateStored(ctx, widgetsGR, "v1", kv); !errors.Is(err, ErrStorageVersionChanged) {
		t.Errorf("migrating to a version that is not the storage version: %v", err)
	}
	wrote, err := reg.MigrateStored(ctx, widgetsGR, "v2", kv)
	if err != nil || !wrote {
		t.Fatalf("MigrateStored: %v, %v", wrote, err)
	}
	after := rawWidget(t, reg, "a")
	if got := storedIn(t, after); got != "example.dev/v2" || after.Revision <= kv.Revision {
		t.Errorf("after migration: stored in %s at %d (was %d)", got, after.Revision, kv.Revision)
	}
	for v, obj := range before {
		now := getAs(t, reg, v, "a")
		if now["metadata"].(map[string]any)["resourceVersion"] == obj["metadata"].(map[string]any)["resourceVersion"] {
			t.Errorf("through %s: the resourceVersion did not move", v)
		}
		if got, want := withoutRV(t, now), withoutRV(t, obj); got != want {
			t.Errorf("through %s the object changed:\n%s\nwant\n%s", v, got, want)
		}
	}
	// Already in v2: nothing to do, even from the stale listing.
	if wrote, err := reg.MigrateStored(ctx, widgetsGR, "v2", kv); err != nil || wrote {
		t.Errorf("MigrateStored of a migrated object: %v, %v", wrote, err)
	}
	if again := rawWidget(t, reg, "a"); again.Revision != after.Revision {
		t.Errorf("a migrated object was written again (%d → %d)", after.Revision, again.Revision)
	}
}

// TestMigrateStoredConflicts: a stale listing is re-read; a client's write
// since then wins, whether it already stored the object in v2 or deleted
// it.
func TestMigrateStoredConflicts(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"updated", "deleted", "raced"} {
		if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
			`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"`+name+`"},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stale := map[string]storage.KeyValue{}
	for _, name := range []string{"updated", "deleted", "raced"} {
		stale[name] = rawWidget(t, reg, name)
	}
	// "raced" is rewritten in v1 behind the migrator's back (as a write of
	// the v1 registration would have).
	if _, err := reg.Storage().Update(ctx, stale["raced"].Key, stale["raced"].Value, stale["raced"].Revision); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	obj := getAs(t, reg, "v2", "updated")
	spec(obj)["size"] = int64(7)
	if _, err := versionStore(t, reg, "v2").Update(ctx, "default", "updated", obj, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	written := rawWidget(t, reg, "updated")
	if _, err := versionStore(t, reg, "v1").Delete(ctx, "default", "deleted", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"updated": false, "deleted": false, "raced": true} {
		if wrote, err := reg.MigrateStored(ctx, widgetsGR, "v2", stale[name]); err != nil || wrote != want {
			t.Errorf("MigrateStored(%s): %v, %v; want %v", name, wrote, err, want)
		}
	}
	if now := rawWidget(t, reg, "updated"); now.Revision != written.Revision {
		t.Errorf("the client's update was overwritten (%d → %d)", written.Revision, now.Revision)
	}
	if got := storedIn(t, rawWidget(t, reg, "raced")); got != "example.dev/v2" {
		t.Errorf("raced stored in %s", got)
	}
	if spec(getAs(t, reg, "v2", "updated"))["size"] != float64(7) {
		t.Errorf("updated lost its update: %v", getAs(t, reg, "v2", "updated"))
	}
}

// TestCompleteMigration: StoredVersions becomes the storage version alone,
// only for the current storage version; then the old version may go.
func TestCompleteMigration(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	ms, err := reg.StorageMigrations(ctx)
	if err != nil || len(ms) != 1 || !ms[0].Pending() || ms[0].StorageVersion != "v2" || strings.Join(ms[0].StoredVersions, ",") != "v1,v2" {
		t.Fatalf("StorageMigrations: %+v, %v", ms, err)
	}
	if err := reg.CompleteMigration(t.Context(), widgetsGR, "v1"); !errors.Is(err, ErrStorageVersionChanged) {
		t.Errorf("completing a migration to a former storage version: %v", err)
	}
	if err := reg.CompleteMigration(t.Context(), widgetsGR, "v2"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := reg.StorageMigrations(ctx); ms[0].Pending() || strings.Join(ms[0].StoredVersions, ",") != "v2" {
		t.Errorf("after completion: %+v", ms)
	}
	def := verWidgets(t, "v2")
	def.Versions = def.Versions[1:]
	def.Conversion = Conversion{None: true}
	if err := reg.RegisterVersions(def); err != nil {
		t.Errorf("removing v1 after the migration: %v", err)
	}
}

// TestRetiredRegistrationRefusesWrites: a write through a store of the
// registration before a storage version change is a 409 and writes
// nothing, so that nothing lands in the old version behind a migration.
func TestRetiredRegistrationRefusesWrites(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	old := versionStore(t, reg, "v1")
	if _, err := old.Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same storage version again: the old stores keep writing.
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	obj := getAs(t, reg, "v1", "a")
	spec(obj)["size"] = int64(2)
	if _, err := old.Update(ctx, "default", "a", obj, WriteOptions{}); err != nil {
		t.Fatalf("update through a replaced registration with the same storage version: %v", err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	before := rawWidget(t, reg, "a")
	obj = getAs(t, reg, "v1", "a")
	spec(obj)["size"] = int64(3)
	_, err := old.Update(ctx, "default", "a", obj, WriteOptions{})
	const want = `Operation cannot be fulfilled on widgets.example.dev "%s": the storage version of the type changed while the request was served; please try again`
	wantStatus(t, "update through the old registration", err, 409, fmt.Sprintf(want, "a"))
	_, err = old.Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1}}`), WriteOptions{})
	wantStatus(t, "create through the old registration", err, 409, fmt.Sprintf(want, "b"))
	if now := rawWidget(t, reg, "a"); now.Revision != before.Revision {
		t.Error("the refused update was written")
	}
	if _, err := reg.Storage().Get(ctx, old.key("default", "b"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the refused create was written: %v", err)
	}
	// Through the new registration, the same update works.
	if _, err := versionStore(t, reg, "v1").Update(ctx, "default", "a", obj, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestUnregisteredVersionsRefuseWrites: a write through a store of a type
// that was unregistered (UnregisterVersions) and then registered again with
// another storage version is refused as after a direct change of the
// storage version: otherwise a request that resolved its store before the
// unregistration writes in the old version behind the migration to the new
// one, which then completes (StoredVersions [v2]) over an object still
// stored in v1.
func TestUnregisteredVersionsRefuseWrites(t *testing.T) {
	ctx := context.Background()
	reg := newVersionsRegistry(t)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	old := versionStore(t, reg, "v1")
	if err := reg.UnregisterVersions(widgetsGR); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	_, err := old.Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":1}}`), WriteOptions{})
	const want = `Operation cannot be fulfilled on widgets.example.dev "%s": the storage version of the type changed while the request was served; please try again`
	wantStatus(t, "create through the unregistered registration", err, 409, fmt.Sprintf(want, "b"))
	if kv, err := reg.Storage().Get(ctx, old.key("default", "b"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the refused create was written (stored in %s): %v", storedIn(t, kv), err)
	}
}

// A stored value the registry cannot read (a sealed value that does not
// open) is a per-object ConversionError for the migration, which counts it
// and goes on, not an error that stops the pass on that page.
func TestMigrateStoredUnreadableValue(t *testing.T) {
	ctx := context.Background()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg, err := New(Config{Storage: store, Encryption: &Encryption{Resources: []meta.GroupResource{widgetsGR}, Keys: []EncryptionKey{testKey("key1", 1)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if err := reg.RegisterVersions(verWidgets(t, "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := versionStore(t, reg, "v1").Create(ctx, "default", mustObject(t,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":3,"color":"red"}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	key := append(reg.ResourcePrefix("example.dev", "widgets", "default"), 'a')
	kv, err := store.Get(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(kv.Value)
	tampered[len(tampered)-1] ^= 1
	if _, err := store.Update(ctx, key, tampered, kv.Revision); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterVersions(verWidgets(t, "v2")); err != nil {
		t.Fatal(err)
	}
	var conv *ConversionError
	if _, err := reg.MigrateStored(ctx, widgetsGR, "v2", storage.KeyValue{Key: key}); !errors.As(err, &conv) {
		t.Fatalf("migrating an unreadable value: %v, want a *ConversionError", err)
	}
}
