package etcd_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

const cmPath = "/api/v1/namespaces/default/configmaps"

// TestMultiInstance runs three API servers over one etcd, a watcher on each
// and writers on all, and checks that every watcher sees every write, in
// resourceVersion order, the same on every instance; that resourceVersions
// from one instance are understood by the others; and that a consistent
// read on one instance sees what another has just written.
func TestMultiInstance(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	var ins []*instance
	for i := range 3 {
		ins = append(ins, startInstance(t, srv, fmt.Sprintf("api-%d", i), instanceOptions{}))
	}

	// A list on one instance gives a resourceVersion to watch from on all.
	rv := str(ins[0].must(t, 200, "GET", cmPath, ""), "metadata", "resourceVersion")
	var watchers []*watcher
	for _, in := range ins {
		watchers = append(watchers, in.watch(t, cmPath+"?watch=1&resourceVersion="+rv))
	}

	// Writers on every instance: each creates, updates and deletes its own
	// configmaps; every write is acknowledged with its resourceVersion.
	const writersPerInstance, objects, updates = 2, 4, 3
	type ack struct {
		typ, name string
		rv        int64
	}
	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	record := func(typ, name string, obj map[string]any) {
		n, err := strconv.ParseInt(str(obj, "metadata", "resourceVersion"), 10, 64)
		if err != nil {
			t.Errorf("%s %s: resourceVersion %q", typ, name, str(obj, "metadata", "resourceVersion"))
		}
		mu.Lock()
		acks = append(acks, ack{typ, name, n})
		mu.Unlock()
	}
	for i, in := range ins {
		for w := range writersPerInstance {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range objects {
					name := fmt.Sprintf("cm-%d-%d-%d", i, w, o)
					r := in.do(t, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q},"data":{"v":"0"}}`, name))
					if r.code != 201 {
						t.Errorf("%s create %s: %d %s", in.name, name, r.code, r.body)
						return
					}
					obj := r.object(t)
					record("ADDED", name, obj)
					for u := 1; u <= updates; u++ {
						body := fmt.Sprintf(`{"metadata":{"name":%q,"resourceVersion":%q},"data":{"v":"%d"}}`,
							name, str(obj, "metadata", "resourceVersion"), u)
						r := in.do(t, "PUT", cmPath+"/"+name, body)
						if r.code != 200 {
							t.Errorf("%s update %s: %d %s", in.name, name, r.code, r.body)
							return
						}
						obj = r.object(t)
						record("MODIFIED", name, obj)
					}
					if r := in.do(t, "DELETE", cmPath+"/"+name, ""); r.code != 200 {
						t.Errorf("%s delete %s: %d %s", in.name, name, r.code, r.body)
						return
					}
					mu.Lock()
					acks = append(acks, ack{"DELETED", name, 0}) // revision from the watch
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want := len(acks)
	var first []watchEvent
	for i, w := range watchers {
		evs := w.waitFor(t, want, 30*time.Second)
		if len(evs) != want {
			t.Fatalf("watcher on %s: %d events, want %d:\n%v", w.name, len(evs), want, evs)
		}
		// Strictly increasing resourceVersions.
		var prev int64
		for j, ev := range evs {
			n, err := strconv.ParseInt(ev.RV, 10, 64)
			if err != nil || n <= prev {
				t.Fatalf("watcher on %s: event %d %+v not after revision %d", w.name, j, ev, prev)
			}
			prev = n
		}
		if i == 0 {
			first = evs
			continue
		}
		if !slices.Equal(evs, first) {
			t.Fatalf("watcher on %s saw another history than the one on %s:\n%v\n%v", w.name, watchers[0].name, evs, first)
		}
	}
	// Every acknowledged create and update is in the history, at its
	// resourceVersion; deletes come after the object's last update.
	at := map[string]watchEvent{}
	for _, ev := range first {
		at[ev.RV] = ev
	}
	deleted := map[string]bool{}
	for _, ev := range first {
		if ev.Type == "DELETED" {
			deleted[ev.Name] = true
		}
	}
	for _, a := range acks {
		if a.typ == "DELETED" {
			if !deleted[a.name] {
				t.Errorf("delete of %s not seen", a.name)
			}
			continue
		}
		if ev := at[strconv.FormatInt(a.rv, 10)]; ev.Type != a.typ || ev.Name != a.name {
			t.Errorf("%s %s at %d: watchers saw %+v", a.typ, a.name, a.rv, ev)
		}
	}

	// Read-your-writes across instances: a consistent read (no
	// resourceVersion) on another instance sees a write at once, and a
	// resourceVersion from one instance is valid on the others.
	for i := range 9 {
		w, r := ins[i%3], ins[(i+1)%3]
		name := fmt.Sprintf("ryw-%d", i)
		obj := w.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q}}`, name))
		got := r.must(t, 200, "GET", cmPath+"/"+name, "")
		if str(got, "metadata", "resourceVersion") != str(obj, "metadata", "resourceVersion") {
			t.Fatalf("get on %s after a create on %s: %v, want %v", r.name, w.name, got, obj)
		}
		list := r.must(t, 200, "GET", cmPath, "")
		if !hasItem(list, name) {
			t.Fatalf("consistent list on %s misses %s just created on %s", r.name, name, w.name)
		}
		lrv, _ := strconv.ParseInt(str(list, "metadata", "resourceVersion"), 10, 64)
		orv, _ := strconv.ParseInt(str(obj, "metadata", "resourceVersion"), 10, 64)
		if lrv < orv {
			t.Fatalf("list on %s at %d, before the write at %d on %s", r.name, lrv, orv, w.name)
		}
		exact := r.must(t, 200, "GET", cmPath+"?resourceVersionMatch=NotOlderThan&resourceVersion="+str(obj, "metadata", "resourceVersion"), "")
		if !hasItem(exact, name) {
			t.Fatalf("list on %s not older than %s's write misses it", r.name, w.name)
		}
	}
}

func hasItem(list map[string]any, name string) bool {
	items, _ := list["items"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && str(m, "metadata", "name") == name {
			return true
		}
	}
	return false
}

// leader waits until exactly one running instance leads and returns it.
func leader(t *testing.T, ins []*instance, down map[*instance]bool, timeout time.Duration) *instance {
	t.Helper()
	var lead *instance
	eventually(t, timeout, "one leader", func() bool {
		lead = nil
		n := 0
		for _, in := range ins {
			if !down[in] && in.el.IsLeader() {
				lead, n = in, n+1
			}
		}
		return n == 1
	})
	id, err := lead.el.Leader(t.Context())
	if err != nil || id != lead.name {
		t.Fatalf("Leader() = %q, %v; want %q", id, err, lead.name)
	}
	return lead
}

// deleteNamespace creates namespace ns with a configmap through one
// instance, deletes it through another, and waits until the namespace
// controller (on the leader) has emptied and removed it.
func deleteNamespace(t *testing.T, via, other *instance, ns string, timeout time.Duration) time.Duration {
	t.Helper()
	via.must(t, 201, "POST", "/api/v1/namespaces", fmt.Sprintf(`{"metadata":{"name":%q}}`, ns))
	via.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/configmaps", `{"metadata":{"name":"inside"}}`)
	start := time.Now()
	other.must(t, 200, "DELETE", "/api/v1/namespaces/"+ns, "")
	eventually(t, timeout, "namespace "+ns+" to go", func() bool {
		return via.do(t, "GET", "/api/v1/namespaces/"+ns, "").code == 404
	})
	return time.Since(start)
}

// TestLeaderHandover checks that the controllers run on one instance only,
// and move to another when the leader stops (resigning) and when it
// crashes (its lease expires).
func TestLeaderHandover(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	const ttl = 2 * time.Second
	var ins []*instance
	for i := range 3 {
		ins = append(ins, startInstance(t, srv, fmt.Sprintf("api-%d", i), instanceOptions{electorTTL: ttl}))
	}
	down := map[*instance]bool{}
	others := func(l *instance) []*instance {
		var out []*instance
		for _, in := range ins {
			if in != l && !down[in] {
				out = append(out, in)
			}
		}
		return out
	}
	first := leader(t, ins, down, 30*time.Second)
	o := others(first)
	deleteNamespace(t, o[0], o[1], "ns-first", 30*time.Second)

	// A clean stop resigns: the next leader takes over at once.
	start := time.Now()
	first.stop()
	down[first] = true
	second := leader(t, ins, down, 30*time.Second)
	t.Logf("handover after a clean stop of %s to %s: %v", first.name, second.name, time.Since(start))
	o = others(second)
	took := deleteNamespace(t, o[0], second, "ns-second", 30*time.Second)
	t.Logf("namespace deletion with the second leader: %v", took)

	// A crash: the lease expires after its TTL and the last one leads.
	start = time.Now()
	second.crash()
	down[second] = true
	if second.el.IsLeader() {
		t.Fatalf("%s still leads after losing etcd", second.name)
	}
	third := leader(t, ins, down, 30*time.Second)
	took = time.Since(start)
	t.Logf("handover after a crash of %s to %s: %v (lease TTL %v)", second.name, third.name, took, ttl)
	deleteNamespace(t, third, third, "ns-third", 30*time.Second)

	// Garbage collection runs on the new leader too.
	owner := third.must(t, 201, "POST", cmPath, `{"metadata":{"name":"owner"}}`)
	third.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"dependent","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":%q}]}}`,
		str(owner, "metadata", "uid")))
	third.must(t, 200, "DELETE", cmPath+"/owner", "")
	eventually(t, 30*time.Second, "the dependent to be collected", func() bool {
		return third.do(t, "GET", cmPath+"/dependent", "").code == 404
	})
}

// TestWatchFromOtherInstanceRV watches, on an instance whose watch cache has
// not started yet, from a resourceVersion listed on another instance, with
// an unrelated write in between (in a cluster, other instances and their
// elections write all the time): the cache starts after the
// resourceVersion, so the watch first replays from etcd and then joins the
// cache. Every event must arrive once.
func TestWatchFromOtherInstanceRV(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	a := startInstance(t, srv, "api-a", instanceOptions{})
	b := startInstance(t, srv, "api-b", instanceOptions{})
	rv := str(a.must(t, 200, "GET", cmPath, ""), "metadata", "resourceVersion")
	if _, err := a.st.Create(t.Context(), []byte("/unrelated/x"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	w := b.watch(t, cmPath+"?watch=1&resourceVersion="+rv)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("cm-%d", i)
		a.must(t, 201, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q}}`, name))
		want = append(want, name)
	}
	b.must(t, 201, "POST", cmPath, `{"metadata":{"name":"last"}}`)
	want = append(want, "last")
	evs := w.waitFor(t, len(want), 30*time.Second)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("watch from %s on another instance: %v, want each of %v once", rv, evs, want)
	}
}
