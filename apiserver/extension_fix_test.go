package apiserver

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The generic storage verbs of a virtual type's Store are refused (405):
// nothing is read or written under its storage prefix.
func TestVirtualStoreVerbsRefused(t *testing.T) {
	rec := &extRecorder{}
	api, store, _ := virtualServer(t, rec)
	st, ok := api.Registry().Store(meta.GroupVersionResource{Group: "review.example.dev", Version: "v1", Resource: "computations"})
	if !ok {
		t.Fatal("computations not registered")
	}
	ctx := context.Background()
	before, err := store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obj := func() registry.Object {
		return registry.Object{"apiVersion": "review.example.dev/v1", "kind": "Computation", "metadata": map[string]any{"name": "x", "namespace": "team"}}
	}
	check := func(verb string, err error) {
		t.Helper()
		if meta.ReasonOf(err) != meta.StatusReasonMethodNotAllowed {
			t.Errorf("%s on a virtual type: %v, want 405 MethodNotAllowed", verb, err)
		}
	}
	_, err = st.Create(ctx, "team", obj(), registry.WriteOptions{})
	check("Create", err)
	_, err = st.Update(ctx, "team", "x", obj(), registry.WriteOptions{})
	check("Update", err)
	_, err = st.Delete(ctx, "team", "x", registry.DeleteOptions{})
	check("Delete", err)
	_, err = st.List(ctx, "team", registry.ListOptions{})
	check("List", err)
	check("ListStream", st.ListStream(ctx, "team", registry.ListOptions{}, func(int64) error { return nil }, func([]byte) error { return nil }))
	_, err = st.Watch(ctx, "team", registry.WatchOptions{Encoder: jsonWatchEncoder{kind: "Computation", apiVersion: "review.example.dev/v1"}})
	check("Watch", err)
	if after, _ := store.CurrentRevision(ctx); after != before {
		t.Errorf("storage revision moved from %d to %d", before, after)
	}
}

// A Status returned without apiVersion is a meta/v1 Status, whatever the
// group of the subresource.
func TestSubresourceStatusAPIVersion(t *testing.T) {
	rec := &extRecorder{}
	api, ts := extServer(t, rec)
	res := widgetsWithCustom(t, rec)
	res.Subresources.Custom["evict"] = registry.Subresource{
		Create: func(context.Context, *registry.Request, registry.Object) (registry.Object, error) {
			return registry.Object{"kind": "Status", "status": meta.StatusFailure, "reason": string(meta.StatusReasonTooManyRequests),
				"message": "not now", "code": int64(429), "metadata": map[string]any{}}, nil
		},
	}
	if err := api.Register(res); err != nil {
		t.Fatal(err)
	}
	createWidget(t, ts, "w1")
	r := do(t, ts, "POST", teamWidgets+"/w1/evict", `{}`, admin...)
	if st := r.status(t, 429, meta.StatusReasonTooManyRequests); st.Message != "not now" {
		t.Fatalf("evict: %s", r.body)
	}
	// Other kinds still default to the subresource's group/version.
	if r := do(t, ts, "GET", teamWidgets+"/w1/health", "", admin...); r.object(t)["apiVersion"] != "example.dev/v1" {
		t.Fatalf("health: %s", r.body)
	}
}

// watchCtxStore records the context of each storage watch on a key ending
// in /w1.
type watchCtxStore struct {
	storage.Store
	mu   sync.Mutex
	ctxs []context.Context
}

func (s *watchCtxStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if bytes.HasSuffix(opts.Prefix, []byte("/w1")) {
		s.mu.Lock()
		s.ctxs = append(s.ctxs, ctx)
		s.mu.Unlock()
	}
	return s.Store.Watch(ctx, opts)
}

// WatchObject's storage watch ends when its channel closes (after DELETED),
// not only when the caller's context ends.
func TestWatchObjectReleasesStorageWatch(t *testing.T) {
	bs, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	store := &watchCtxStore{Store: bs}
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(widgetResource(t)); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	const path = "/apis/example.dev/v1/namespaces/default/widgets"
	r := do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"})
	ctx, cancel := context.WithCancel(context.Background()) // lives on
	defer cancel()
	events, err := st.WatchObject(ctx, "default", "w1", str(r.object(t), "metadata", "resourceVersion"))
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, ts, "DELETE", path+"/w1", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	var last registry.ObjectEvent
	for ev := range events {
		last = ev
	}
	if last.Type != "DELETED" {
		t.Fatalf("last event %q, want DELETED", last.Type)
	}
	store.mu.Lock()
	ctxs := append([]context.Context{}, store.ctxs...)
	store.mu.Unlock()
	if len(ctxs) != 1 {
		t.Fatalf("%d storage watches of w1, want 1", len(ctxs))
	}
	select {
	case <-ctxs[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the storage watch stays open after the object watch ended")
	}
}

// Hooks select subresources as webhook rules do ("widgets" vs
// "widgets/*"): by default the main resource only. The server's own
// selfsubjectaccessreviews reach a hook only when it names them.
func TestAdmissionSelection(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{}
	recorder := func(name string, resources, subresources []string) registry.AdmissionHook {
		return registry.AdmissionHook{Name: name, SideEffects: registry.SideEffectsNone, Resources: resources, Subresources: subresources,
			Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
				if req.User == nil {
					return nil // the server's own writes
				}
				mu.Lock()
				defer mu.Unlock()
				what := req.Resource.Resource
				if req.Subresource != "" {
					what += "/" + req.Subresource
				}
				seen[name] = append(seen[name], what)
				return nil
			}}
	}
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec,
		recorder("default", nil, nil),
		recorder("all", nil, []string{"*"}),
		recorder("status", []string{"widgets.example.dev"}, []string{"status"}),
		recorder("reviews", []string{"selfsubjectaccessreviews", "reviews"}, nil),
	)
	if r := call("POST", teamWidgets, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := call("PATCH", teamWidgets+"/w1/status", `{"status":{"phase":"up"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("status: %d %s", r.code, r.body)
	}
	if r := call("POST", teamWidgets+"/w1/restart", `{}`); r.code != 201 {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	if r := call("POST", reviewsPath, `{"spec":{"question":"q"}}`); r.code != 201 {
		t.Fatalf("review: %d %s", r.code, r.body)
	}
	if r := call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"spec":{"nonResourceAttributes":{"path":"/apis","verb":"get"}}}`); r.code != 201 {
		t.Fatalf("ssar: %d %s", r.code, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	// restart updates the widget through its Store: a main-resource update.
	want := map[string]string{
		"default": "widgets widgets reviews",
		"all":     "widgets widgets/status widgets/restart widgets reviews",
		"status":  "widgets/status",
		"reviews": "reviews selfsubjectaccessreviews",
	}
	for name, w := range want {
		if got := strings.Join(seen[name], " "); got != w {
			t.Errorf("hook %s saw %q, want %q", name, got, w)
		}
	}
}
