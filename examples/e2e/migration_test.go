package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The storage version of the quickstart's widgets changes from v1 to v2
// (--widget-storage-version) with thousands of widgets stored in v1, while
// a write storm through both versions goes on; the server is killed (kill
// -9) in the middle of the migration and started again on the same data.
// The migration completes, and nothing is lost: every widget holds its last
// acknowledged write, through v1 and v2, and every one is stored in v2.
func TestQuickstartMigrationKilled(t *testing.T) {
	t.Parallel()
	const (
		seeded    = 4200 // widgets stored in v1 before the change
		killAfter = 800  // objects the migration has rewritten when the server is killed
		// The storm writes about 6/pause times a second: a good share of
		// the widgets are rewritten by the migration, not by the storm.
		stormers = 6
		pause    = 25 * time.Millisecond
	)
	dataDir := t.TempDir()
	v1 := serverOptions{dataDir: dataDir, onDisk: true}
	v2 := serverOptions{dataDir: dataDir, onDisk: true, args: []string{"--widget-storage-version", "v2", "--migration-rate", "300"}}
	start := time.Now()

	s := startServerWith(t, v1)
	st := &storm{t: t, ns: "migrate"}
	if code, body := s.Do(t, http.MethodPost, "/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"migrate"}}`)); code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s", code, body)
	}
	st.cur.Store(endpointOf(s))

	// Widgets stored in v1, created through both versions.
	seeders := make([]*stormWorker, 12)
	for i := range seeders {
		seeders[i] = st.worker(i, "seed-"+strconv.Itoa(i))
	}
	runWorkers(seeders, func(w *stormWorker) {
		for range seeded / len(seeders) {
			w.create(t.Context())
		}
	})
	if st.failures.Load() > 0 {
		t.FailNow()
	}
	seedWrites := st.acked.Load()
	t.Logf("%d widgets created in %s", seeded, time.Since(start).Round(time.Millisecond))
	wantStoredVersions(t, s, "v1")

	// The storm: each worker writes a share of the seeded widgets and
	// widgets of its own.
	workers := make([]*stormWorker, stormers)
	for i := range workers {
		workers[i] = st.worker(100+i, "storm-"+strconv.Itoa(i))
		workers[i].pause = pause
	}
	for i, w := range seeders {
		to := workers[i%len(workers)]
		to.own = append(to.own, w.own...)
	}
	// stop ends the storm; abort also gives up resolving lost answers, when
	// the test fails.
	ctx, abort := context.WithCancel(t.Context())
	stop, stopStorm := context.WithCancel(ctx)
	var storming sync.WaitGroup
	storming.Go(func() { runWorkers(workers, func(w *stormWorker) { w.run(ctx, stop) }) })
	defer func() { abort(); storming.Wait() }()
	time.Sleep(500 * time.Millisecond)

	// Restart storing v2: the migration starts; kill -9 in its middle.
	s.Stop(t, syscall.SIGTERM)
	s = startServerWith(t, v2)
	st.cur.Store(endpointOf(s))
	wantStoredVersions(t, s, "v1", "v2")
	migratedBeforeKill := waitMetric(t, s, "kapi_storage_migration_objects_migrated_total", killAfter, 30*time.Second)
	wantStoredVersions(t, s, "v1", "v2")
	s.Stop(t, syscall.SIGKILL)
	t.Logf("killed after %d objects migrated, %s in", int(migratedBeforeKill), time.Since(start).Round(time.Millisecond))

	// The same flags on the same data: the migration goes on and completes
	// while the storm writes.
	s = startServerWith(t, v2)
	st.cur.Store(endpointOf(s))
	if sv := storedVersions(t, s); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Fatalf("after the kill the stored versions are %q, want [v1 v2]: the migration was not killed in its middle", sv)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !slices.Equal(storedVersions(t, s), []string{"v2"}) {
		if time.Now().After(deadline) {
			t.Fatalf("the migration did not complete within 60s of the restart; stored versions %q", storedVersions(t, s))
		}
		time.Sleep(100 * time.Millisecond)
	}
	migratedAfterKill := metric(t, s, "kapi_storage_migration_objects_migrated_total")
	t.Logf("migration complete %s in; %d objects migrated after the restart", time.Since(start).Round(time.Millisecond), int(migratedAfterKill))
	if migratedAfterKill < killAfter {
		t.Errorf("the restarted server migrated %d objects, want at least %d: the storm, not the migration, rewrote the widgets", int(migratedAfterKill), killAfter)
	}
	time.Sleep(time.Second) // writes through both versions after the migration
	stopStorm()
	storming.Wait()
	stormWrites := st.acked.Load() - seedWrites
	t.Logf("storm: %d writes acknowledged, %d conflicts, %d answers lost to the restarts and resolved",
		stormWrites, st.conflicts.Load(), st.unknown.Load())
	if stormWrites < 500 {
		t.Errorf("only %d writes acknowledged during the storm", stormWrites)
	}

	want := map[string]widgetState{}
	for _, w := range workers {
		for _, rec := range w.own {
			want[rec.name] = rec.state
		}
	}
	checkWidgets(t, s, st, want)
	wantStoredVersions(t, s, "v2")
	if n := metric(t, s, "kapi_storage_migration_object_failures_total"); n != 0 {
		t.Errorf("kapi_storage_migration_object_failures_total %v, want 0", n)
	}
	if n := metric(t, s, "kapi_storage_migrations_completed_total"); n != 1 {
		t.Errorf("kapi_storage_migrations_completed_total %v, want 1", n)
	}

	if n := st.failures.Load(); n > 20 {
		t.Errorf("%d failures in all, the first 20 reported", n)
	}

	if err := s.Stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("quickstart exit after SIGTERM: %v", err)
	}
	checkStoredInV2(t, dataDir, st.ns, len(want))
}

// checkWidgets checks that the widgets of the storm's namespace are
// exactly want, through a list and a get in each version.
func checkWidgets(t *testing.T, s *server, st *storm, want map[string]widgetState) {
	t.Helper()
	ns := st.ns
	for _, v := range []string{"v1", "v2"} {
		code, body := s.Do(t, http.MethodGet, widgetsPath(ns, v), nil)
		if code != http.StatusOK {
			t.Fatalf("list %s widgets: %d %.300s", v, code, body)
		}
		var list struct{ Items []widgetJSON }
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("list %s widgets: %v", v, err)
		}
		got := map[string]bool{}
		for _, o := range list.Items {
			name := o.Metadata.Name
			got[name] = true
			state, err := o.state(v)
			w, ok := want[name]
			switch {
			case err != nil:
				st.fail("list %s: %v", v, err)
			case !ok:
				st.fail("list %s: widget %s was never acknowledged: %v", v, name, state)
			case !state.equal(w):
				st.fail("list %s: %s holds %v, its last acknowledged write is %v", v, name, state, w)
			}
		}
		for name := range want {
			if !got[name] {
				st.fail("list %s: acknowledged widget %s is missing", v, name)
			}
		}
	}
	names := make(chan string)
	ep := endpointOf(s)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				for _, v := range []string{"v1", "v2"} {
					code, body, err := ep.call(t.Context(), http.MethodGet, widgetsPath(ns, v)+"/"+name, "", nil)
					var state widgetState
					if err == nil {
						state, err = parseWidget(v, body)
					}
					if code != http.StatusOK || err != nil || !state.equal(want[name]) {
						st.fail("GET %s %s: %d %v %v, want %v", v, name, code, err, state, want[name])
					}
				}
			}
		})
	}
	for name := range want {
		names <- name
	}
	close(names)
	wg.Wait()
}

// checkStoredInV2 opens the stopped quickstart's Badger store and checks
// that each of the n widgets of ns is stored in v2: a stored object is its
// JSON after a few header bytes, and that JSON starts with its apiVersion.
func checkStoredInV2(t *testing.T, dataDir, ns string, n int) {
	t.Helper()
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dataDir, "db")))
	if err != nil {
		t.Fatalf("opening the quickstart's store: %v", err)
	}
	defer store.Close()
	page, err := store.List(t.Context(), storage.ListOptions{Prefix: []byte("/registry/example.dev/widgets/" + ns + "/")})
	if err != nil {
		t.Fatalf("listing the stored widgets: %v", err)
	}
	if len(page.Items) != n {
		t.Errorf("%d widgets stored, want %d", len(page.Items), n)
	}
	inV2, notInV2 := 0, 0
	for _, kv := range page.Items {
		i := bytes.Index(kv.Value, []byte(`{"apiVersion":"example.dev/`))
		if i >= 0 && i <= 16 && bytes.HasPrefix(kv.Value[i:], []byte(`{"apiVersion":"example.dev/v2"`)) {
			inV2++
		} else if notInV2++; notInV2 <= 20 {
			t.Errorf("%s is stored as %.80q, want an object in example.dev/v2", kv.Key, kv.Value)
		}
	}
	if inV2 != len(page.Items) {
		t.Errorf("%d of %d stored widgets in v2", inV2, len(page.Items))
	}
}

// storedVersions is the CRD view's status.storedVersions of widgets.
func storedVersions(t *testing.T, s *server) []string {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.dev", nil)
	if code != http.StatusOK {
		t.Fatalf("GET the widgets CRD: %d %.300s", code, body)
	}
	var crd struct {
		Status struct{ StoredVersions []string } `json:"status"`
	}
	if err := json.Unmarshal(body, &crd); err != nil {
		t.Fatalf("decoding the widgets CRD: %v", err)
	}
	return crd.Status.StoredVersions
}

func wantStoredVersions(t *testing.T, s *server, want ...string) {
	t.Helper()
	if got := storedVersions(t, s); !slices.Equal(got, want) {
		t.Fatalf("stored versions of widgets %q, want %q", got, want)
	}
}

// metric is the value of an unlabelled metric on the server's /metrics.
func metric(t *testing.T, s *server, name string) float64 {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitMetric waits until the metric reaches at least atLeast and returns it.
func waitMetric(t *testing.T, s *server, name string, atLeast float64, timeout time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := metric(t, s, name)
		if v >= atLeast {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after %s, want at least %v", name, v, timeout, atLeast)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
