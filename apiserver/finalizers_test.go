package apiserver

import (
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// TestFinalizerNames: built-in types refuse a finalizer name that is neither
// qualified nor standard (422); custom resources take it with a warning when
// it is added, as kube-apiserver does.
func TestFinalizerNames(t *testing.T) {
	api, ts := newTestServer(t)
	st := do(t, ts, "POST", cmPath, `{"metadata":{"name":"f1","finalizers":["foo"]}}`).status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, `metadata.finalizers[0]: Invalid value: "foo": name is neither a standard finalizer name nor is it fully qualified`) {
		t.Fatalf("message %q", st.Message)
	}
	for _, fin := range []string{"kubernetes", "orphan", "example.dev/hold"} {
		if r := do(t, ts, "POST", cmPath, `{"metadata":{"generateName":"ok-","finalizers":["`+fin+`"]}}`); r.code != 201 {
			t.Fatalf("finalizer %q: %d %s", fin, r.code, r.body)
		}
	}
	if r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"f2"}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	do(t, ts, "PATCH", cmPath+"/f2", `{"metadata":{"finalizers":["foo"]}}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)

	// Which built-in types are strict is kube-apiserver's choice: leases and
	// core v1 events take any qualified name, events.k8s.io events do not.
	for _, res := range append(registry.Events(registry.EventOptions{}), registry.Leases()) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	lease := `{"metadata":{"name":"l","finalizers":["foo"]},"spec":{}}`
	if r := do(t, ts, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease); r.code != 201 {
		t.Fatalf("lease with an unqualified finalizer: %d %s", r.code, r.body)
	}
	ev := `{"metadata":{"name":"e.1","finalizers":["foo"]},"involvedObject":{"namespace":"default"}}`
	if r := do(t, ts, "POST", coreEvents, ev); r.code != 201 {
		t.Fatalf("core event with an unqualified finalizer: %d %s", r.code, r.body)
	}
	do(t, ts, "POST", v1Events, `{"metadata":{"name":"e.2","finalizers":["foo"]},"eventTime":"2026-01-02T03:04:05.000000Z","reportingController":"example.dev/c","reportingInstance":"c-1","action":"A","reason":"R","type":"Normal","regarding":{"namespace":"default"}}`).status(t, 422, meta.StatusReasonInvalid)

	const warning = `metadata.finalizers: \"foo\": prefer a domain-qualified finalizer name to avoid accidental conflicts`
	r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","finalizers":["foo"]},"spec":{"size":1}}`)
	if r.code != 201 || !strings.Contains(r.header.Get("Warning"), warning) {
		t.Fatalf("custom resource: %d, Warning %q", r.code, r.header.Get("Warning"))
	}
	// Kept, not added: no warning.
	r = do(t, ts, "PATCH", wdPath+"/w", `{"spec":{"size":2}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || r.header.Get("Warning") != "" {
		t.Fatalf("update keeping the finalizer: %d, Warning %q", r.code, r.header.Get("Warning"))
	}
}

// TestNamespaceValidation: spec.finalizers are finalizer names, the phase
// follows the deletion, and conditions are NamespaceConditions.
func TestNamespaceValidation(t *testing.T) {
	_, ts := newTestServer(t)
	ns := "/api/v1/namespaces"
	if r := do(t, ts, "POST", ns, `{"metadata":{"name":"nv"}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	do(t, ts, "PUT", ns+"/nv/finalize", `{"metadata":{"name":"nv"},"spec":{"finalizers":["Bad Name!"]}}`).status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "PUT", ns+"/nv/finalize", `{"metadata":{"name":"nv"},"spec":{"finalizers":["custom"]}}`).status(t, 422, meta.StatusReasonInvalid)
	st := do(t, ts, "PATCH", ns+"/nv/status", `{"status":{"phase":"Terminating"}}`, "Content-Type", "application/merge-patch+json").status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty") {
		t.Fatalf("message %q", st.Message)
	}
	// As there, a condition's type and status are not required.
	if r := do(t, ts, "PATCH", ns+"/nv/status", `{"status":{"conditions":[{"status":"True"}]}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("condition without a type: %d %s", r.code, r.body)
	}
	r := do(t, ts, "PATCH", ns+"/nv/status", `{"status":{"conditions":[{"type":"X","status":"True","bogus":1}]}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 || strings.Contains(string(r.body), "bogus") {
		t.Fatalf("condition with an unknown field: %d %s", r.code, r.body)
	}
	// The phase rule is the status writer's: an update of the namespace
	// itself keeps the stored status and is not checked against it.
	if r := do(t, ts, "PATCH", ns+"/nv", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("label patch: %d %s", r.code, r.body)
	}
	got := do(t, ts, "GET", ns+"/nv", "").object(t)
	if str(got, "status", "phase") != "Active" {
		t.Fatalf("phase after the refused writes: %v", got["status"])
	}
}
