package apiserver

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

const (
	coreEvents = "/api/v1/namespaces/default/events"
	v1Events   = "/apis/events.k8s.io/v1/namespaces/default/events"
)

// newEventServer is a test server that also serves both event views.
func newEventServer(t *testing.T, opts registry.EventOptions) *httptest.Server {
	t.Helper()
	api, ts := newTestServer(t)
	for _, res := range registry.Events(opts) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// recorderEvent is an event as client-go's core v1 recorder (tools/record)
// writes it.
func recorderEvent(name, object, typ, component string) string {
	now := time.Now().UTC().Format(time.RFC3339)
	return fmt.Sprintf(`{"metadata":{"name":%q},"involvedObject":{"kind":"ConfigMap","namespace":"default","name":%q,"uid":"uid-%s","apiVersion":"v1"},
		"reason":"Created","message":"made %s","source":{"component":%q},"firstTimestamp":%q,"lastTimestamp":%q,"count":1,"type":%q}`,
		name, object, object, object, component, now, now, typ)
}

// newAPIEvent is an event as client-go's events.k8s.io/v1 recorder
// (tools/events) writes it.
func newAPIEvent(name, object, typ string) string {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	return fmt.Sprintf(`{"metadata":{"name":%q},"eventTime":%q,"reportingController":"example.dev/ctl","reportingInstance":"ctl-1",
		"action":"Sync","reason":"Synced","regarding":{"kind":"ConfigMap","namespace":"default","name":%q,"uid":"uid-%s"},"note":"synced %s","type":%q}`,
		name, now, object, object, object, typ)
}

// TestEventsTwoViews: an event written through one API is read through the
// other with Kubernetes' field mapping, by get, list and watch.
func TestEventsTwoViews(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	if r := do(t, ts, "POST", coreEvents, recorderEvent("cm1.1", "cm1", "Normal", "tester")); r.code != 201 {
		t.Fatalf("core create: %d %s", r.code, r.body)
	}
	got := do(t, ts, "GET", v1Events+"/cm1.1", "").object(t)
	for path, want := range map[string]string{
		"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding.name": "cm1", "regarding.uid": "uid-cm1",
		"note": "made cm1", "deprecatedSource.component": "tester", "deprecatedCount": "1", "reason": "Created",
	} {
		if v := str(got, strings.Split(path, ".")...); v != want {
			t.Errorf("events.k8s.io view: %s = %q, want %q", path, v, want)
		}
	}
	for _, f := range []string{"involvedObject", "message", "source", "count", "firstTimestamp"} {
		if _, ok := got[f]; ok {
			t.Errorf("events.k8s.io view has core field %s", f)
		}
	}

	w := startWatch(t, ts, v1Events+"?watch=1&resourceVersion="+str(got, "metadata", "resourceVersion"))
	if r := do(t, ts, "POST", v1Events, newAPIEvent("cm2.1", "cm2", "Warning")); r.code != 201 {
		t.Fatalf("events.k8s.io create: %d %s", r.code, r.body)
	}
	core := do(t, ts, "GET", coreEvents+"/cm2.1", "").object(t)
	for path, want := range map[string]string{
		"apiVersion": "v1", "involvedObject.name": "cm2", "message": "synced cm2", "reportingComponent": "example.dev/ctl",
		"reportingInstance": "ctl-1", "action": "Sync", "type": "Warning",
	} {
		if v := str(core, strings.Split(path, ".")...); v != want {
			t.Errorf("core view: %s = %q, want %q", path, v, want)
		}
	}
	if ev := w.next(t); ev["type"] != "ADDED" || str(ev, "object", "note") != "synced cm2" {
		t.Errorf("watch: %v", ev)
	}
	// A recorder's count update through core reaches the other view's watch.
	r := do(t, ts, "PATCH", coreEvents+"/cm1.1", `{"count":2,"message":"made cm1 again"}`, "Content-Type", "application/strategic-merge-patch+json")
	if r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	if ev := w.next(t); ev["type"] != "MODIFIED" || str(ev, "object", "deprecatedCount") != "2" || str(ev, "object", "note") != "made cm1 again" {
		t.Errorf("watch after the core patch: %v", ev)
	}
	// A series update as tools/events sends it.
	r = do(t, ts, "PATCH", v1Events+"/cm2.1", `{"series":{"count":2,"lastObservedTime":"`+time.Now().UTC().Format(time.RFC3339Nano)+`"}}`,
		"Content-Type", "application/merge-patch+json")
	if r.code != 200 || str(r.object(t), "series", "count") != "2" {
		t.Fatalf("series patch: %d %s", r.code, r.body)
	}
	if ev := w.next(t); ev["type"] != "MODIFIED" || str(ev, "object", "series", "count") != "2" {
		t.Errorf("watch after the series patch: %v", ev)
	}
	r = do(t, ts, "DELETE", coreEvents+"/cm2.1", "")
	if r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if ev := w.next(t); ev["type"] != "DELETED" || str(ev, "object", "regarding", "name") != "cm2" {
		t.Errorf("watch after the delete: %v", ev)
	}
}

// TestBuiltinGroupsStrategicMerge: kube-apiserver serves strategic merge
// patch for all its built-in types, not only the core group's: client-go's
// events.k8s.io/v1 recorder (tools/events) sends its series updates as one
// (a 415 made it drop them: "Server rejected event (will not retry!)"),
// and leases take it too. The OpenAPI of both says so; custom types still
// answer 415 (TestStrategicMergePatch).
func TestBuiltinGroupsStrategicMerge(t *testing.T) {
	api, ts := newTestServer(t)
	for _, res := range append(registry.Events(registry.EventOptions{}), registry.Leases()) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	if r := do(t, ts, "POST", v1Events, newAPIEvent("cm3.1", "cm3", "Normal")); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	// The body tools/events' createPatchBytesForSeries makes.
	r := do(t, ts, "PATCH", v1Events+"/cm3.1", `{"series":{"count":2,"lastObservedTime":"`+time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")+`"}}`,
		"Content-Type", "application/strategic-merge-patch+json")
	if r.code != 200 || str(r.object(t), "series", "count") != "2" {
		t.Fatalf("strategic series patch: %d %s", r.code, r.body)
	}
	if got := do(t, ts, "GET", coreEvents+"/cm3.1", "").object(t); str(got, "series", "count") != "2" || str(got, "message") != "synced cm3" {
		t.Errorf("core view after the patch: %v", got)
	}
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	if r := do(t, ts, "POST", leases, `{"metadata":{"name":"l"},"spec":{"holderIdentity":"a","leaseDurationSeconds":10}}`); r.code != 201 {
		t.Fatalf("create lease: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PATCH", leases+"/l", `{"spec":{"holderIdentity":"b"}}`, "Content-Type", "application/strategic-merge-patch+json")
	if got := r.object(t); r.code != 200 || str(got, "spec", "holderIdentity") != "b" || str(got, "spec", "leaseDurationSeconds") != "10" {
		t.Fatalf("strategic lease patch: %d %s", r.code, r.body)
	}
	for _, gv := range []string{"events.k8s.io/v1", "coordination.k8s.io/v1"} {
		doc := string(do(t, ts, "GET", "/openapi/v3/apis/"+gv, "").body)
		if !strings.Contains(doc, "application/strategic-merge-patch+json") {
			t.Errorf("OpenAPI of %s: PATCH does not consume strategic merge patches", gv)
		}
	}
}

// TestEventFieldSelectors: the selectors kubectl describe, kubectl events
// and recorders send, on both views, from storage and from the watch cache.
func TestEventFieldSelectors(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	for _, body := range []string{recorderEvent("a.1", "a", "Normal", "kubelet"), recorderEvent("b.1", "b", "Warning", "other")} {
		if r := do(t, ts, "POST", coreEvents, body); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	if r := do(t, ts, "POST", v1Events, newAPIEvent("c.1", "c", "Normal")); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	names := func(path string) string {
		t.Helper()
		r := do(t, ts, "GET", path, "")
		if r.code != 200 {
			t.Fatalf("%s: %d %s", path, r.code, r.body)
		}
		var out []string
		items, _ := r.object(t)["items"].([]any)
		for _, it := range items {
			out = append(out, str(it.(map[string]any), "metadata", "name"))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ path, sel, want string }{
		{coreEvents, "involvedObject.name=a,involvedObject.namespace=default,involvedObject.kind=ConfigMap,involvedObject.uid=uid-a", "a.1"},
		{coreEvents, "type=Warning", "b.1"},
		{coreEvents, "source=kubelet", "a.1"},
		{coreEvents, "reason=Synced", "c.1"},
		{coreEvents, "reportingComponent=example.dev/ctl", "c.1"},
		{coreEvents, "involvedObject.kind=ConfigMap,type!=Warning", "a.1,c.1"},
		{v1Events, "regarding.name=b", "b.1"},
		{v1Events, "reportingController=example.dev/ctl", "c.1"},
		{v1Events, "type=Normal", "a.1,c.1"},
	} {
		for _, rv := range []string{"", "&resourceVersion=0"} {
			if got := names(tc.path + "?fieldSelector=" + tc.sel + rv); got != tc.want {
				t.Errorf("%s %s%s: %q, want %q", tc.path, tc.sel, rv, got, tc.want)
			}
		}
	}
	do(t, ts, "GET", coreEvents+"?fieldSelector=regarding.name=a", "").status(t, 400, "BadRequest")
	do(t, ts, "GET", v1Events+"?fieldSelector=involvedObject.name=a", "").status(t, 400, "BadRequest")
}

// TestEventTable: kube-apiserver's columns; the name is the last, wide-only
// column.
func TestEventTable(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	if r := do(t, ts, "POST", coreEvents, recorderEvent("a.1", "a", "Normal", "kubelet")); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "POST", v1Events, newAPIEvent("c.1", "c", "Warning")); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	for _, path := range []string{coreEvents, v1Events} {
		tbl := do(t, ts, "GET", path, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").object(t)
		var cols []string
		for _, c := range tbl["columnDefinitions"].([]any) {
			cols = append(cols, c.(map[string]any)["name"].(string))
		}
		if got := strings.Join(cols, ","); got != "Last Seen,Type,Reason,Object,Subobject,Source,Message,First Seen,Count,Name" {
			t.Fatalf("%s columns: %s", path, got)
		}
		rows := tbl["rows"].([]any)
		if len(rows) != 2 {
			t.Fatalf("%s: %d rows", path, len(rows))
		}
		want := [][]string{
			{"Normal", "Created", "configmap/a", "", "kubelet", "made a", "1", "a.1"},
			{"Warning", "Synced", "configmap/c", "", "example.dev/ctl, ctl-1", "synced c", "1", "c.1"},
		}
		for i, row := range rows {
			cells := row.(map[string]any)["cells"].([]any)
			got := []string{fmt.Sprint(cells[1]), fmt.Sprint(cells[2]), fmt.Sprint(cells[3]), fmt.Sprint(cells[4]),
				fmt.Sprint(cells[5]), fmt.Sprint(cells[6]), fmt.Sprint(cells[8]), fmt.Sprint(cells[9])}
			if strings.Join(got, "|") != strings.Join(want[i], "|") {
				t.Errorf("%s row %d: %q, want %q", path, i, got, want[i])
			}
			if age, _ := cells[0].(string); !strings.HasSuffix(age, "s") {
				t.Errorf("%s row %d: last seen %v, want an age", path, i, cells[0])
			}
		}
	}
}

// TestEventValidation: the checks of every event, and the stricter ones of
// events.k8s.io/v1, with kube-apiserver's fields.
func TestEventValidation(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	for _, tc := range []struct {
		path, body string
		code       int
		causes     string
	}{
		{coreEvents, `{"metadata":{"name":"x"},"involvedObject":{"namespace":"other"}}`, 422, "involvedObject.namespace"},
		{coreEvents, `{"metadata":{"name":"x"},"involvedObject":{"namespace":"default"},"eventTime":"2026-01-02T03:04:05.000000Z"}`, 422,
			"reportingComponent,reportingInstance,action,reason"},
		{coreEvents, `{"metadata":{"name":"x"},"involvedObject":{},"count":4294967296}`, 400, ""},
		{coreEvents, `{"metadata":{"name":"x"},"involvedObject":{},"lastTimestamp":"noon"}`, 400, ""},
		{v1Events, `{"metadata":{"name":"x"},"regarding":{"namespace":"default"},"reason":"R","type":"Normal"}`, 422, "eventTime"},
		{v1Events, strings.Replace(newAPIEvent("x", "x", "Info"), `"note"`, `"deprecatedCount":3,"note"`, 1), 422, "type,deprecatedCount"},
		{v1Events, strings.Replace(newAPIEvent("x", "x", "Normal"), `"note"`, `"series":{"count":1},"note"`, 1), 422,
			"series.count,series.lastObservedTime"},
		{v1Events, strings.Replace(newAPIEvent("x", "x", "Normal"), `"reportingController":"example.dev/ctl"`, `"reportingController":"a b"`, 1), 422,
			"reportingController"},
	} {
		r := do(t, ts, "POST", tc.path, tc.body)
		if r.code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, r.code, r.body, tc.code)
			continue
		}
		if tc.causes == "" {
			continue
		}
		var fields []string
		details, _ := r.object(t)["details"].(map[string]any)
		causes, _ := details["causes"].([]any)
		for _, c := range causes {
			fields = append(fields, c.(map[string]any)["field"].(string))
		}
		if got := strings.Join(fields, ","); got != tc.causes {
			t.Errorf("%s %s: causes %s, want %s", tc.path, tc.body, got, tc.causes)
		}
	}
	// Through events.k8s.io/v1 only the series may change.
	if r := do(t, ts, "POST", v1Events, newAPIEvent("y", "y", "Normal")); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	r := do(t, ts, "PATCH", v1Events+"/y", `{"note":"changed"}`, "Content-Type", "application/merge-patch+json")
	if st := r.status(t, 422, "Invalid"); !strings.Contains(st.Message, `message: Invalid value: "changed": field is immutable`) {
		t.Errorf("note change: %s", st.Message)
	}
}

// TestEventCreateOnUpdate: a PUT creates a missing event, as
// kube-apiserver's event strategy allows.
func TestEventCreateOnUpdate(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	r := do(t, ts, "PUT", coreEvents+"/p.1", recorderEvent("p.1", "p", "Normal", "x"))
	if r.code != 201 {
		t.Fatalf("PUT to create: %d %s", r.code, r.body)
	}
	r = do(t, ts, "PUT", coreEvents+"/p.1", recorderEvent("p.1", "p", "Warning", "x"))
	if r.code != 200 || str(r.object(t), "type") != "Warning" {
		t.Fatalf("PUT to update: %d %s", r.code, r.body)
	}
	body := strings.Replace(recorderEvent("q.1", "q", "Normal", "x"), `"name":"q.1"`, `"name":"q.1","resourceVersion":"5"`, 1)
	do(t, ts, "PUT", coreEvents+"/q.1", body).status(t, 404, "NotFound")
}

// TestEventBudget: past its burst, a user's event writes are refused with
// 429 and Retry-After, and other types are not affected.
func TestEventBudget(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{PerUser: registry.Limit{QPS: 0.01, Burst: 3}})
	for i := range 3 {
		if r := do(t, ts, "POST", coreEvents, recorderEvent(fmt.Sprintf("s.%d", i), "s", "Normal", "x")); r.code != 201 {
			t.Fatalf("event %d: %d %s", i, r.code, r.body)
		}
	}
	r := do(t, ts, "POST", v1Events, newAPIEvent("s.3", "s", "Normal"))
	st := r.status(t, 429, "TooManyRequests")
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" || st.Details == nil || st.Details.RetryAfterSeconds < 1 {
		t.Errorf("Retry-After %q, details %+v", ra, st.Details)
	}
	if r := do(t, ts, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c"}}`); r.code != 201 {
		t.Errorf("configmap create beside the event storm: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "GET", coreEvents+"/s.0", ""); r.code != 200 {
		t.Errorf("reads are not charged: %d", r.code)
	}
}

// TestEventReferencesAtomic: an event's object references are atomic in
// server-side apply (ObjectReference is structType=atomic in Kubernetes):
// one field set owns the whole reference, and another manager changing it
// conflicts instead of merging.
func TestEventReferencesAtomic(t *testing.T) {
	ts := newEventServer(t, registry.EventOptions{})
	r := do(t, ts, "POST", coreEvents, recorderEvent("a.1", "a", "Normal", "tester"))
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if !strings.Contains(string(r.body), `"f:involvedObject":{}`) {
		t.Fatalf("managedFields own involvedObject field by field: %s", r.body)
	}
	apply := func(manager, uid string) response {
		body := `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"b.1"},"eventTime":"2026-01-02T03:04:05.000000Z",
			"reportingController":"example.dev/ctl","reportingInstance":"ctl-1","action":"Sync","reason":"Synced","type":"Normal",
			"regarding":{"kind":"ConfigMap","namespace":"default","name":"b"` + uid + `}}`
		return do(t, ts, "PATCH", v1Events+"/b.1?fieldManager="+manager, body, "Content-Type", "application/apply-patch+yaml")
	}
	if r := apply("first", ""); r.code != 201 {
		t.Fatalf("first apply: %d %s", r.code, r.body)
	}
	apply("second", `,"uid":"u"`).status(t, 409, "Conflict")
}
