package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// change is one observed or expected change of a widget.
type change struct {
	typ  string // ADDED, MODIFIED, DELETED
	name string
	rv   string // "" for deletes, whose revision the client does not learn
	size int64
}

func (c change) String() string {
	return fmt.Sprintf("%s %s rv=%s size=%d", c.typ, c.name, c.rv, c.size)
}

func changeOf(t *testing.T, typ string, obj any) change {
	t.Helper()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.Errorf("%s: object %T", typ, obj)
		return change{typ: typ}
	}
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	c := change{typ: typ, name: u.GetName(), rv: u.GetResourceVersion(), size: size}
	if typ == "DELETED" {
		c.rv = ""
	}
	return c
}

// recorder collects changes in the order a client delivers them.
type recorder struct {
	mu      sync.Mutex
	changes []change
}

func (r *recorder) add(c change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]change(nil), r.changes...)
}

// waitFor waits until the recorder holds exactly want (after skip changes).
func (r *recorder) waitFor(t *testing.T, skip int, want []change) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := r.snapshot()
		if len(got) >= skip+len(want) {
			got = got[skip:]
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("change %d: got %v, want %v\nall: %v", i, got[i], want[i], got)
				}
			}
			if len(got) > len(want) {
				t.Fatalf("unexpected changes after the expected ones: %v", got[len(want):])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: got %d changes %v, want %d after %d", len(got), got, len(want), skip)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeWidgets makes a fixed mix of creates, updates and deletes in ns and
// returns the changes a watcher must see, in order.
func writeWidgets(t *testing.T, dc dynamic.Interface, ns, prefix string, n int) []change {
	t.Helper()
	ctx := t.Context()
	wds := dc.Resource(widgetsGVR).Namespace(ns)
	var want []change
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		w, err := wds.Create(ctx, widget(t, ns, name, i), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		want = append(want, change{"ADDED", name, w.GetResourceVersion(), int64(i)})
		_ = unstructured.SetNestedField(w.Object, int64(100+i), "spec", "size")
		w, err = wds.Update(ctx, w, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update %s: %v", name, err)
		}
		want = append(want, change{"MODIFIED", name, w.GetResourceVersion(), int64(100 + i)})
		if i%3 == 0 {
			if err := wds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete %s: %v", name, err)
			}
			want = append(want, change{"DELETED", name, "", int64(100 + i)})
		}
	}
	return want
}

// requestLog records the watch and list requests a client makes.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/widgets") {
				l.mu.Lock()
				l.reqs = append(l.reqs, r.URL.RawQuery)
				l.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// classicListWatch is a ListWatch that opts out of streaming lists, so that
// its informer lists and then watches.
type classicListWatch struct{ *cache.ListWatch }

func (classicListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func widgetListWatch(dc dynamic.Interface, ns string) *cache.ListWatch {
	ri := dc.Resource(widgetsGVR).Namespace(ns)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}
}

// A SharedIndexInformer (list, then watch) syncs and sees every change in
// order.
func TestWatchInformer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var log requestLog
	dc, err := dynamic.NewForConfig(log.wrap(s.RESTConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, dc, "inf")
	pre := writeWidgets(t, dc, "inf", "pre", 3) // pre0 deleted; pre1, pre2 remain

	inf := cache.NewSharedIndexInformer(classicListWatch{widgetListWatch(dc, "inf")}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	var rec recorder
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.add(changeOf(t, "ADDED", obj)) },
		UpdateFunc: func(_, obj any) { rec.add(changeOf(t, "MODIFIED", obj)) },
		DeleteFunc: func(obj any) { rec.add(changeOf(t, "DELETED", obj)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	// The initial state: the survivors as they are now.
	rec.waitFor(t, 0, []change{{"ADDED", "pre1", pre[4].rv, 101}, {"ADDED", "pre2", pre[6].rv, 102}})
	want := writeWidgets(t, dc, "inf", "w", 10)
	rec.waitFor(t, 2, want)

	reqs := log.all()
	if len(reqs) < 2 || strings.Contains(reqs[0], "watch=") || !strings.Contains(reqs[1], "watch=true") {
		t.Errorf("requests %v, want a list and then a watch", reqs)
	}
}

// A Reflector with the WatchListClient feature (client-go's default) gets
// its initial state from a streaming list, then every change in order.
func TestWatchListReflector(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var log requestLog
	dc, err := dynamic.NewForConfig(log.wrap(s.RESTConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, dc, "wl")
	pre := writeWidgets(t, dc, "wl", "pre", 3)

	var rec recorder
	store := &recordingStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), t: t, rec: &rec}
	example := &unstructured.Unstructured{}
	example.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Widget"})
	r := cache.NewReflectorWithOptions(widgetListWatch(dc, "wl"), example, store, cache.ReflectorOptions{Name: "widgets"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.RunWithContext(ctx)
	rec.waitFor(t, 0, []change{{"REPLACED", "pre1", pre[4].rv, 101}, {"REPLACED", "pre2", pre[6].rv, 102}})
	want := writeWidgets(t, dc, "wl", "w", 10)
	rec.waitFor(t, 2, want)

	reqs := log.all()
	if len(reqs) == 0 || !strings.Contains(reqs[0], "sendInitialEvents=true") || !strings.Contains(reqs[0], "resourceVersionMatch=NotOlderThan") {
		t.Errorf("requests %v: want a streaming list first", reqs)
	}
	for _, q := range reqs {
		if !strings.Contains(q, "watch=true") {
			t.Errorf("the reflector fell back to a list: %v", reqs)
		}
	}
}

// recordingStore records what a Reflector does to its store.
type recordingStore struct {
	cache.Store
	t   *testing.T
	rec *recorder
}

func (s *recordingStore) Add(obj any) error {
	s.rec.add(changeOf(s.t, "ADDED", obj))
	return s.Store.Add(obj)
}

func (s *recordingStore) Update(obj any) error {
	s.rec.add(changeOf(s.t, "MODIFIED", obj))
	return s.Store.Update(obj)
}

func (s *recordingStore) Delete(obj any) error {
	s.rec.add(changeOf(s.t, "DELETED", obj))
	return s.Store.Delete(obj)
}

func (s *recordingStore) Replace(list []any, rv string) error {
	var cs []change
	for _, o := range list {
		cs = append(cs, changeOf(s.t, "REPLACED", o))
	}
	// The store hands the items over unordered: record them by name.
	for i := range cs {
		for j := i + 1; j < len(cs); j++ {
			if cs[j].name < cs[i].name {
				cs[i], cs[j] = cs[j], cs[i]
			}
		}
	}
	for _, c := range cs {
		s.rec.add(c)
	}
	return s.Store.Replace(list, rv)
}

// A client lists, the server restarts (its data on disk), and a watch from
// the list's resourceVersion sees every change made meanwhile, before and
// after the restart, in order.
func TestWatchResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	opts := serverOptions{dataDir: t.TempDir(), onDisk: true}
	s := startServerWith(t, opts)
	dc := s.Dynamic(t)
	createNamespace(t, dc, "rs")
	writeWidgets(t, dc, "rs", "pre", 2)
	list, err := dc.Resource(widgetsGVR).Namespace("rs").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := writeWidgets(t, dc, "rs", "a", 4)
	if err := s.Stop(t, syscall.SIGTERM); err != nil {
		t.Logf("quickstart exit: %v", err)
	}

	s = startServerWith(t, opts)
	dc = s.Dynamic(t)
	after := writeWidgets(t, dc, "rs", "b", 4)
	w, err := dc.Resource(widgetsGVR).Namespace("rs").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch from %s after the restart: %v", list.GetResourceVersion(), err)
	}
	var rec recorder
	var stopped atomic.Bool
	done := make(chan struct{})
	defer func() {
		stopped.Store(true) // client-go may report the closing body as an error
		w.Stop()
		<-done
	}()
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if !stopped.Load() {
					rec.add(change{typ: "ERROR", name: apierrors.FromObject(ev.Object).Error()})
				}
				continue
			}
			if ev.Type != watch.Bookmark {
				rec.add(changeOf(t, string(ev.Type), ev.Object))
			}
		}
	}()
	want := append(before, after...)
	more := writeWidgets(t, dc, "rs", "c", 2) // and live changes after that
	rec.waitFor(t, 0, append(want, more...))
}

// kubectl get --watch prints the initial state and then each change.
func TestWatchKubectl(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	dc := s.Dynamic(t)
	createNamespace(t, dc, "kw")
	wds := dc.Resource(widgetsGVR).Namespace("kw")
	if _, err := wds.Create(t.Context(), widget(t, "kw", "first", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	expect := kubectlStream(t, s, "get", "widgets", "-n", "kw", "--watch", "--output-watch-events")
	expect(`^EVENT\s+NAME\s+SIZE\s+COLOR`)
	expect(`^ADDED\s+first\s+1\s+red\b`)
	w, err := wds.Create(t.Context(), widget(t, "kw", "second", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(`^ADDED\s+second\s+2\s+red\b`)
	_ = unstructured.SetNestedField(w.Object, "blue", "spec", "color")
	if _, err := wds.Update(t.Context(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(`^MODIFIED\s+second\s+2\s+blue\b`)
	if err := wds.Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(`^DELETED\s+first\s+1\s+red\b`)
}
