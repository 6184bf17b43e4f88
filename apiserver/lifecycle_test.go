package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// eventually polls cond until it holds or 15 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFinalizers(t *testing.T) {
	_, ts := newTestServer(t)
	r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"f","finalizers":["example.dev/hold"]},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	w := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+str(r.object(t), "metadata", "resourceVersion"))

	// The delete is held: the answer is the object, with deletionTimestamp
	// and, whatever the grace period asked, deletionGracePeriodSeconds 0
	// (only pods terminate gracefully in Kubernetes).
	r = do(t, ts, "DELETE", wdPath+"/f?gracePeriodSeconds=30", "")
	held := r.object(t)
	if r.code != 200 || str(held, "kind") != "Widget" || str(held, "metadata", "deletionTimestamp") == "" ||
		str(held, "metadata", "deletionGracePeriodSeconds") != "0" || str(held, "metadata", "generation") != "2" {
		t.Fatalf("held delete: %d %s", r.code, r.body)
	}
	if ev := w.next(t); ev["type"] != "MODIFIED" {
		t.Fatalf("event %v", ev)
	}
	// A second delete changes nothing.
	again := do(t, ts, "DELETE", wdPath+"/f", "").object(t)
	if str(again, "metadata", "resourceVersion") != str(held, "metadata", "resourceVersion") {
		t.Fatalf("second delete wrote: %v", again)
	}
	// No new finalizers once deletion started.
	st := do(t, ts, "PATCH", wdPath+"/f", `{"metadata":{"finalizers":["example.dev/hold","example.dev/new"]}}`, "Content-Type", "application/merge-patch+json").
		status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, "no new finalizers can be added if the object is being deleted") {
		t.Fatalf("message %q", st.Message)
	}
	// deletionTimestamp cannot be changed by an update.
	r = do(t, ts, "PATCH", wdPath+"/f", `{"metadata":{"deletionTimestamp":null},"spec":{"size":2}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || str(r.object(t), "metadata", "deletionTimestamp") == "" {
		t.Fatalf("update dropped the deletionTimestamp: %d %s", r.code, r.body)
	}
	if ev := w.next(t); ev["type"] != "MODIFIED" {
		t.Fatalf("event %v", ev)
	}
	// Removing the last finalizer removes the object.
	r = do(t, ts, "PATCH", wdPath+"/f", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 {
		t.Fatalf("finalizer removal: %d %s", r.code, r.body)
	}
	do(t, ts, "GET", wdPath+"/f", "").status(t, 404, meta.StatusReasonNotFound)
	if ev := w.next(t); ev["type"] != "DELETED" {
		t.Fatalf("event %v", ev)
	}
	// Bad finalizer names are refused.
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"g","finalizers":["not a name!"]},"spec":{"size":1}}`).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "DELETE", wdPath+"/missing", "").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "DELETE", wdPath+"/x?propagationPolicy=Sometimes", "").status(t, 422, meta.StatusReasonInvalid)
	// orphanDependents and propagationPolicy together are refused, in the
	// query or in the body, with kube-apiserver's message.
	const both = `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Background": orphanDependents and deletionPropagation cannot be both set`
	for _, r := range []response{
		do(t, ts, "DELETE", wdPath+"/x?propagationPolicy=Background&orphanDependents=true", ""),
		do(t, ts, "DELETE", wdPath+"/x", `{"propagationPolicy":"Background","orphanDependents":false}`),
	} {
		if st := r.status(t, 422, meta.StatusReasonInvalid); st.Message != both {
			t.Errorf("both policies: %q", st.Message)
		}
	}
}

func TestNamespaceDeletion(t *testing.T) {
	_, ts := newTestServer(t)
	r := do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"doomed"}}`)
	ns := r.object(t)
	if str(ns, "status", "phase") != "Active" || str(ns, "spec", "finalizers") != `["kubernetes"]` || str(ns, "metadata", "labels", "kubernetes.io/metadata.name") != "doomed" {
		t.Fatalf("namespace: %s", r.body)
	}
	do(t, ts, "POST", "/api/v1/namespaces/doomed/configmaps", `{"metadata":{"name":"c"}}`)
	do(t, ts, "POST", "/apis/example.dev/v1/namespaces/doomed/widgets", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"held","finalizers":["example.dev/hold"]},"spec":{"size":1}}`)
	do(t, ts, "POST", "/apis/example.dev/v1/namespaces/doomed/widgets", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"free"},"spec":{"size":1}}`)

	r = do(t, ts, "DELETE", "/api/v1/namespaces/doomed", "")
	if r.code != 200 || str(r.object(t), "status", "phase") != "Terminating" || str(r.object(t), "kind") != "Namespace" {
		t.Fatalf("namespace delete: %d %s", r.code, r.body)
	}
	st := do(t, ts, "POST", "/api/v1/namespaces/doomed/configmaps", `{"metadata":{"name":"late"}}`).status(t, 403, meta.StatusReasonForbidden)
	if !strings.Contains(st.Message, "unable to create new content in namespace doomed because it is being terminated") {
		t.Fatalf("message %q", st.Message)
	}
	eventually(t, "the namespace's objects without finalizers to go", func() bool {
		return do(t, ts, "GET", "/api/v1/namespaces/doomed/configmaps/c", "").code == 404 &&
			do(t, ts, "GET", "/apis/example.dev/v1/namespaces/doomed/widgets/free", "").code == 404
	})
	// The held widget keeps the namespace.
	if do(t, ts, "GET", "/api/v1/namespaces/doomed", "").code != 200 {
		t.Fatal("namespace went while an object with a finalizer remained")
	}
	eventually(t, "the held widget to be marked for deletion", func() bool {
		held := do(t, ts, "GET", "/apis/example.dev/v1/namespaces/doomed/widgets/held", "").object(t)
		return str(held, "metadata", "deletionTimestamp") != ""
	})
	do(t, ts, "PATCH", "/apis/example.dev/v1/namespaces/doomed/widgets/held", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
	eventually(t, "the namespace to go", func() bool {
		return do(t, ts, "GET", "/api/v1/namespaces/doomed", "").code == 404
	})
}

// A namespace deletion interrupted by a restart finishes after it.
func TestNamespaceDeletionResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	start := func(controllers bool) (*Server, *httptest.Server, func()) {
		store, err := badger.Open(badger.DefaultOptions(dir))
		if err != nil {
			t.Fatal(err)
		}
		api, err := New(context.Background(), Config{Storage: store, DisableControllers: !controllers, AllowAnonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := api.Register(registry.ConfigMaps()); err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(api)
		return api, ts, func() { ts.Close(); api.Close(); store.Close() }
	}
	_, ts, stop := start(false)
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"later"}}`)
	for i := 0; i < 5; i++ {
		do(t, ts, "POST", "/api/v1/namespaces/later/configmaps", fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	do(t, ts, "DELETE", "/api/v1/namespaces/later", "")
	stop() // "crash" before any controller ran

	_, ts, stop = start(true)
	defer stop()
	eventually(t, "the namespace to be emptied and removed after restart", func() bool {
		return do(t, ts, "GET", "/api/v1/namespaces/later", "").code == 404
	})
	if n := len(do(t, ts, "GET", "/api/v1/namespaces/later/configmaps", "").object(t)["items"].([]any)); n != 0 {
		t.Fatalf("%d configmaps left in the deleted namespace", n)
	}
}

func TestGarbageCollection(t *testing.T) {
	_, ts := newTestServer(t)
	mk := func(name, owner, ownerUID string, block bool) string {
		refs := ""
		if owner != "" {
			refs = fmt.Sprintf(`,"ownerReferences":[{"apiVersion":"example.dev/v1","kind":"Widget","name":%q,"uid":%q,"blockOwnerDeletion":%v}]`, owner, ownerUID, block)
		}
		r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q%s}}`, name, refs))
		if r.code != 201 {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
		return str(r.object(t), "metadata", "uid")
	}
	owner := func(name string) string {
		r := do(t, ts, "POST", wdPath, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":1}}`, name))
		return str(r.object(t), "metadata", "uid")
	}
	gone := func(path string) func() bool {
		return func() bool { return do(t, ts, "GET", path, "").code == 404 }
	}

	// Background: dependents go after the owner.
	bg := owner("bg")
	mk("bg-dep", "bg", bg, false)
	r := do(t, ts, "DELETE", wdPath+"/bg", `{"propagationPolicy":"Background"}`)
	r.status(t, 200, "")
	eventually(t, "background dependent to be collected", gone(cmPath+"/bg-dep"))

	// Orphan: the owner goes, the dependent stays without the reference.
	or := owner("or")
	mk("or-dep", "or", or, false)
	r = do(t, ts, "DELETE", wdPath+"/or?propagationPolicy=Orphan", "")
	if r.code != 200 || !strings.Contains(str(r.object(t), "metadata", "finalizers"), "orphan") {
		t.Fatalf("orphan delete: %d %s", r.code, r.body)
	}
	eventually(t, "orphaned owner to go", gone(wdPath+"/or"))
	dep := do(t, ts, "GET", cmPath+"/or-dep", "")
	if dep.code != 200 || dep.object(t)["metadata"].(map[string]any)["ownerReferences"] != nil {
		t.Fatalf("orphaned dependent: %d %s", dep.code, dep.body)
	}

	// Foreground: the dependents go first, then the owner.
	fg := owner("fg")
	mk("fg-dep", "fg", fg, true)
	r = do(t, ts, "DELETE", wdPath+"/fg", `{"propagationPolicy":"Foreground"}`)
	if r.code != 200 || !strings.Contains(str(r.object(t), "metadata", "finalizers"), "foregroundDeletion") {
		t.Fatalf("foreground delete: %d %s", r.code, r.body)
	}
	eventually(t, "foreground dependent to go", gone(cmPath+"/fg-dep"))
	eventually(t, "foreground owner to go", gone(wdPath+"/fg"))

	// Dangling owners: a dependent whose owner never existed is collected;
	// one with a live and a dangling owner only loses the dangling reference.
	mk("dangling", "never", "00000000-0000-0000-0000-000000000000", false)
	eventually(t, "dangling dependent to be collected", gone(cmPath+"/dangling"))
	live := owner("live")
	r = do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"two","ownerReferences":[
		{"apiVersion":"example.dev/v1","kind":"Widget","name":"live","uid":%q},
		{"apiVersion":"example.dev/v1","kind":"Widget","name":"ghost","uid":"11111111-1111-1111-1111-111111111111"}]}}`, live))
	if r.code != 201 {
		t.Fatalf("create two: %d %s", r.code, r.body)
	}
	eventually(t, "the dangling reference to be dropped", func() bool {
		o := do(t, ts, "GET", cmPath+"/two", "")
		return o.code == 200 && !strings.Contains(string(o.body), "ghost")
	})
	// Owners of unregistered kinds are left alone.
	mk2 := do(t, ts, "POST", cmPath, `{"metadata":{"name":"foreign","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"u"}]}}`)
	if mk2.code != 201 {
		t.Fatalf("create foreign: %d %s", mk2.code, mk2.body)
	}
	time.Sleep(300 * time.Millisecond)
	if do(t, ts, "GET", cmPath+"/foreign", "").code != 200 {
		t.Fatal("object owned by an unregistered kind was collected")
	}
}

func TestScale(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"s"},"spec":{"size":1,"replicas":2}}`)
	if r := do(t, ts, "PATCH", wdPath+"/s/status", `{"status":{"replicas":2}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	sc := do(t, ts, "GET", wdPath+"/s/scale", "").object(t)
	if str(sc, "kind") != "Scale" || str(sc, "apiVersion") != "autoscaling/v1" || str(sc, "spec", "replicas") != "2" || str(sc, "status", "replicas") != "2" || str(sc, "metadata", "name") != "s" {
		t.Fatalf("scale: %v", sc)
	}
	// kubectl get --subresource=scale asks for a Table: Desired and Available.
	tb := do(t, ts, "GET", wdPath+"/s/scale", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json").object(t)
	cols, _ := tb["columnDefinitions"].([]any)
	rows, _ := tb["rows"].([]any)
	if str(tb, "kind") != "Table" || len(cols) != 4 || len(rows) != 1 {
		t.Fatalf("scale table: %v", tb)
	}
	cells := rows[0].(map[string]any)["cells"].([]any)
	if cols[1].(map[string]any)["name"] != "Desired" || cols[2].(map[string]any)["name"] != "Available" || cells[0] != "s" || cells[1] != 2.0 || cells[2] != 2.0 {
		t.Fatalf("scale table columns %v, cells %v", cols, cells)
	}
	r := do(t, ts, "PATCH", wdPath+"/s/scale", `{"spec":{"replicas":5}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || str(r.object(t), "spec", "replicas") != "5" {
		t.Fatalf("scale patch: %d %s", r.code, r.body)
	}
	w := do(t, ts, "GET", wdPath+"/s", "").object(t)
	if str(w, "spec", "replicas") != "5" || str(w, "metadata", "generation") != "2" {
		t.Fatalf("widget after scale: %v", w)
	}
	r = do(t, ts, "PUT", wdPath+"/s/scale", fmt.Sprintf(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"s","resourceVersion":%q},"spec":{"replicas":1}}`, str(w, "metadata", "resourceVersion")))
	if r.code != 200 || str(r.object(t), "spec", "replicas") != "1" {
		t.Fatalf("scale put: %d %s", r.code, r.body)
	}
	do(t, ts, "PUT", wdPath+"/s/scale", fmt.Sprintf(`{"metadata":{"name":"s","resourceVersion":%q},"spec":{"replicas":3}}`, str(w, "metadata", "resourceVersion"))).status(t, 409, meta.StatusReasonConflict)
	st := do(t, ts, "PATCH", wdPath+"/s/scale", `{"spec":{"replicas":-1}}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)
	if st.Details.Kind != "Scale" || st.Details.Causes[0].Field != "spec.replicas" {
		t.Fatalf("negative scale: %+v", st)
	}
	do(t, ts, "POST", wdPath+"/s/scale", `{}`).status(t, 405, meta.StatusReasonMethodNotAllowed)
	do(t, ts, "GET", cmPath+"/x/scale", "").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "GET", wdPath+"/missing/scale", "").status(t, 404, meta.StatusReasonNotFound)
}
