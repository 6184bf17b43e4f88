package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// Admission hooks see the object in the version of the request: a hook of
// a version's Resource runs for the requests to that version, with objects
// in that version; a global hook (Config.Admission) runs for every version,
// each request in its own.
func TestVersionsAdmissionSeesTheRequestsVersion(t *testing.T) {
	vw := &versionedWidgets{admission: make(chan string, 32)}
	global := make(chan string, 32)
	_, ts := newVersionsServer(t, vw, func(cfg *Config) {
		cfg.Admission = []registry.AdmissionHook{{Name: "global", Resources: []string{"widgets.example.dev"},
			Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
				global <- admissionSeen("global", req)
				return nil
			}}}
	})
	next := func(ch chan string) string {
		t.Helper()
		select {
		case s := <-ch:
			return s
		default:
			t.Fatal("no admission call")
			return ""
		}
	}
	none := func(ch chan string) {
		t.Helper()
		select {
		case s := <-ch:
			t.Errorf("unexpected admission call: %s", s)
		default:
		}
	}

	vwCreate(t, ts, "a", "red", "")
	if got, want := next(vw.admission), "v1: CREATE v1 example.dev/v1 map[color:red replicas:2 size:1]"; got != want {
		t.Errorf("create through v1: %s, want %s", got, want)
	}
	if got, want := next(global), "global: CREATE v1 example.dev/v1 map[color:red replicas:2 size:1]"; got != want {
		t.Errorf("create through v1: %s, want %s", got, want)
	}
	none(vw.admission)

	r := do(t, ts, "PATCH", vwPathOf("v2")+"/a", `{"spec":{"paint":{"color":"green"}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 {
		t.Fatalf("patch through v2: %d %s", r.code, r.body)
	}
	want := "UPDATE v2 example.dev/v2 map[paint:map[color:green] scale:map[replicas:2] size:1] / example.dev/v2 map[paint:map[color:red] scale:map[replicas:2] size:1]"
	if got := next(vw.admission); got != "v2: "+want {
		t.Errorf("patch through v2: %s, want v2: %s", got, want)
	}
	if got := next(global); got != "global: "+want {
		t.Errorf("patch through v2: %s, want global: %s", got, want)
	}
	none(vw.admission) // v1's hook does not run for a request to v2
	none(global)
}

// An owner reference may name the owner in any of its versions: a
// dependent whose reference says example.dev/v2 is collected when the
// owner is deleted through v1, and kept while the owner exists.
func TestVersionsGarbageCollectionOwnerInAnotherVersion(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	r := do(t, ts, "POST", vwPathOf("v1"), `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"owner"},"spec":{"size":1}}`)
	uid := str(r.object(t), "metadata", "uid")
	for _, name := range []string{"dep", "other"} {
		owner := "owner"
		if name == "other" {
			owner = "nobody-" // a reference whose owner does not exist: collected in any case
		}
		refs := fmt.Sprintf(`[{"apiVersion":"example.dev/v2","kind":"Widget","name":%q,"uid":%q}]`, owner, uid)
		if r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":%q,"ownerReferences":%s}}`, name, refs)); r.code != 201 {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
	}
	eventually(t, "the dependent of an owner that does not exist to be collected", func() bool {
		return do(t, ts, "GET", cmPath+"/other", "").code == 404
	})
	if r := do(t, ts, "GET", cmPath+"/dep", ""); r.code != 200 {
		t.Fatalf("the dependent of an existing owner named in v2 was collected: %d %s", r.code, r.body)
	}
	do(t, ts, "DELETE", vwPathOf("v1")+"/owner", `{"propagationPolicy":"Background"}`).status(t, 200, "")
	eventually(t, "the dependent to be collected", func() bool { return do(t, ts, "GET", cmPath+"/dep", "").code == 404 })
}

// A conversion that fails or panics fails the reads of that object through
// the version it cannot be converted into, with a 500 naming the type, the
// versions and the object; the other version and the other objects are
// served.
func TestVersionsConversionFailure(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	rv := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion")
	w1 := startWatch(t, ts, vwPathOf("v1")+"?watch=1&resourceVersion="+rv)
	w2 := startWatch(t, ts, vwPathOf("v2")+"?watch=1&resourceVersion="+rv)
	vwCreate(t, ts, "good", "red", "")
	vwCreate(t, ts, "bad", "red", `{"convert":"fail"}`)
	vwCreate(t, ts, "worse", "red", `{"convert":"panic"}`)

	for name, why := range map[string]string{"bad": "paint is not representable", "worse": "the conversion panicked: the paint spilled"} {
		st := do(t, ts, "GET", vwPathOf("v2")+"/"+name, "").status(t, 500, "InternalError")
		if !containsAll(st.Message, "example.dev/v1", "example.dev/v2", "Widget", `"default/`+name+`"`, why) {
			t.Errorf("get %s through v2: %q", name, st.Message)
		}
		if o := vwGet(t, ts, "v1", name); str(o, "spec", "color") != "red" {
			t.Errorf("get %s through v1: %v", name, o)
		}
	}
	if o := vwGet(t, ts, "v2", "good"); paint(o) != "red" {
		t.Errorf("good through v2: %v", o)
	}
	for _, q := range []string{"", "?resourceVersion=0", "?limit=10&continue=", "?labelSelector=convert%3Dfail",
		// Selectors read the converted object: those that would leave the
		// failures out fail too, as kube-apiserver's do.
		"?labelSelector=!convert", "?fieldSelector=spec.paint.color%3Dblue"} {
		path := vwPathOf("v2") + q
		if strings.HasSuffix(q, "continue=") {
			l := do(t, ts, "GET", vwPathOf("v1")+"?limit=1", "").object(t) // "bad" first
			path += str(l, "metadata", "continue")
		}
		st := do(t, ts, "GET", path, "").status(t, 500, "InternalError")
		if !containsAll(st.Message, "example.dev/v2", "Widget", `"default/`) {
			t.Errorf("list%s through v2: %q", q, st.Message)
		}
	}
	if l := do(t, ts, "GET", vwPathOf("v1"), "").object(t); len(l["items"].([]any)) != 3 {
		t.Errorf("list through v1: %v", l)
	}

	// The v2 watch reports the object it cannot convert; the v1 watch goes on.
	if e, _ := vwEvent(w2.next(t)); !strings.HasPrefix(e, "ADDED good ") {
		t.Errorf("v2 watch: %s", e)
	}
	ev := w2.next(t)
	if o, _ := ev["object"].(map[string]any); ev["type"] != "ERROR" || o["kind"] != "Status" || o["code"] != 500.0 ||
		!containsAll(str(o, "message"), "example.dev/v2", "Widget", `"default/bad"`, "paint is not representable") {
		t.Errorf("v2 watch, at the object it cannot convert: %v", ev)
	}
	vwCreate(t, ts, "later", "red", "")
	var seen []string
	for range 4 {
		e, _ := vwEvent(w1.next(t))
		seen = append(seen, e[:strings.LastIndexByte(e, ' ')])
	}
	if strings.Join(seen, ",") != "ADDED good,ADDED bad,ADDED worse,ADDED later" {
		t.Errorf("v1 watch: %v", seen)
	}
	// The v2 watch ended with its ERROR event (its client lists again);
	// a new one reports the object among its initial events, and ends.
	if ev, ok := <-w2.events; ok {
		t.Errorf("the v2 watch goes on after its ERROR event: %v", ev)
	}
	w := startWatch(t, ts, vwPathOf("v2")+"?watch=1&resourceVersion=0")
	var evs []map[string]any
	for ev := range w.events {
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		t.Fatal("a new v2 watch ended without events")
	}
	if o, _ := evs[len(evs)-1]["object"].(map[string]any); len(evs) > 2 || evs[len(evs)-1]["type"] != "ERROR" || !strings.Contains(str(o, "message"), `"default/bad"`) {
		t.Errorf("a new v2 watch: %v", evs)
	}
}

// Unserved and unknown versions are not found, as kube-apiserver answers
// for a CRD version that is not served; a deprecated version's responses
// carry kube's warning.
func TestVersionsUnservedAndDeprecated(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "a", "red", "")
	for _, v := range []string{"v1alpha1", "v3"} {
		for _, path := range []string{vwPathOf(v), vwPathOf(v) + "/a", "/apis/example.dev/" + v + "/widgets", "/apis/example.dev/" + v} {
			do(t, ts, "GET", path, "").status(t, 404, "NotFound")
		}
		do(t, ts, "POST", vwPathOf(v), `{"apiVersion":"example.dev/`+v+`","kind":"Widget","metadata":{"name":"b"}}`).status(t, 404, "NotFound")
	}
	const warning = `299 - "example.dev/v1beta1 Widget is deprecated; use example.dev/v2 Widget"`
	for _, c := range []struct{ method, path, body string }{
		{"GET", vwPathOf("v1beta1") + "/a", ""},
		{"GET", vwPathOf("v1beta1"), ""},
		{"POST", vwPathOf("v1beta1"), `{"apiVersion":"example.dev/v1beta1","kind":"Widget","metadata":{"name":"b"},"spec":{"color":"blue"}}`},
		{"GET", vwPathOf("v1beta1") + "/nope", ""},
	} {
		r := do(t, ts, c.method, c.path, c.body)
		if got := r.header.Values("Warning"); len(got) != 1 || got[0] != warning {
			t.Errorf("%s %s: %d, Warning %q", c.method, c.path, r.code, got)
		}
	}
	if o := vwGet(t, ts, "v1beta1", "a"); o["apiVersion"] != "example.dev/v1beta1" || str(o, "spec", "color") != "red" {
		t.Errorf("a through v1beta1: %v", o)
	}
	for _, v := range []string{"v1", "v2"} {
		if r := do(t, ts, "GET", vwPathOf(v)+"/a", ""); len(r.header.Values("Warning")) != 0 {
			t.Errorf("%s: Warning %q", v, r.header.Values("Warning"))
		}
	}
}
