package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
)

const reviewSchema = `{"type":"object","required":["spec"],"properties":{
 "spec":{"type":"object","required":["question"],"properties":{"question":{"type":"string","maxLength":20},"loud":{"type":"boolean","default":false}}},
 "status":{"type":"object","properties":{"answer":{"type":"string"}}}}}`

// reviews is a create-only, cluster-scoped virtual type: POST a question,
// get it back with an answer. Questions "panic" and "fail" make the host
// function panic or fail.
func reviews(t *testing.T, rec *extRecorder) registry.Resource {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(reviewSchema), &s); err != nil {
		t.Fatal(err)
	}
	return registry.Resource{
		Group: "review.example.dev", Version: "v1", Resource: "reviews", Kind: "Review", Schema: &s,
		Virtual: &registry.Virtual{Create: func(_ context.Context, req *registry.Request, obj registry.Object) (registry.Object, error) {
			rec.request(req)
			q, _, _ := meta.NestedString(obj, "spec", "question")
			switch q {
			case "panic":
				panic("host bug")
			case "fail":
				return nil, errors.New("backend unreachable")
			}
			answer := "yes, " + req.User.Name
			if loud, _, _ := meta.NestedBool(obj, "spec", "loud"); loud {
				answer = strings.ToUpper(answer)
			}
			obj["status"] = map[string]any{"answer": answer}
			return obj, nil
		}},
	}
}

// computations is a namespaced virtual type with create, get and list.
func computations(rec *extRecorder) registry.Resource {
	item := func(ns, name string) registry.Object {
		return registry.Object{"metadata": map[string]any{"name": name, "namespace": ns}, "value": int64(len(name))}
	}
	return registry.Resource{
		Group: "review.example.dev", Version: "v1", Resource: "computations", Kind: "Computation", Namespaced: true,
		Schema: &schema.Schema{Type: "object", XPreserveUnknownFields: true},
		Virtual: &registry.Virtual{
			Create: func(_ context.Context, req *registry.Request, obj registry.Object) (registry.Object, error) {
				rec.request(req)
				return obj, nil
			},
			Get: func(_ context.Context, req *registry.Request) (registry.Object, error) {
				rec.request(req)
				if req.Name == "missing" {
					return nil, meta.NewNotFound(meta.GroupResource{Group: "review.example.dev", Resource: "computations"}, req.Name)
				}
				return item(req.Namespace, req.Name), nil
			},
			List: func(_ context.Context, req *registry.Request) ([]registry.Object, error) {
				rec.request(req)
				return []registry.Object{item(req.Namespace, "a"), item(req.Namespace, "bb")}, nil
			},
		},
	}
}

func virtualServer(t *testing.T, rec *extRecorder, hooks ...registry.AdmissionHook) (*Server, storage.Store, func(method, path, body string, headers ...string) response) {
	t.Helper()
	api, ts := extServer(t, rec, hooks...)
	for _, res := range []registry.Resource{reviews(t, rec), computations(rec)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	call := func(method, path, body string, headers ...string) response {
		t.Helper()
		return do(t, ts, method, path, body, append(append([]string{}, admin...), headers...)...)
	}
	return api, api.cfg.Storage, call
}

const reviewsPath = "/apis/review.example.dev/v1/reviews"

func TestVirtualCreate(t *testing.T) {
	rec := &extRecorder{}
	_, store, call := virtualServer(t, rec)
	r := call("POST", reviewsPath, `{"apiVersion":"review.example.dev/v1","kind":"Review","spec":{"question":"may I?","loud":true}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	out := r.object(t)
	if out["kind"] != "Review" || out["apiVersion"] != "review.example.dev/v1" || str(out, "status", "answer") != "YES, ADMIN" {
		t.Fatalf("create answered %s", r.body)
	}
	if str(out, "metadata", "resourceVersion") != "" || str(out, "metadata", "uid") != "" {
		t.Errorf("a virtual object has server-set metadata: %s", r.body)
	}
	// Defaults apply; kind and apiVersion may be left out.
	r = call("POST", reviewsPath, `{"spec":{"question":"q"}}`)
	if r.code != 201 || str(r.object(t), "spec", "loud") != "false" {
		t.Fatalf("create with defaults: %d %s", r.code, r.body)
	}
	req := rec.last(t)
	if req.Verb != "create" || req.Resource.Resource != "reviews" || req.User == nil || req.User.Name != "admin" || req.DryRun || req.Subresource != "" {
		t.Errorf("host saw %+v", req)
	}
	// dryRun reaches the host function.
	if r := call("POST", reviewsPath+"?dryRun=All", `{"spec":{"question":"q"}}`); r.code != 201 || !rec.last(t).DryRun {
		t.Fatalf("dry run: %d %s (host dryRun %v)", r.code, r.body, rec.last(t).DryRun)
	}
	// Warn reports unknown fields and goes on.
	r = call("POST", reviewsPath, `{"spec":{"question":"q","bogus":1}}`)
	if r.code != 201 || !strings.Contains(r.header.Get("Warning"), `unknown field \"spec.bogus\"`) {
		t.Fatalf("warn: %d %q %s", r.code, r.header.Get("Warning"), r.body)
	}
	// Nothing was stored, and the type was not recorded as a stored one.
	page, err := store.List(context.Background(), storage.ListOptions{Prefix: []byte("/registry/review.example.dev/")})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("storage holds %d review keys (%v)", len(page.Items), err)
	}
	page, err = store.List(context.Background(), storage.ListOptions{Prefix: []byte("/registry/_kapi/types/review.example.dev/")})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("virtual types recorded: %d (%v)", len(page.Items), err)
	}
	// YAML in and out.
	r = call("POST", reviewsPath, "spec:\n  question: yaml?\n", "Content-Type", "application/yaml", "Accept", "application/yaml")
	if r.code != 201 || !strings.Contains(string(r.body), "answer: yes, admin") {
		t.Fatalf("yaml: %d %s", r.code, r.body)
	}
}

func TestVirtualBadInput(t *testing.T) {
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec)
	for _, c := range []struct {
		method, path, body string
		code               int
		reason             meta.StatusReason
	}{
		// Verbs the type does not serve.
		{"GET", reviewsPath, "", 405, meta.StatusReasonMethodNotAllowed},
		{"GET", reviewsPath + "?watch=true", "", 405, meta.StatusReasonMethodNotAllowed},
		{"DELETE", reviewsPath, "", 405, meta.StatusReasonMethodNotAllowed},
		{"PUT", reviewsPath, `{}`, 405, meta.StatusReasonMethodNotAllowed},
		{"PATCH", reviewsPath, `{}`, 405, meta.StatusReasonMethodNotAllowed},
		// Paths it does not have (no get: no named objects; no subresources).
		{"GET", reviewsPath + "/r1", "", 404, meta.StatusReasonNotFound},
		{"POST", reviewsPath + "/r1", `{}`, 404, meta.StatusReasonNotFound},
		{"GET", reviewsPath + "/r1/status", "", 404, meta.StatusReasonNotFound},
		{"POST", "/apis/review.example.dev/v1/namespaces/default/reviews", `{}`, 404, meta.StatusReasonNotFound},
		// Bodies.
		{"POST", reviewsPath, `{"kind":"ConfigMap","apiVersion":"v1","spec":{"question":"q"}}`, 400, meta.StatusReasonBadRequest},
		{"POST", reviewsPath, `{"kind":"Review","apiVersion":"review.example.dev/v2","spec":{"question":"q"}}`, 400, meta.StatusReasonBadRequest},
		{"POST", reviewsPath, `{"spec":`, 400, meta.StatusReasonBadRequest},
		{"POST", reviewsPath + "?fieldValidation=Strict", `{"spec":{"question":"q","bogus":1}}`, 400, meta.StatusReasonBadRequest},
		{"POST", reviewsPath + "?fieldValidation=Strict", `{"spec":{"question":"q","question":"r"}}`, 400, meta.StatusReasonBadRequest},
		{"POST", reviewsPath, `{"spec":{}}`, 422, meta.StatusReasonInvalid},
		{"POST", reviewsPath, `{"spec":{"question":"a question that is far too long"}}`, 422, meta.StatusReasonInvalid},
		{"POST", reviewsPath + "?dryRun=Sometimes", `{"spec":{"question":"q"}}`, 422, meta.StatusReasonInvalid},
		// Host functions that panic or fail.
		{"POST", reviewsPath, `{"spec":{"question":"panic"}}`, 500, meta.StatusReasonInternalError},
		{"POST", reviewsPath, `{"spec":{"question":"fail"}}`, 500, meta.StatusReasonInternalError},
	} {
		r := call(c.method, c.path, c.body)
		st := r.status(t, c.code, c.reason)
		if c.code == 405 && st.Message != "the server does not allow this method on the requested resource" {
			t.Errorf("%s %s: message %q", c.method, c.path, st.Message)
		}
	}
	if r := call("POST", reviewsPath, `{"kind":"ConfigMap","apiVersion":"v1"}`); !strings.Contains(string(r.body), `ConfigMap in version \"v1\" cannot be handled as a Review`) {
		t.Errorf("wrong kind message: %s", r.body)
	}
	if r := call("POST", reviewsPath+"?fieldValidation=Strict", `{"spec":{"question":"q","bogus":1}}`); !strings.Contains(string(r.body), `strict decoding error: unknown field \"spec.bogus\"`) {
		t.Errorf("strict message: %s", r.body)
	}
	// Only the two failing questions reached the host, and the server still serves.
	if n := rec.calls(); n != 2 {
		t.Errorf("host called %d times, want 2", n)
	}
	if r := call("POST", reviewsPath, `{"spec":{"question":"still there?"}}`); r.code != 201 {
		t.Fatalf("after a panic: %d %s", r.code, r.body)
	}
}

func TestVirtualGetList(t *testing.T) {
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec)
	base := "/apis/review.example.dev/v1/namespaces/team/computations"
	r := call("GET", base+"/abc", "")
	if r.code != 200 {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	if o := r.object(t); o["kind"] != "Computation" || str(o, "value") != "3" || str(o, "metadata", "namespace") != "team" {
		t.Fatalf("get: %s", r.body)
	}
	call("GET", base+"/missing", "").status(t, 404, meta.StatusReasonNotFound)
	r = call("GET", base+"?labelSelector=a%3Db", "")
	if r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	var list struct {
		Kind, APIVersion string
		Items            []map[string]any
	}
	if err := json.Unmarshal(r.body, &list); err != nil || list.Kind != "ComputationList" || len(list.Items) != 2 || list.Items[1]["kind"] != "Computation" {
		t.Fatalf("list: %v %s", err, r.body)
	}
	if req := rec.last(t); req.Verb != "list" || req.Namespace != "team" || req.Query.Get("labelSelector") != "a=b" {
		t.Errorf("list request %+v", req)
	}
	// Across namespaces.
	if r := call("GET", "/apis/review.example.dev/v1/computations", ""); r.code != 200 || rec.last(t).Namespace != "" {
		t.Fatalf("list across namespaces: %d %s", r.code, r.body)
	}
	// kubectl get asks for a Table.
	r = call("GET", base, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !strings.Contains(string(r.body), `"kind":"Table"`) || !strings.Contains(string(r.body), `"bb"`) {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
	call("POST", base+"/abc", `{}`).status(t, 405, meta.StatusReasonMethodNotAllowed)
	call("DELETE", base+"/abc", "").status(t, 405, meta.StatusReasonMethodNotAllowed)
	call("GET", base+"?watch=1", "").status(t, 405, meta.StatusReasonMethodNotAllowed)
	// A namespaced type needs a namespace to create in.
	call("POST", "/apis/review.example.dev/v1/computations", `{}`).status(t, 404, meta.StatusReasonNotFound)
	if r := call("POST", base, `{"metadata":{"namespace":"other"}}`); r.code != 400 {
		t.Fatalf("namespace mismatch: %d %s", r.code, r.body)
	}
}

func TestVirtualAuthorizationAndAdmission(t *testing.T) {
	rec := &extRecorder{}
	var mu sync.Mutex
	var seen []registry.AdmissionRequest
	hook := registry.AdmissionHook{
		Name: "reviews", SideEffects: registry.SideEffectsNoneOnDryRun,
		Mutate: func(_ context.Context, req *registry.AdmissionRequest) error {
			if req.Resource.Resource == "reviews" {
				spec := req.Object["spec"].(map[string]any)
				spec["question"] = spec["question"].(string) + "!"
			}
			return nil
		},
		Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
			mu.Lock()
			seen = append(seen, *req)
			mu.Unlock()
			if q, _, _ := meta.NestedString(req.Object, "spec", "question"); q == "forbidden!" {
				return errors.New("that question is not allowed")
			}
			return nil
		},
	}
	_, _, call := virtualServer(t, rec, hook)
	r := call("POST", reviewsPath, `{"spec":{"question":"q"}}`)
	if r.code != 201 || str(r.object(t), "spec", "question") != "q!" {
		t.Fatalf("mutated create: %d %s", r.code, r.body)
	}
	st := call("POST", reviewsPath, `{"spec":{"question":"forbidden"}}`).status(t, 403, meta.StatusReasonForbidden)
	if !strings.Contains(st.Message, "that question is not allowed") {
		t.Errorf("denial %q", st.Message)
	}
	mu.Lock()
	var first *registry.AdmissionRequest
	for i := range seen {
		if seen[i].Resource.Resource == "reviews" {
			first = &seen[i]
			break
		}
	}
	if first == nil || first.Operation != registry.OperationCreate || first.Kind.Kind != "Review" || first.User == nil || first.User.Name != "admin" || first.OldObject != nil {
		t.Errorf("admission saw %+v", first)
	}
	mu.Unlock()
	// Authorization: nobody may not create reviews, dev may not list computations elsewhere.
	nobody := bearer("nobody-token")
	r = call("POST", reviewsPath, `{"spec":{"question":"q"}}`, nobody...)
	if st := r.status(t, 403, meta.StatusReasonForbidden); !strings.Contains(st.Message, `cannot create resource "reviews" in API group "review.example.dev" at the cluster scope`) {
		t.Errorf("403 message %q", st.Message)
	}
	call("GET", "/apis/review.example.dev/v1/namespaces/team/computations", "", bearer("dev-token")...).status(t, 403, meta.StatusReasonForbidden)
	// Every user may ask what they may do.
	r = call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
		`{"spec":{"resourceAttributes":{"namespace":"team","verb":"get","group":"example.dev","resource":"widgets","subresource":"log"}}}`, bearer("dev-token")...)
	if r.code != 201 || str(r.object(t), "status", "allowed") != "true" {
		t.Fatalf("dev's review of widgets/log: %d %s", r.code, r.body)
	}
	r = call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
		`{"spec":{"resourceAttributes":{"namespace":"team","verb":"create","group":"example.dev","resource":"widgets","subresource":"restart"}}}`, nobody...)
	if r.code != 201 || str(r.object(t), "status", "allowed") != "false" {
		t.Fatalf("nobody's review of widgets/restart: %d %s", r.code, r.body)
	}
}

func TestVirtualDiscoveryAndOpenAPI(t *testing.T) {
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec)
	r := call("GET", "/apis/review.example.dev/v1", "")
	var list struct{ Resources []apiResource }
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"reviews": "create", "computations": "create,get,list"}
	for _, res := range list.Resources {
		if v, ok := want[res.Name]; !ok || strings.Join(res.Verbs, ",") != v || res.StorageVersionHash != "" {
			t.Errorf("discovery %+v", res)
		}
		delete(want, res.Name)
	}
	if len(want) > 0 {
		t.Errorf("missing from discovery: %v (%s)", want, r.body)
	}
	r = call("GET", "/apis/authorization.k8s.io/v1", "")
	if !strings.Contains(string(r.body), `{"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview","namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]}`) {
		t.Errorf("ssar discovery: %s", r.body)
	}
	r = call("GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	if !strings.Contains(string(r.body), `"resource":"reviews","responseKind":{"group":"review.example.dev","version":"v1","kind":"Review"},"scope":"Cluster","singularResource":"review","verbs":["create"]`) {
		t.Errorf("aggregated discovery: %s", r.body)
	}
	// OpenAPI v3: the kind (for kubectl's client-side validation) and only
	// the operations served.
	r = call("GET", "/openapi/v3/apis/review.example.dev/v1", "")
	var doc struct {
		Paths      map[string]map[string]any
		Components struct{ Schemas map[string]map[string]any }
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Components.Schemas["dev.example.review.v1.Review"]; s == nil || s["x-kubernetes-group-version-kind"] == nil {
		t.Errorf("openapi lacks Review: %v", doc.Components.Schemas)
	}
	coll := doc.Paths["/apis/review.example.dev/v1/reviews"]
	if coll["post"] == nil || coll["get"] != nil || coll["delete"] != nil || doc.Paths["/apis/review.example.dev/v1/reviews/{name}"] != nil {
		t.Errorf("openapi review paths: %v", doc.Paths)
	}
	if doc.Paths["/apis/review.example.dev/v1/namespaces/{namespace}/computations/{name}"]["get"] == nil {
		t.Errorf("openapi computation paths: %v", doc.Paths)
	}
	r = call("GET", "/openapi/v3", "")
	if !strings.Contains(string(r.body), `"apis/authorization.k8s.io/v1"`) {
		t.Errorf("openapi index lacks authorization.k8s.io/v1: %s", r.body)
	}
}

func TestVirtualRegistration(t *testing.T) {
	rec := &extRecorder{}
	api, _, call := virtualServer(t, rec)
	create := func(context.Context, *registry.Request, registry.Object) (registry.Object, error) { return nil, nil }
	bad := []registry.Resource{
		{Group: "x.dev", Version: "v1", Resource: "things", Kind: "Thing", Schema: &schema.Schema{Type: "object"}, Virtual: &registry.Virtual{}},
		{Group: "x.dev", Version: "v1", Resource: "things", Kind: "Thing", Schema: &schema.Schema{Type: "object"}, Virtual: &registry.Virtual{Create: create},
			Subresources: registry.Subresources{Status: true}},
		// widgets are stored: no virtual version of them.
		{Group: "example.dev", Version: "v2", Resource: "widgets", Kind: "Widget", Schema: &schema.Schema{Type: "object"}, Virtual: &registry.Virtual{Create: create}},
	}
	for _, res := range bad {
		if err := api.Register(res); err == nil {
			t.Errorf("registered %+v", res)
		}
	}
	// A Create returning nil answers a Success Status; unregistering works.
	if err := api.Register(registry.Resource{Group: "x.dev", Version: "v1", Resource: "things", Kind: "Thing", Schema: &schema.Schema{Type: "object"},
		Virtual: &registry.Virtual{Create: create}}); err != nil {
		t.Fatal(err)
	}
	if r := call("POST", "/apis/x.dev/v1/things", `{}`); r.code != 201 || !strings.Contains(string(r.body), `"status":"Success"`) {
		t.Fatalf("nil answer: %d %s", r.code, r.body)
	}
	if err := api.Unregister(meta.GroupVersionResource{Group: "x.dev", Version: "v1", Resource: "things"}); err != nil {
		t.Fatal(err)
	}
	call("POST", "/apis/x.dev/v1/things", `{}`).status(t, 404, meta.StatusReasonNotFound)
}

// kubectl auth can-i sends and reads protobuf.
func TestSelfSubjectAccessReviewProtobuf(t *testing.T) {
	rec := &extRecorder{}
	_, _, call := virtualServer(t, rec)
	pbStr := func(b []byte, num protowire.Number, s string) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	var ra []byte
	ra = pbStr(ra, 1, "team")
	ra = pbStr(ra, 2, "get")
	ra = pbStr(ra, 3, "example.dev")
	ra = pbStr(ra, 5, "widgets")
	ra = pbStr(ra, 6, "log")
	var spec []byte
	spec = protowire.AppendTag(spec, 1, protowire.BytesType)
	spec = protowire.AppendBytes(spec, ra)
	var msg []byte
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, spec)
	body := codec.EncodeEnvelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", msg)
	review := func(token string) (allowed bool) {
		t.Helper()
		r := call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", string(body),
			append(bearer(token), "Content-Type", codec.MediaProtobuf, "Accept", codec.MediaProtobuf+", application/json")...)
		if r.code != 201 || r.header.Get("Content-Type") != codec.MediaProtobuf {
			t.Fatalf("protobuf review: %d %s %q", r.code, r.header.Get("Content-Type"), r.body)
		}
		u, err := codec.DecodeEnvelope(r.body)
		if err != nil || u.Kind != "SelfSubjectAccessReview" {
			t.Fatalf("envelope: %v %+v", err, u)
		}
		sawSpec := false
		err = codec.Walk(u.Raw, func(num protowire.Number, _ protowire.Type, v []byte) error {
			switch num {
			case 2:
				sawSpec = bytes.Contains(v, []byte("widgets"))
			case 3:
				return codec.Walk(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
					if num == 1 && typ == protowire.VarintType {
						n, _ := protowire.ConsumeVarint(v)
						allowed = protowire.DecodeBool(n)
					}
					return nil
				})
			}
			return nil
		})
		if err != nil || !sawSpec {
			t.Fatalf("response: %v (spec echoed %v)", err, sawSpec)
		}
		return allowed
	}
	if !review("dev-token") {
		t.Error("dev may get widgets/log in team")
	}
	if review("nobody-token") {
		t.Error("nobody may not get widgets/log")
	}
	// A JSON client of the same endpoint.
	r := call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"spec":{"nonResourceAttributes":{"path":"/apis","verb":"get"}}}`)
	if r.code != 201 || str(r.object(t), "status", "allowed") != "true" {
		t.Fatalf("json review: %d %s", r.code, r.body)
	}
}

// colorReview is the worked example of docs/extension.md.
type colorReview struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Color string `json:"color" kapi:"required,maxLength=32"`
	} `json:"spec" kapi:"required"`
	Status struct {
		Allowed bool   `json:"allowed"`
		Reason  string `json:"reason,omitempty"`
	} `json:"status,omitempty"`
}

func TestVirtualDocExample(t *testing.T) {
	rec := &extRecorder{}
	api, _, call := virtualServer(t, rec)
	res, err := registry.ForType[colorReview](registry.Resource{
		Group: "example.dev", Version: "v1", Resource: "colorreviews", Kind: "ColorReview",
		Virtual: &registry.Virtual{
			Create: func(_ context.Context, req *registry.Request, obj registry.Object) (registry.Object, error) {
				color, _, _ := meta.NestedString(obj, "spec", "color")
				allowed := color != "puce"
				obj["status"] = map[string]any{"allowed": allowed, "reason": "asked by " + req.User.Name}
				return obj, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Register(res); err != nil {
		t.Fatal(err)
	}
	r := call("POST", "/apis/example.dev/v1/colorreviews", `{"spec":{"color":"puce"}}`)
	if r.code != 201 || string(r.body) != `{"apiVersion":"example.dev/v1","kind":"ColorReview","metadata":{},"spec":{"color":"puce"},"status":{"allowed":false,"reason":"asked by admin"}}` {
		t.Fatalf("%d %s", r.code, r.body)
	}
	call("POST", "/apis/example.dev/v1/colorreviews", `{"kind":"ConfigMap","apiVersion":"v1"}`).status(t, 400, meta.StatusReasonBadRequest)
	call("POST", "/apis/example.dev/v1/colorreviews?fieldValidation=Strict", `{"spec":{"color":"red","x":1}}`).status(t, 400, meta.StatusReasonBadRequest)
	call("POST", "/apis/example.dev/v1/colorreviews", `{"spec":{}}`).status(t, 422, meta.StatusReasonInvalid)
	call("GET", "/apis/example.dev/v1/colorreviews", "").status(t, 405, meta.StatusReasonMethodNotAllowed)
}

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
	check("List", st.List(ctx, "team", registry.ListOptions{}, &registry.ListResult{}))
	_, err = st.Watch(ctx, "team", registry.WatchOptions{Encoder: jsonWatchEncoder{kind: "Computation", apiVersion: "review.example.dev/v1"}})
	check("Watch", err)
	if after, _ := store.CurrentRevision(ctx); after != before {
		t.Errorf("storage revision moved from %d to %d", before, after)
	}
}
