package controllers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/controllers"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Gadgets are served in v1 (spec.color) and v2 (spec.paint.color), hub v1.
var gadgetsGR = meta.GroupResource{Group: "example.dev", Resource: "gadgets"}

func gadgetsIn(v string) meta.GroupVersionResource {
	return meta.GroupVersionResource{Group: gadgetsGR.Group, Version: v, Resource: gadgetsGR.Resource}
}

// gadgets is the gadget type in versions (v1 and v2, or fewer), stored in
// storage; fail, when set, fails the conversion of an object to v2.
func gadgets(storage string, fail func(registry.Object) error, versions ...string) registry.Versions {
	def := registry.Versions{Storage: storage}
	for _, v := range versions {
		def.Versions = append(def.Versions, registry.Resource{Group: gadgetsGR.Group, Version: v, Resource: gadgetsGR.Resource,
			Kind: "Gadget", Namespaced: true, Schema: &schema.Schema{Type: schema.TypeObject, XPreserveUnknownFields: true}})
	}
	if len(versions) == 1 {
		def.Conversion = registry.Conversion{None: true}
		return def
	}
	def.Conversion = registry.Conversion{Hub: "v1", Spokes: map[string]registry.Spoke{"v2": {
		ToHub: func(obj registry.Object) (registry.Object, error) {
			spec, _ := obj["spec"].(map[string]any)
			if paint, ok := spec["paint"].(map[string]any); ok {
				spec["color"] = paint["color"]
				delete(spec, "paint")
			}
			return obj, nil
		},
		FromHub: func(obj registry.Object) (registry.Object, error) {
			if fail != nil {
				if err := fail(obj); err != nil {
					return nil, err
				}
			}
			spec, _ := obj["spec"].(map[string]any)
			if c, ok := spec["color"]; ok {
				spec["paint"] = map[string]any{"color": c}
				delete(spec, "color")
			}
			return obj, nil
		},
	}}}
	return def
}

// gadget is a gadget named name in version v with its size and color.
func gadget(v, name string, size int, color string) registry.Object {
	spec := map[string]any{"size": int64(size), "color": color}
	if v == "v2" {
		spec = map[string]any{"size": int64(size), "paint": map[string]any{"color": color}}
	}
	return registry.Object{"apiVersion": "example.dev/" + v, "kind": "Gadget", "metadata": map[string]any{"name": name}, "spec": spec}
}

// openBadger opens (or reopens) a Badger store in dir, with a registry
// serving namespaces ("default" in it).
func openBadger(t *testing.T, dir string) (storage.Store, *registry.Registry) {
	t.Helper()
	store, err := badger.Open(badger.DefaultOptions(dir).WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store, newRegistry(t, store, false)
}

// newControllers returns controllers of reg with metrics, not running.
func newControllers(t *testing.T, reg *registry.Registry, rate float64) (*controllers.Controllers, *fixture) {
	t.Helper()
	f := &fixture{metrics: prometheus.NewRegistry()}
	c, err := controllers.New(reg, controllers.Config{Metrics: f.metrics, Retry: 100 * time.Millisecond, MigrationRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

// start runs c until the returned stop is called (or the test ends).
func start(t *testing.T, c *controllers.Controllers) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitFor waits up to a minute for cond (a migration of thousands of
// objects on a busy machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// migrationOf returns the migration status of gadgets.
func migrationOf(t *testing.T, c *controllers.Controllers) controllers.MigrationStatus {
	t.Helper()
	ms, err := c.Migrations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Group == gadgetsGR.Group && m.Resource == gadgetsGR.Resource {
			return m
		}
	}
	t.Fatalf("no migration status for gadgets in %+v", ms)
	return controllers.MigrationStatus{}
}

// storm is writers creating and updating gadgets through both versions,
// each on gadgets of its own, remembering what each acknowledged write
// left and the one write whose outcome it does not know (the one that
// failed and stopped it).
type storm struct {
	mu      sync.Mutex
	acked   map[string]int // name → size of its last acknowledged write
	pending map[string]int // name → size of a write that failed otherwise than by a conflict
	writes  int
}

// run runs writers writers on reg until ctx ends or a write fails; each
// updates the gadgets it owns (names in owned) and creates new ones,
// prefixed with round.
func (s *storm) run(ctx context.Context, reg *registry.Registry, writers int, owned []string, round string) {
	var wg sync.WaitGroup
	for w := range writers {
		v := []string{"v1", "v2"}[w%2]
		var mine []string
		for i, name := range owned {
			if i%writers == w {
				mine = append(mine, name)
			}
		}
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name, create := "", i%4 == 0
				if create || len(mine) == 0 {
					name, create = fmt.Sprintf("%s-w%d-%d", round, w, i), true
				} else {
					name = mine[i%len(mine)]
				}
				size := i + 1
				err := writeGadget(ctx, reg, v, name, size, create)
				s.mu.Lock()
				switch {
				case err == nil:
					s.acked[name] = size
					delete(s.pending, name)
					s.writes++
				case meta.ReasonOf(err) == meta.StatusReasonConflict:
				default:
					s.pending[name] = size
				}
				s.mu.Unlock()
				if err != nil && meta.ReasonOf(err) != meta.StatusReasonConflict {
					return // storage closed, or the test ends
				}
				time.Sleep(time.Millisecond) // a storm, not a siege of a two-core machine
			}
		})
	}
	wg.Wait()
}

// writeGadget creates gadget name, or sets its size through version v
// (keeping its color).
func writeGadget(ctx context.Context, reg *registry.Registry, v, name string, size int, create bool) error {
	st, ok := reg.Store(gadgetsIn(v))
	if !ok {
		return fmt.Errorf("%s gadgets not served", v)
	}
	if create {
		_, err := st.Create(ctx, "default", gadget(v, name, size, "c-"+name), registry.WriteOptions{})
		return err
	}
	obj, err := st.GetObject(ctx, "default", name)
	if err != nil {
		return err
	}
	obj["spec"].(map[string]any)["size"] = int64(size)
	_, err = st.Update(ctx, "default", name, obj, registry.WriteOptions{})
	return err
}

// TestMigrationUnderWriteStormResumesAfterRestart: a storage version change
// from v1 to v2 of 3000 gadgets, with writers creating and updating them
// through both versions all along; the server is stopped in the middle of
// the migration and its Badger reopened; the migration resumes after the
// key it recorded, completes, and every gadget is stored in v2 with what
// its last acknowledged write left. v1 can be removed only then.
func TestMigrationUnderWriteStormResumesAfterRestart(t *testing.T) {
	const total, writers = 3000, 6
	ctx := context.Background()
	dir := t.TempDir()
	store, reg := openBadger(t, dir)
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	s := &storm{acked: map[string]int{}, pending: map[string]int{}}
	var names, updated []string // all gadgets; the tenth the writers update
	{
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := w; i < total; i += writers {
					if err := writeGadget(ctx, reg, "v1", fmt.Sprintf("g%04d", i), 0, true); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range total {
			names = append(names, fmt.Sprintf("g%04d", i))
			s.acked[names[i]] = 0
			if i%10 == 0 {
				updated = append(updated, names[i])
			}
		}
	}

	// The storage version changes while the controllers and the writers
	// run; the server stops in the middle of the migration.
	c, f := newControllers(t, reg, 1000)
	stopControllers := start(t, c)
	wctx, stopWriters := context.WithCancel(ctx)
	stormDone := make(chan struct{})
	go func() { defer close(stormDone); s.run(wctx, reg, writers, updated, "r1") }()
	if err := reg.RegisterVersions(gadgets("v2", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a third of the gadgets migrated", func() bool { return migrationOf(t, c).Migrated >= total/3 })
	stopControllers()
	if m := migrationOf(t, c); m.Complete {
		t.Fatalf("the migration completed before the stop: %+v", m)
	}
	firstRun, _ := f.value(t, "kapi_storage_migration_objects_migrated_total", "")
	reg.Close()
	store.Close() // the writers' next writes fail
	<-stormDone
	stopWriters()
	if s.writes < writers {
		t.Fatalf("only %d writes were acknowledged during the migration", s.writes)
	}

	// Reopened: v1 may still hold objects, so it cannot go yet.
	store, reg = openBadger(t, dir)
	if err := reg.RegisterVersions(gadgets("v2", nil, "v2")); err == nil || !strings.Contains(err.Error(), "may still be stored in version v1") {
		t.Fatalf("removing v1 before the migration completed: %v", err)
	}
	if err := reg.RegisterVersions(gadgets("v2", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	c, f = newControllers(t, reg, 1000)
	recorded := migrationOf(t, c)
	if recorded.Complete || recorded.Running || recorded.LastKey == "" || recorded.Migrated < total/4 || float64(recorded.Migrated) > firstRun {
		t.Fatalf("recorded progress after the stop: %+v (the first run migrated %v)", recorded, firstRun)
	}
	stopControllers = start(t, c)
	wctx, stopWriters = context.WithCancel(ctx)
	stormDone = make(chan struct{})
	go func() { defer close(stormDone); s.run(wctx, reg, writers, updated, "r2") }()
	var done controllers.MigrationStatus // as the controller that ran it says
	waitFor(t, "the migration completed", func() bool { done = migrationOf(t, c); return done.Complete })
	stopWriters()
	<-stormDone
	stopControllers()

	// It resumed after the recorded key, and counted on from there.
	if done.ResumedAfter != recorded.LastKey {
		t.Errorf("the pass after the restart started after %q, want the recorded %q", done.ResumedAfter, recorded.LastKey)
	}
	second, _ := f.value(t, "kapi_storage_migration_objects_migrated_total", "")
	if done.Migrated != recorded.Migrated+int64(second) || second == 0 {
		t.Errorf("migrated %d in all, %d recorded before the restart and %v after it", done.Migrated, recorded.Migrated, second)
	}
	if completed, _ := f.value(t, "kapi_storage_migrations_completed_total", ""); completed != 1 {
		t.Errorf("kapi_storage_migrations_completed_total %v, want 1", completed)
	}
	if strings.Join(done.StoredVersions, ",") != "v2" {
		t.Errorf("stored versions after the migration: %v", done.StoredVersions)
	}

	// Every gadget is stored in v2, with its last acknowledged write (or
	// the one write whose outcome was not known) and its color.
	page, err := store.List(ctx, storage.ListOptions{Prefix: reg.ResourcePrefix(gadgetsGR.Group, gadgetsGR.Resource, "")})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(page.Items)) <= done.Scanned {
		t.Errorf("the pass after the restart looked at %d objects of %d: it started from the start", done.Scanned, len(page.Items))
	}
	seen := map[string]bool{}
	for _, kv := range page.Items {
		js, err := registry.StoredJSON(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(js, []byte(`{"apiVersion":"example.dev/v2",`)) {
			t.Errorf("%s is stored as %.60s", kv.Key, js)
			continue
		}
		obj, err := decodeObject(js)
		if err != nil {
			t.Fatal(err)
		}
		name := obj["metadata"].(map[string]any)["name"].(string)
		seen[name] = true
		spec := obj["spec"].(map[string]any)
		size := int(spec["size"].(float64))
		acked, isAcked := s.acked[name]
		pending, isPending := s.pending[name]
		if !(isAcked && size == acked) && !(isPending && size == pending) {
			t.Errorf("%s has size %d; acknowledged %d (%v), unknown outcome %d (%v)", name, size, acked, isAcked, pending, isPending)
		}
		if color, _ := spec["paint"].(map[string]any)["color"].(string); color != "c-"+name || spec["color"] != nil {
			t.Errorf("%s lost its color: %v", name, spec)
		}
	}
	for name := range s.acked {
		if !seen[name] {
			t.Errorf("%s, acknowledged, is gone", name)
		}
	}
	if t.Failed() {
		return
	}
	// Now v1 can go.
	if err := reg.RegisterVersions(gadgets("v2", nil, "v2")); err != nil {
		t.Errorf("removing v1 after the migration: %v", err)
	}
	t.Logf("%d objects, %d acknowledged writes during the migration; %d migrated before the stop, %v after", len(page.Items), s.writes, recorded.Migrated, second)
}

// createGadgets creates n gadgets through v1, named g000...
func createGadgets(t *testing.T, reg *registry.Registry, n int, color func(i int) string) {
	t.Helper()
	for i := range n {
		if err := writeGadget(context.Background(), reg, "v1", fmt.Sprintf("g%03d", i), i, true); err != nil {
			t.Fatal(err)
		}
		if color != nil {
			st, _ := reg.Store(gadgetsIn("v1"))
			obj := gadget("v1", fmt.Sprintf("g%03d", i), i, color(i))
			cur, err := st.GetObject(context.Background(), "default", fmt.Sprintf("g%03d", i))
			if err != nil {
				t.Fatal(err)
			}
			obj["metadata"] = cur["metadata"]
			if _, err := st.Update(context.Background(), "default", fmt.Sprintf("g%03d", i), obj, registry.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// storedVersions counts the gadgets in storage by the apiVersion they are
// stored in.
func storedVersions(t *testing.T, reg *registry.Registry) map[string]int {
	t.Helper()
	page, err := reg.Storage().List(context.Background(), storage.ListOptions{Prefix: reg.ResourcePrefix(gadgetsGR.Group, gadgetsGR.Resource, "")})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, kv := range page.Items {
		js, err := registry.StoredJSON(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeObject(js)
		if err != nil {
			t.Fatal(err)
		}
		out[obj["apiVersion"].(string)]++
	}
	return out
}

// TestMigrationThrottled: the rewrites take tokens of a limiter of
// Config.MigrationRate objects a second (burst 1), shared by every type:
// however long the test runs, no more than 1 + rate × elapsed objects are
// migrated, and the migration goes on meanwhile.
func TestMigrationThrottled(t *testing.T) {
	const n, rate = 200, 20
	reg := newRegistry(t, nil, false)
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	createGadgets(t, reg, n, nil)
	begin := time.Now() // before the limiter exists
	c, f := newControllers(t, reg, rate)
	start(t, c)
	if err := reg.RegisterVersions(gadgets("v2", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	f.atLeast(t, "a first object migrated", 1, "kapi_storage_migration_objects_migrated_total", "")
	time.Sleep(300 * time.Millisecond)
	migrated, _ := f.value(t, "kapi_storage_migration_objects_migrated_total", "")
	inV2 := storedVersions(t, reg)["example.dev/v2"] // the migration's writes only, at least those counted
	m := migrationOf(t, c)
	elapsed := time.Since(begin)
	if limit := 1 + rate*elapsed.Seconds(); float64(inV2) > limit || migrated > float64(inV2) {
		t.Errorf("%d objects stored in v2 (%v counted) in %v: more than the limiter's %v", inV2, migrated, elapsed, limit)
	}
	if limitBelow(n, rate, elapsed) && (m.Complete || !m.Running) {
		t.Errorf("the throttled migration is not under way: %+v", m)
	}
	if running, _ := f.value(t, "kapi_storage_migrations_running", ""); running != 1 {
		t.Errorf("kapi_storage_migrations_running %v, want 1", running)
	}
}

// limitBelow reports whether the limiter cannot have let n objects through
// in elapsed.
func limitBelow(n int, rate float64, elapsed time.Duration) bool {
	return 1+rate*elapsed.Seconds() < float64(n)
}

// TestMigrationConversionFailureRetried: an object that cannot be converted
// is counted and keeps the migration from completing (v1 cannot go); the
// others are migrated; once the host fixes the conversion, a retry
// completes it.
func TestMigrationConversionFailureRetried(t *testing.T) {
	reg := newRegistry(t, nil, false)
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	createGadgets(t, reg, 20, func(i int) string {
		if i == 7 {
			return "bad"
		}
		return "red"
	})
	failBad := func(obj registry.Object) error {
		if obj["spec"].(map[string]any)["color"] == "bad" {
			return errors.New("bad is no color")
		}
		return nil
	}
	c, f := newControllers(t, reg, 1000)
	start(t, c)
	if err := reg.RegisterVersions(gadgets("v2", failBad, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	f.atLeast(t, "the failure counted twice (retried)", 2, "kapi_storage_migration_object_failures_total", "")
	m := migrationOf(t, c)
	if m.Complete || m.Failed != 1 || !strings.Contains(m.LastError, "1 objects could not be converted to v2") {
		t.Errorf("status with an object that cannot be converted: %+v", m)
	}
	if got := storedVersions(t, reg); got["example.dev/v2"] != 19 || got["example.dev/v1"] != 1 {
		t.Errorf("stored: %v, want 19 in v2 and the bad one in v1", got)
	}
	if err := reg.RegisterVersions(gadgets("v2", failBad, "v2")); err == nil {
		t.Error("v1 could be removed with an object still stored in it")
	}
	if err := reg.RegisterVersions(gadgets("v2", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the migration completed", func() bool { return migrationOf(t, c).Complete })
	if got := storedVersions(t, reg); got["example.dev/v2"] != 20 {
		t.Errorf("stored: %v, want all 20 in v2", got)
	}
	if m := migrationOf(t, c); m.Migrated != 20 || strings.Join(m.StoredVersions, ",") != "v2" {
		t.Errorf("after completion: %+v", m)
	}
}

// TestMigrationRetargets: a storage version changed back while a migration
// runs restarts it for the new target, which it completes.
func TestMigrationRetargets(t *testing.T) {
	reg := newRegistry(t, nil, false)
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	createGadgets(t, reg, 100, nil)
	c, f := newControllers(t, reg, 100)
	start(t, c)
	if err := reg.RegisterVersions(gadgets("v2", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	f.atLeast(t, "some migrated to v2", 5, "kapi_storage_migration_objects_migrated_total", "")
	if m := migrationOf(t, c); m.Complete {
		t.Fatalf("completed already: %+v", m)
	}
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1", "v2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the migration back to v1 completed", func() bool {
		m := migrationOf(t, c)
		return m.StorageVersion == "v1" && m.Complete
	})
	if got := storedVersions(t, reg); got["example.dev/v1"] != 100 {
		t.Errorf("stored: %v, want all 100 in v1", got)
	}
	if m := migrationOf(t, c); strings.Join(m.StoredVersions, ",") != "v1" || m.Migrated == 0 || m.Migrated > 100 {
		t.Errorf("after the migration back: %+v", m)
	}
	if err := reg.RegisterVersions(gadgets("v1", nil, "v1")); err != nil {
		t.Errorf("removing v2 after the migration back: %v", err)
	}
}
