package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// extRecorder records what host functions and admission hooks saw.
type extRecorder struct {
	mu       sync.Mutex
	requests []registry.Request
}

func (rec *extRecorder) request(req *registry.Request) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.requests = append(rec.requests, *req)
}

func (rec *extRecorder) last(t *testing.T) registry.Request {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) == 0 {
		t.Fatal("no host function was called")
	}
	return rec.requests[len(rec.requests)-1]
}

func (rec *extRecorder) calls() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.requests)
}

// restartSchema is the schema of WidgetRestart: a reason of at most 10
// characters.
const restartSchema = `{"type":"object","properties":{"reason":{"type":"string","maxLength":10}}}`

// widgetsWithCustom is the test Widget type with custom subresources:
// restart (POST, acts through the store), log (a stream, ?follow=true),
// health (a computed view), echo (PUT), and boom/fail (a panicking and a
// failing handler).
func widgetsWithCustom(t *testing.T, rec *extRecorder) registry.Resource {
	t.Helper()
	var rs schema.Schema
	if err := json.Unmarshal([]byte(restartSchema), &rs); err != nil {
		t.Fatal(err)
	}
	res := widgetResource(t)
	res.Subresources.Custom = map[string]registry.Subresource{
		"restart": {
			Kind:   meta.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "WidgetRestart"},
			Schema: &rs,
			Create: func(ctx context.Context, req *registry.Request, body registry.Object) (registry.Object, error) {
				rec.request(req)
				w, err := req.Store.GetObject(ctx, req.Namespace, req.Name)
				if err != nil {
					return nil, err
				}
				md := w["metadata"].(map[string]any)
				reason, _ := body["reason"].(string)
				md["annotations"] = map[string]any{"example.dev/restartedAt": time.Now().UTC().Format(time.RFC3339Nano), "example.dev/reason": reason}
				out, err := req.Store.Update(ctx, req.Namespace, req.Name, w, registry.WriteOptions{DryRun: req.DryRun, FieldManager: "restart"})
				if err != nil {
					return nil, err
				}
				return out.Object, nil
			},
		},
		"log": {
			Stream: func(ctx context.Context, req *registry.Request, w io.Writer) error {
				rec.request(req)
				fmt.Fprintf(w, "widget %s rv=%s\n", req.Name, meta.GetResourceVersion(req.Parent))
				if req.Query.Get("follow") != "true" {
					return nil
				}
				events, err := req.Store.WatchObject(ctx, req.Namespace, req.Name, meta.GetResourceVersion(req.Parent))
				if err != nil {
					return err
				}
				for ev := range events {
					size, _, _ := meta.NestedField(ev.Object, "spec", "size")
					fmt.Fprintf(w, "%s size=%v\n", ev.Type, size)
				}
				return nil
			},
		},
		"health": {
			Kind: meta.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "WidgetHealth"},
			Get: func(_ context.Context, req *registry.Request) (registry.Object, error) {
				rec.request(req)
				size, _, _ := meta.NestedField(req.Parent, "spec", "size")
				return registry.Object{"metadata": map[string]any{"name": req.Name}, "healthy": true, "size": size}, nil
			},
		},
		"echo": {
			Update: func(_ context.Context, req *registry.Request, body registry.Object) (registry.Object, error) {
				rec.request(req)
				return body, nil
			},
		},
		"boom": {
			Create: func(context.Context, *registry.Request, registry.Object) (registry.Object, error) {
				panic("host bug")
			},
			Get: func(context.Context, *registry.Request) (registry.Object, error) {
				panic(fmt.Errorf("a panic with an error value"))
			},
		},
		"fail": {
			Get: func(context.Context, *registry.Request) (registry.Object, error) {
				return nil, errors.New("backend unreachable")
			},
			Create: func(context.Context, *registry.Request, registry.Object) (registry.Object, error) {
				return nil, meta.NewConflict(meta.GroupResource{Group: "example.dev", Resource: "widgets"}, "w1", "busy")
			},
		},
	}
	return res
}

// extServer serves namespaces, configmaps and widgets with custom
// subresources behind token authentication and this policy: admin may do
// everything; dev may get and create widgets in team but only get
// widgets/log; nobody may do nothing.
func extServer(t *testing.T, rec *extRecorder, hooks ...registry.AdmissionHook) (*Server, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{{Name: "dev", Namespace: "team", Rules: []auth.Rule{
			{APIGroups: []string{"example.dev"}, Resources: []string{"widgets", "widgets/log"}, Verbs: []string{"get", "create", "list", "watch"}},
		}}, {Name: "watcher", Namespace: "team", Rules: []auth.Rule{
			{APIGroups: []string{"example.dev"}, Resources: []string{"widgets/health", "widgets/log", "widgets/status", "widgets/scale"}, Verbs: []string{"watch"}},
		}}},
		Bindings: []auth.Binding{{Name: "dev", Namespace: "team", Role: "dev", Users: []string{"dev"}},
			{Name: "watcher", Namespace: "team", Role: "watcher", Users: []string{"watcher"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(context.Background(), Config{
		Storage: store,
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token":   {Name: "admin", Groups: []string{auth.GroupMasters}},
			"dev-token":     {Name: "dev"},
			"nobody-token":  {Name: "nobody"},
			"watcher-token": {Name: "watcher"},
		}),
		Authorizer: auth.Chain(auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.User != nil && a.User.InGroup(auth.GroupMasters) {
				return auth.Allow, "", nil
			}
			return auth.NoOpinion, "", nil
		}), authz),
		Admission:         hooks,
		DefaultNamespaces: []string{"default", "team"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetsWithCustom(t, rec)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return api, ts
}

var admin = bearer("admin-token")

const teamWidgets = "/apis/example.dev/v1/namespaces/team/widgets"

func createWidget(t *testing.T, ts *httptest.Server, name string) map[string]any {
	t.Helper()
	r := do(t, ts, "POST", teamWidgets, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"`+name+`"},"spec":{"size":1}}`, admin...)
	if r.code != 201 {
		t.Fatalf("create widget %s: %d %s", name, r.code, r.body)
	}
	return r.object(t)
}

func TestSubresourceBadInput(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	w1 := teamWidgets + "/w1"
	for _, c := range []struct {
		method, path, body string
		code               int
		reason             meta.StatusReason
	}{
		{"GET", w1 + "/bogus", "", 404, meta.StatusReasonNotFound},
		{"POST", w1 + "/bogus", `{}`, 404, meta.StatusReasonNotFound},
		{"GET", w1 + "/restart", "", 405, meta.StatusReasonMethodNotAllowed},
		{"PUT", w1 + "/restart", `{}`, 405, meta.StatusReasonMethodNotAllowed},
		{"PATCH", w1 + "/restart", `{}`, 405, meta.StatusReasonMethodNotAllowed},
		{"DELETE", w1 + "/restart", "", 405, meta.StatusReasonMethodNotAllowed},
		{"POST", w1 + "/log", `{}`, 405, meta.StatusReasonMethodNotAllowed},
		{"POST", w1 + "/health", `{}`, 405, meta.StatusReasonMethodNotAllowed},
		{"GET", w1 + "/echo", "", 405, meta.StatusReasonMethodNotAllowed},
		// The wrong kind, a wrong apiVersion, a body that is no object.
		{"POST", w1 + "/restart", `{"kind":"ConfigMap","apiVersion":"v1"}`, 400, meta.StatusReasonBadRequest},
		{"POST", w1 + "/restart", `{"kind":"WidgetRestart","apiVersion":"example.dev/v2"}`, 400, meta.StatusReasonBadRequest},
		{"POST", w1 + "/restart", `[1]`, 400, meta.StatusReasonBadRequest},
		{"POST", w1 + "/restart", `{"kind":"WidgetRestart","apiVersion":"example.dev/v1","metadata":{"name":"other"}}`, 400, meta.StatusReasonBadRequest},
		// Strict field validation; schema validation.
		{"POST", w1 + "/restart?fieldValidation=Strict", `{"kind":"WidgetRestart","apiVersion":"example.dev/v1","bogus":1}`, 400, meta.StatusReasonBadRequest},
		{"POST", w1 + "/restart", `{"kind":"WidgetRestart","apiVersion":"example.dev/v1","reason":"far too long a reason"}`, 422, meta.StatusReasonInvalid},
		{"POST", w1 + "/restart?dryRun=Maybe", `{}`, 422, meta.StatusReasonInvalid},
		// A missing parent.
		{"POST", teamWidgets + "/nope/restart", `{}`, 404, meta.StatusReasonNotFound},
		{"GET", teamWidgets + "/nope/log", "", 404, meta.StatusReasonNotFound},
		{"GET", teamWidgets + "/nope/health", "", 404, meta.StatusReasonNotFound},
		// Host functions that panic or fail: a 500 (a Status error passes through).
		{"POST", w1 + "/boom", `{}`, 500, meta.StatusReasonInternalError},
		{"GET", w1 + "/boom", "", 500, meta.StatusReasonInternalError},
		{"GET", w1 + "/fail", "", 500, meta.StatusReasonInternalError},
		{"POST", w1 + "/fail", `{}`, 409, meta.StatusReasonConflict},
	} {
		r := do(t, ts, c.method, c.path, c.body, admin...)
		st := r.status(t, c.code, c.reason)
		if c.code == 405 && st.Message != "the server does not allow this method on the requested resource" {
			t.Errorf("%s %s: message %q", c.method, c.path, st.Message)
		}
		if c.code == 404 && strings.Contains(c.path, "/nope/") && st.Message != `widgets.example.dev "nope" not found` {
			t.Errorf("%s %s: message %q", c.method, c.path, st.Message)
		}
	}
	if r := do(t, ts, "POST", w1+"/restart", `{"kind":"ConfigMap","apiVersion":"v1"}`, admin...); !strings.Contains(string(r.body), `ConfigMap in version \"v1\" cannot be handled as a WidgetRestart`) {
		t.Errorf("wrong kind message: %s", r.body)
	}
	// None of the refused requests reached a host function but the failing ones.
	for _, req := range rec.requests {
		t.Errorf("a refused request reached the host: %+v", req)
	}
	// The server keeps serving after the panics.
	if r := do(t, ts, "GET", w1, "", admin...); r.code != 200 {
		t.Fatalf("after a panic: %d %s", r.code, r.body)
	}
}

func TestSubresourceRestart(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	w := createWidget(t, ts, "w1")
	rv := str(w, "metadata", "resourceVersion")
	ws := startWatchAs(t, ts, teamWidgets+"?watch=true&resourceVersion="+rv, "admin-token")
	t.Run("dry run", func(t *testing.T) {
		r := do(t, ts, "POST", teamWidgets+"/w1/restart?dryRun=All", `{"reason":"test"}`, admin...)
		if r.code != 201 {
			t.Fatalf("dry-run restart: %d %s", r.code, r.body)
		}
		if !rec.last(t).DryRun {
			t.Fatal("the host function did not see dryRun")
		}
		got := do(t, ts, "GET", teamWidgets+"/w1", "", admin...).object(t)
		if str(got, "metadata", "resourceVersion") != rv || str(got, "metadata", "annotations") != "" {
			t.Fatalf("a dry run changed the widget: %v", got)
		}
	})
	r := do(t, ts, "POST", teamWidgets+"/w1/restart?fieldValidation=Warn", `{"kind":"WidgetRestart","apiVersion":"example.dev/v1","reason":"test","bogus":1}`, admin...)
	if r.code != 201 {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	if w := r.header.Get("Warning"); !strings.Contains(w, `unknown field \"bogus\"`) {
		t.Errorf("Warning = %q", w)
	}
	out := r.object(t)
	if out["kind"] != "Widget" || str(out, "metadata", "annotations", "example.dev/reason") != "test" || str(out, "metadata", "resourceVersion") == rv {
		t.Fatalf("restart answered %s", r.body)
	}
	req := rec.last(t)
	if req.Verb != "create" || req.Subresource != "restart" || req.Namespace != "team" || req.Name != "w1" || req.User == nil || req.User.Name != "admin" || req.DryRun {
		t.Errorf("host saw %+v", req)
	}
	// Watchers of widgets see the change.
	ev := ws.next(t)
	obj, _ := ev["object"].(map[string]any)
	if ev["type"] != "MODIFIED" || str(obj, "metadata", "annotations", "example.dev/reason") != "test" {
		t.Fatalf("watch event %v", ev)
	}
	// An empty body is an empty WidgetRestart.
	if r := do(t, ts, "POST", teamWidgets+"/w1/restart", "", admin...); r.code != 201 {
		t.Fatalf("restart with no body: %d %s", r.code, r.body)
	}
	// PUT /echo answers the decoded body, kind filled in.
	r = do(t, ts, "PUT", teamWidgets+"/w1/echo", `{"spec":{"size":3}}`, admin...)
	if r.code != 200 || r.object(t)["kind"] != "Widget" || str(r.object(t), "spec", "size") != "3" {
		t.Fatalf("echo: %d %s", r.code, r.body)
	}
	if rec.last(t).Verb != "update" {
		t.Errorf("echo verb %q", rec.last(t).Verb)
	}
}

func TestSubresourceHealthAndLog(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	w := createWidget(t, ts, "w1")
	r := do(t, ts, "GET", teamWidgets+"/w1/health", "", admin...)
	if r.code != 200 {
		t.Fatalf("health: %d %s", r.code, r.body)
	}
	if h := r.object(t); h["kind"] != "WidgetHealth" || h["apiVersion"] != "example.dev/v1" || h["healthy"] != true || str(h, "size") != "1" {
		t.Fatalf("health: %s", r.body)
	}
	r = do(t, ts, "GET", teamWidgets+"/w1/log", "", admin...)
	if r.code != 200 || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || string(r.body) != "widget w1 rv="+str(w, "metadata", "resourceVersion")+"\n" {
		t.Fatalf("log: %d %q %q", r.code, r.header.Get("Content-Type"), r.body)
	}

	// follow=true streams a line per change and ends with the delete.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+teamWidgets+"/w1/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the log stream ended early: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); !strings.HasPrefix(l, "widget w1 rv=") {
		t.Fatalf("first line %q", l)
	}
	patch := func(size int) {
		t.Helper()
		r := do(t, ts, "PATCH", teamWidgets+"/w1", fmt.Sprintf(`{"spec":{"size":%d}}`, size), append(admin, "Content-Type", "application/merge-patch+json")...)
		if r.code != 200 {
			t.Fatalf("patch: %d %s", r.code, r.body)
		}
	}
	patch(2)
	if l := next(); l != "MODIFIED size=2" {
		t.Fatalf("line %q, want MODIFIED size=2", l)
	}
	patch(3)
	if l := next(); l != "MODIFIED size=3" {
		t.Fatalf("line %q, want MODIFIED size=3", l)
	}
	if r := do(t, ts, "DELETE", teamWidgets+"/w1", "", admin...); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if l := next(); l != "DELETED size=3" {
		t.Fatalf("line %q, want DELETED size=3", l)
	}
	if lines.Scan() {
		t.Fatalf("the stream goes on after the delete: %q", lines.Text())
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
}

// A client that goes away ends a follow stream (the host function returns).
func TestSubresourceStreamClientGone(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+teamWidgets+"/w1/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	// httptest.Server.Close waits for handlers: it returns once the stream
	// has ended.
	done := make(chan struct{})
	go func() { ts.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow stream did not end when the client went away")
	}
}

func TestSubresourceAuthorization(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	dev, nobody := bearer("dev-token"), bearer("nobody-token")
	// dev may get widgets and widgets/log, not widgets/restart or widgets/health.
	if r := do(t, ts, "GET", teamWidgets+"/w1/log", "", dev...); r.code != 200 {
		t.Fatalf("dev log: %d %s", r.code, r.body)
	}
	r := do(t, ts, "POST", teamWidgets+"/w1/restart", `{}`, dev...)
	st := r.status(t, 403, meta.StatusReasonForbidden)
	if !strings.Contains(st.Message, `cannot create resource "widgets/restart" in API group "example.dev" in the namespace "team"`) {
		t.Errorf("403 message %q", st.Message)
	}
	if st.Details == nil || st.Details.Kind != "widgets/restart" || st.Details.Name != "w1" {
		t.Errorf("403 details %+v", st.Details)
	}
	do(t, ts, "GET", teamWidgets+"/w1/health", "", dev...).status(t, 403, meta.StatusReasonForbidden)
	// Authorization comes first: unknown subresources and missing parents
	// reveal nothing.
	do(t, ts, "GET", teamWidgets+"/w1/bogus", "", nobody...).status(t, 403, meta.StatusReasonForbidden)
	do(t, ts, "GET", teamWidgets+"/nope/log", "", nobody...).status(t, 403, meta.StatusReasonForbidden)
	// dry run is authorized as the real thing.
	do(t, ts, "POST", teamWidgets+"/w1/restart?dryRun=All", `{}`, dev...).status(t, 403, meta.StatusReasonForbidden)
	if n := rec.calls(); n != 1 {
		t.Errorf("host functions ran %d times, want 1 (dev's log)", n)
	}
}

// A GET of a subresource is a get whatever ?watch says (kube-apiserver
// turns GET into watch only without a name): a user allowed only watch on a
// subresource cannot read it with ?watch=true.
func TestSubresourceWatchVerbIsGet(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	watcher := bearer("watcher-token")
	for _, sub := range []string{"health", "log", "status", "scale"} {
		for _, q := range []string{"?watch=true", "?watch=1&follow=true"} {
			r := do(t, ts, "GET", teamWidgets+"/w1/"+sub+q, "", watcher...)
			st := r.status(t, 403, meta.StatusReasonForbidden)
			if !strings.Contains(st.Message, `cannot get resource "widgets/`+sub+`"`) {
				t.Errorf("%s%s: 403 message %q", sub, q, st.Message)
			}
		}
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("host functions ran %d times for a user allowed only watch", n)
	}
	// Someone allowed get gets the subresource, as without ?watch.
	if r := do(t, ts, "GET", teamWidgets+"/w1/health?watch=true", "", admin...); r.code != 200 || r.object(t)["kind"] != "WidgetHealth" {
		t.Fatalf("admin health?watch=true: %d %s", r.code, r.body)
	}
}

func TestSubresourceAdmission(t *testing.T) {
	rec := &extRecorder{}
	var seen []registry.AdmissionRequest
	var mu sync.Mutex
	hook := registry.AdmissionHook{
		Name:         "restart-policy",
		SideEffects:  registry.SideEffectsNone,
		Subresources: []string{"restart"},
		Mutate: func(_ context.Context, req *registry.AdmissionRequest) error {
			if req.Subresource == "restart" {
				req.Object["reason"] = "mutated"
			}
			return nil
		},
		Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
			mu.Lock()
			seen = append(seen, *req)
			mu.Unlock()
			if req.Subresource == "restart" && req.Name == "locked" {
				return errors.New("locked widgets cannot restart")
			}
			return nil
		},
	}
	_, ts := extServer(t, rec, hook)
	createWidget(t, ts, "w1")
	createWidget(t, ts, "locked")
	r := do(t, ts, "POST", teamWidgets+"/w1/restart", `{"reason":"asked"}`, admin...)
	if r.code != 201 || str(r.object(t), "metadata", "annotations", "example.dev/reason") != "mutated" {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	r = do(t, ts, "POST", teamWidgets+"/locked/restart", `{}`, admin...)
	if st := r.status(t, 403, meta.StatusReasonForbidden); !strings.Contains(st.Message, "locked widgets cannot restart") {
		t.Errorf("denial %q", st.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	var restart *registry.AdmissionRequest
	for i := range seen {
		if seen[i].Subresource == "restart" && seen[i].Name == "w1" {
			restart = &seen[i]
		}
	}
	if restart == nil {
		t.Fatalf("the hook never saw the restart: %+v", seen)
	}
	if restart.Operation != registry.OperationCreate || restart.Kind.Kind != "WidgetRestart" || restart.Resource.Resource != "widgets" ||
		restart.Namespace != "team" || restart.User == nil || restart.User.Name != "admin" || restart.OldObject == nil {
		t.Errorf("admission request %+v", restart)
	}
}

func TestSubresourceDiscovery(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	r := do(t, ts, "GET", "/apis/example.dev/v1", "", admin...)
	var list struct {
		Resources []apiResource
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]apiResource{}
	for _, res := range list.Resources {
		got[res.Name] = res
	}
	for name, want := range map[string]apiResource{
		"widgets/restart": {Name: "widgets/restart", Namespaced: true, Kind: "WidgetRestart", Verbs: []string{"create"}},
		"widgets/log":     {Name: "widgets/log", Namespaced: true, Kind: "Widget", Verbs: []string{"get"}},
		"widgets/health":  {Name: "widgets/health", Namespaced: true, Kind: "WidgetHealth", Verbs: []string{"get"}},
		"widgets/echo":    {Name: "widgets/echo", Namespaced: true, Kind: "Widget", Verbs: []string{"update"}},
		"widgets/boom":    {Name: "widgets/boom", Namespaced: true, Kind: "Widget", Verbs: []string{"create", "get"}},
	} {
		g, ok := got[name]
		if !ok || g.Kind != want.Kind || g.Namespaced != want.Namespaced || strings.Join(g.Verbs, ",") != strings.Join(want.Verbs, ",") || g.Group != "" || g.StorageVersionHash != "" {
			t.Errorf("%s = %+v, want %+v", name, g, want)
		}
	}
	r = do(t, ts, "GET", "/apis", "", append(admin, "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")...)
	var agg struct {
		Items []discoveryGroup
	}
	if err := json.Unmarshal(r.body, &agg); err != nil {
		t.Fatal(err)
	}
	subs := map[string]discoverySubresource{}
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			for _, res := range v.Resources {
				if res.Resource == "widgets" {
					for _, s := range res.Subresources {
						subs[s.Subresource] = s
					}
				}
			}
		}
	}
	if s := subs["restart"]; s.ResponseKind.Kind != "WidgetRestart" || s.ResponseKind.Group != "example.dev" || strings.Join(s.Verbs, ",") != "create" {
		t.Errorf("aggregated restart = %+v", s)
	}
	if s := subs["log"]; s.ResponseKind.Kind != "Widget" || strings.Join(s.Verbs, ",") != "get" {
		t.Errorf("aggregated log = %+v", s)
	}
	if _, ok := subs["status"]; !ok {
		t.Errorf("status is gone from aggregated discovery: %+v", subs)
	}
	// OpenAPI has the subresource paths.
	r = do(t, ts, "GET", "/openapi/v3/apis/example.dev/v1", "", admin...)
	var doc struct {
		Paths map[string]map[string]any
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	item := doc.Paths["/apis/example.dev/v1/namespaces/{namespace}/widgets/{name}/restart"]
	if _, ok := item["post"]; !ok || item["get"] != nil {
		t.Errorf("openapi restart path %v", item)
	}
}

func TestCustomSubresourceRegistration(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := New(context.Background(), Config{Storage: store})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	get := func(context.Context, *registry.Request) (registry.Object, error) { return nil, nil }
	stream := func(context.Context, *registry.Request, io.Writer) error { return nil }
	for name, sr := range map[string]registry.Subresource{
		"status":   {Get: get},
		"scale":    {Get: get},
		"Bad_Name": {Get: get},
		"noverbs":  {},
		"both":     {Get: get, Stream: stream},
	} {
		res := widgetResource(t)
		res.Subresources.Custom = map[string]registry.Subresource{name: sr}
		if err := api.Register(res); err == nil {
			t.Errorf("subresource %q %+v registered", name, sr)
		}
	}
	custom := map[string]registry.Subresource{"view": {Get: get}}
	res := widgetResource(t)
	res.Subresources.Custom = custom
	if err := api.Register(res); err != nil {
		t.Fatal(err)
	}
	if custom["view"].Kind.Kind != "" {
		t.Error("Register changed the caller's map")
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

// A write through /scale is recorded in managedFields as the scale
// subresource's, as kube-apiserver records kubectl scale.
func TestScaleManagedFields(t *testing.T) {
	_, ts := newTestServer(t)
	if r := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"s"},"spec":{"size":1,"replicas":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "PUT", wdPath+"/s/scale?fieldManager=scaler", `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"s"},"spec":{"replicas":3}}`); r.code != 200 {
		t.Fatalf("scale: %d %s", r.code, r.body)
	}
	o := do(t, ts, "GET", wdPath+"/s", "").object(t)
	var found bool
	for _, e := range o["metadata"].(map[string]any)["managedFields"].([]any) {
		e := e.(map[string]any)
		if e["manager"] != "scaler" {
			continue
		}
		found = true
		fields, _ := json.Marshal(e["fieldsV1"])
		if e["operation"] != "Update" || e["subresource"] != "scale" || string(fields) != `{"f:spec":{"f:replicas":{}}}` {
			t.Errorf("the scaler's entry %v, want an Update of the scale subresource owning spec.replicas", e)
		}
	}
	if !found {
		t.Errorf("no entry of the scaler in %v", o["metadata"])
	}
}
