package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io/fs"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// TestQuickstartCrashSoak kills the quickstart with SIGKILL at a random
// moment of a write storm, again and again on the same data directory
// (Badger, secrets sealed at rest), and checks after every restart what a
// crash may and may not do to clients. KAPI_CRASH_CYCLES sets the number
// of kills (default 3); KAPI_CRASH_SEED repeats a run's choices (the kill
// moments, the writes); docs/operations.md has the figures of a long run.
//
// In each cycle, two writers per type (configmaps, secrets, widgets
// through example.dev/v1 and v2, leases, events) create, update, patch and
// delete objects of their own; a watcher per type and version follows
// them from the last resourceVersion it saw; a pager per type lists in
// pages of 1 to 8. About one restart in four is killed too, while the
// store opens or just after. After each restart:
//   - the store opens (the server gets ready) and every object holds its
//     last acknowledged write, or the write whose answer the kill cut off,
//     and nothing else exists;
//   - a list's resourceVersion is not below any seen before the kill, and
//     every write's is above;
//   - the watches resume from their last resourceVersion and deliver every
//     write carried out that they had not delivered (or answer 410 and the
//     watcher re-lists), each once, in increasing resourceVersions, with
//     the value and revision of that write;
//   - every complete list, paged or not and continued across a restart or
//     not, holds each object exactly as its history says at the list's
//     revision.
func TestQuickstartCrashSoak(t *testing.T) {
	t.Parallel()
	cycles := envInt(t, "KAPI_CRASH_CYCLES", 3)
	seed := envInt(t, "KAPI_CRASH_SEED", time.Now().UnixNano())
	t.Logf("%d cycles; KAPI_CRASH_SEED=%d repeats this run's choices", cycles, seed)
	rng := mrand.New(mrand.NewPCG(uint64(seed), 29))
	const maxStorm = 1500 * time.Millisecond

	dataDir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "keys")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, []byte("soak:"+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Events live for ten days, so that none expires during a long run.
	opts := serverOptions{dataDir: dataDir, onDisk: true, args: []string{"--encryption-key-file", keyFile, "--event-ttl", "240h"}}

	m := newSoakModel(t, "soak")
	var writers []*soakWriter
	var pagers []*soakPager
	for ki, k := range m.kinds {
		for i, api := range k.apis {
			k.watchers = append(k.watchers, &soakWatcher{m: m, kind: k, api: api, bit: 1 << i})
		}
		for wi := range 2 {
			w := &soakWriter{m: m, kind: k, rng: mrand.New(mrand.NewPCG(uint64(seed), uint64(ki*10+wi)))}
			for i := range 8 {
				w.objs = append(w.objs, m.object(k, fmt.Sprintf("w%d-%d", wi, i)))
			}
			writers = append(writers, w)
		}
		pagers = append(pagers, &soakPager{m: m, kind: k, rng: mrand.New(mrand.NewPCG(uint64(seed), uint64(ki*10+9)))})
	}

	start := time.Now()
	s := startServerWith(t, opts)
	if code, body := s.Do(t, http.MethodPost, "/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"soak"}}`)); code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s", code, body)
	}
	for _, k := range m.kinds {
		for _, w := range k.watchers {
			code, body := s.Do(t, http.MethodGet, k.collection(w.api, m.ns), nil)
			rv, _, _, err := parseSoakList(k, body)
			if code != http.StatusOK || err != nil {
				t.Fatalf("list %s: %d %v", k.collection(w.api, m.ns), code, err)
			}
			w.rv = rv
		}
	}

	startKills, startKillsEarly := 0, 0
	for c := range cycles {
		if c > 0 {
			// Every fourth restart or so is killed too, 0 to 300 ms after
			// it starts: while the store opens, or just after.
			if c == 1 || rng.IntN(4) == 0 {
				if !killDuringStart(t, opts, time.Duration(rng.Int64N(int64(300*time.Millisecond)))) {
					startKillsEarly++
				}
				startKills++
			}
			s = startServerWith(t, opts)
		}
		ep := endpointOf(s)
		ctx, cancel := context.WithCancel(t.Context())
		var running sync.WaitGroup
		if c > 0 {
			m.checkRestart(ep)
		}
		m.watch(ctx, &running, ep)
		if c > 0 && !m.waitDelivered(60*time.Second) {
			cancel()
			running.Wait()
			t.Fatalf("cycle %d of %d: writes not delivered by a watch (KAPI_CRASH_SEED=%d)", c+1, cycles, seed)
		}
		if c > 0 {
			m.checkLists()
			keep := uint64(math.MaxUint64)
			for _, p := range pagers {
				if p.cont != "" {
					keep = min(keep, p.rv)
				}
			}
			m.prune(keep)
		}
		for _, w := range writers {
			running.Go(func() { w.run(ctx, ep) })
		}
		for _, p := range pagers {
			running.Go(func() { p.run(ctx, ep) })
		}
		time.Sleep(time.Duration(rng.Int64N(int64(maxStorm))))
		s.Stop(t, syscall.SIGKILL)
		cancel()
		running.Wait()
		checkNoErrorLogged(t, s)
		if t.Failed() {
			t.Fatalf("cycle %d of %d failed (KAPI_CRASH_SEED=%d)", c+1, cycles, seed)
		}
		if (c+1)%25 == 0 {
			t.Logf("%d cycles, %s: %+v", c+1, time.Since(start).Round(time.Second), m.stats)
		}
	}

	// A last restart to check the last kill, then a clean stop.
	s = startServerWith(t, opts)
	ep := endpointOf(s)
	m.checkRestart(ep)
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	m.watch(ctx, &running, ep)
	delivered := m.waitDelivered(60 * time.Second)
	cancel()
	running.Wait()
	if !delivered {
		t.FailNow()
	}
	m.checkLists()
	if err := s.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("quickstart exit after SIGTERM: %v", err)
	}
	checkNoErrorLogged(t, s)
	checkSecretsSealed(t, dataDir, m)

	st := m.stats
	t.Logf("%d kills mid-storm and %d during a start (%d before it listened) in %s, seed %d: %d writes acknowledged, %d answers lost to a kill (%d of them carried out), %d refused (429 or the event budget); "+
		"%d watch events and %d bookmarks in %d watches (%d answered 410); %d paged lists complete in %d pages, %d continued across a restart (%d continue tokens expired); last revision %d, %d MB in the data directory",
		cycles, startKills, startKillsEarly, time.Since(start).Round(time.Second), seed, st.acked, st.lost, st.appliedLost, st.refused,
		st.events, st.bookmarks, st.watchStarts, st.watchGone, st.lists, st.pages, st.continuedAcrossRestart, st.continueExpired, m.maxRV, dirSize(dataDir)>>20)
	if m.failures > 30 {
		t.Errorf("%d failures in all, the first 30 reported", m.failures)
	}
}

// envInt is the integer environment variable name, or def.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// watch starts every watcher against ep.
func (m *soakModel) watch(ctx context.Context, running *sync.WaitGroup, ep *endpoint) {
	for _, k := range m.kinds {
		for _, w := range k.watchers {
			running.Go(func() { w.run(ctx, ep) })
		}
	}
}

// checkRestart checks, first thing after a restart, what the server holds
// (resolve) through every API of every kind; from now on every write's
// resourceVersion must be above all seen before.
func (m *soakModel) checkRestart(ep *endpoint) {
	m.mu.Lock()
	m.floor = m.maxRV
	m.mu.Unlock()
	for _, k := range m.kinds {
		for _, api := range k.apis {
			path := k.collection(api, m.ns)
			code, body, err := ep.call(m.t.Context(), http.MethodGet, path, "", nil)
			if err != nil || code != http.StatusOK {
				m.t.Fatalf("after the restart, list %s: %d %v %.300s", path, code, err, body)
			}
			rv, _, items, err := parseSoakList(k, body)
			if err != nil {
				m.t.Fatalf("after the restart, list %s: %v", path, err)
			}
			held := map[string]soakItem{}
			for _, it := range items {
				held[it.name] = it.soakItem
			}
			m.resolve(k, api, rv, held)
		}
	}
}

// waitDelivered waits until the watchers have delivered every write
// carried out; after timeout it reports the ones they have not and
// returns false.
func (m *soakModel) waitDelivered(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		m.mu.Lock()
		n := len(m.unseen)
		if n == 0 {
			m.mu.Unlock()
			return true
		}
		if time.Now().After(deadline) {
			i := 0
			for wr := range m.unseen {
				var missed []string
				for _, w := range wr.obj.kind.watchers {
					if wr.seen&w.bit == 0 {
						missed = append(missed, fmt.Sprintf("%s (at %d)", w.api.path, w.rv))
					}
				}
				if i++; i <= 10 {
					m.fail("%v (%v) was not delivered by the watch of %s within %s of the restart", wr, wr.state, strings.Join(missed, ", "), timeout)
				}
			}
			m.fail("%d writes not delivered by a watch", n)
			m.mu.Unlock()
			return false
		}
		m.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// killDuringStart starts the quickstart with opts and kills it after d,
// whether or not it is ready by then, and reports whether it was listening.
// It must not panic or log an error before that.
func killDuringStart(t *testing.T, opts serverOptions, d time.Duration) (listening bool) {
	t.Helper()
	cmd := exec.Command(quickstartBin, append([]string{"--data-dir", opts.dataDir, "--listen", freeAddr(t)}, opts.args...)...)
	setProcAttr(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if log := out.String(); strings.Contains(log, "panic:") || strings.Contains(log, "level=ERROR") {
		t.Errorf("the quickstart killed %s after it started logged:\n%s", d, log)
	}
	return strings.Contains(out.String(), "msg=listening")
}

// checkNoErrorLogged fails the test for every error the server logged.
func checkNoErrorLogged(t *testing.T, s *server) {
	t.Helper()
	for line := range strings.Lines(s.Log()) {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("the server logged an error: %s", line)
		}
	}
}

// dirSize is the size of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// checkSecretsSealed opens the stopped quickstart's store and checks that
// the soak's secrets there are sealed.
func checkSecretsSealed(t *testing.T, dataDir string, m *soakModel) {
	t.Helper()
	want := 0
	for _, o := range m.objects {
		if o.kind.resource == "secrets" && o.exists() {
			want++
		}
	}
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dataDir, "db")))
	if err != nil {
		t.Fatalf("opening the quickstart's store: %v", err)
	}
	defer store.Close()
	page, err := store.List(t.Context(), storage.ListOptions{Prefix: []byte("/registry/core/secrets/" + m.ns + "/")})
	if err != nil {
		t.Fatalf("listing the stored secrets: %v", err)
	}
	if len(page.Items) != want {
		t.Errorf("%d secrets stored, want %d", len(page.Items), want)
	}
	for _, kv := range page.Items {
		if !bytes.HasPrefix(kv.Value, []byte("kapi:enc:aesgcm:v1:soak:")) || bytes.Contains(kv.Value, []byte(base64.StdEncoding.EncodeToString([]byte("secret")))) {
			t.Errorf("secret %s is stored unsealed: %.80q", kv.Key, kv.Value)
		}
	}
}
