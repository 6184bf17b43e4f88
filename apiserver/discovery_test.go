package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

func TestDiscovery(t *testing.T) {
	api, ts := newTestServer(t)

	apis := do(t, ts, "GET", "/api", "").object(t)
	if str(apis, "kind") != "APIVersions" || str(apis, "versions") != `["v1"]` {
		t.Fatalf("/api: %v", apis)
	}
	core := do(t, ts, "GET", "/api/v1", "").object(t)
	var names []string
	for _, r := range core["resources"].([]any) {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "configmaps,namespaces,namespaces/finalize,namespaces/status" {
		t.Fatalf("/api/v1 resources: %v", names)
	}
	for _, r := range core["resources"].([]any) {
		if r := r.(map[string]any); r["name"] == "namespaces/finalize" && (str(r, "verbs") != `["update"]` || r["kind"] != "Namespace") {
			t.Fatalf("/api/v1 namespaces/finalize: %v", r)
		}
	}
	groups := do(t, ts, "GET", "/apis", "").object(t)
	if str(groups, "kind") != "APIGroupList" || !strings.Contains(str(groups, "groups"), `"name":"example.dev"`) {
		t.Fatalf("/apis: %v", groups)
	}
	group := do(t, ts, "GET", "/apis/example.dev", "").object(t)
	if str(group, "kind") != "APIGroup" || str(group, "preferredVersion", "groupVersion") != "example.dev/v1" {
		t.Fatalf("/apis/example.dev: %v", group)
	}
	gv := do(t, ts, "GET", "/apis/example.dev/v1", "").object(t)
	wd := gv["resources"].([]any)[0].(map[string]any)
	if wd["name"] != "widgets" || wd["kind"] != "Widget" || wd["namespaced"] != true || wd["singularName"] != "widget" ||
		str(wd, "shortNames") != `["wd"]` || str(wd, "categories") != `["all"]` || wd["storageVersionHash"] == "" ||
		str(wd, "verbs") != `["create","delete","deletecollection","get","list","patch","update","watch"]` {
		t.Fatalf("widgets discovery: %v", wd)
	}
	do(t, ts, "GET", "/apis/nope.dev", "").status(t, 404, meta.StatusReasonNotFound)
	do(t, ts, "GET", "/apis/example.dev/v2", "").status(t, 404, meta.StatusReasonNotFound)

	// Aggregated discovery, as client-go asks for it.
	accept := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	r := do(t, ts, "GET", "/apis", "", "Accept", accept)
	if ct := r.header.Get("Content-Type"); ct != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" {
		t.Fatalf("aggregated content type %q", ct)
	}
	var agg struct {
		Kind  string
		Items []struct {
			Metadata struct{ Name string }
			Versions []struct {
				Version   string
				Resources []struct {
					Resource     string
					Scope        string
					ResponseKind struct{ Group, Version, Kind string }
					ShortNames   []string
					Verbs        []string
					Subresources []struct {
						Subresource string
						Verbs       []string
					}
				}
			}
		}
	}
	if err := json.Unmarshal(r.body, &agg); err != nil {
		t.Fatal(err)
	}
	if agg.Kind != "APIGroupDiscoveryList" || len(agg.Items) != 4 || agg.Items[0].Metadata.Name != "apiextensions.k8s.io" ||
		agg.Items[1].Metadata.Name != "authentication.k8s.io" || agg.Items[2].Metadata.Name != "authorization.k8s.io" || agg.Items[3].Metadata.Name != "example.dev" {
		t.Fatalf("aggregated /apis: %s", r.body)
	}
	if crd := agg.Items[0].Versions[0].Resources[0]; crd.Resource != "customresourcedefinitions" || crd.Scope != "Cluster" ||
		strings.Join(crd.Verbs, ",") != "get,list" || strings.Join(crd.ShortNames, ",") != "crd,crds" {
		t.Fatalf("customresourcedefinitions discovery: %+v", crd)
	}
	if ssr := agg.Items[1].Versions[0].Resources[0]; ssr.Resource != "selfsubjectreviews" || ssr.Scope != "Cluster" || strings.Join(ssr.Verbs, ",") != "create" {
		t.Fatalf("selfsubjectreviews discovery: %+v", ssr)
	}
	authz := agg.Items[2].Versions[0].Resources
	if len(authz) != 2 || authz[0].Resource != "selfsubjectaccessreviews" || strings.Join(authz[0].Verbs, ",") != "create" ||
		authz[1].Resource != "selfsubjectrulesreviews" || authz[1].ResponseKind.Kind != "SelfSubjectRulesReview" || strings.Join(authz[1].Verbs, ",") != "create" {
		t.Fatalf("authorization.k8s.io discovery: %+v", authz)
	}
	res := agg.Items[3].Versions[0].Resources[0]
	if res.Resource != "widgets" || res.Scope != "Namespaced" || res.ResponseKind.Kind != "Widget" || len(res.Subresources) != 2 || res.Subresources[0].Subresource != "status" || res.Subresources[1].Subresource != "scale" {
		t.Fatalf("aggregated widgets: %+v", res)
	}
	r = do(t, ts, "GET", "/api", "", "Accept", accept)
	if !strings.Contains(string(r.body), `"resource":"configmaps"`) {
		t.Fatalf("aggregated /api: %s", r.body)
	}

	// Types added and removed at run time show at once.
	gadget := widgetResource(t)
	gadget.Resource, gadget.Kind, gadget.ShortNames, gadget.Namespaced = "gadgets", "Gadget", nil, false
	if err := api.Register(gadget); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(do(t, ts, "GET", "/apis/example.dev/v1", "").body), `"gadgets"`) {
		t.Fatal("gadgets missing from discovery after Register")
	}
	r = do(t, ts, "POST", "/apis/example.dev/v1/gadgets", `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1}}`)
	if r.code != 201 {
		t.Fatalf("create gadget: %d %s", r.code, r.body)
	}
	if err := api.Unregister(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "gadgets"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(do(t, ts, "GET", "/apis/example.dev/v1", "").body), `"gadgets"`) {
		t.Fatal("gadgets still in discovery after Unregister")
	}
	do(t, ts, "GET", "/apis/example.dev/v1/gadgets/g", "").status(t, 404, meta.StatusReasonNotFound)

	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if r := do(t, ts, "GET", p, ""); r.code != 200 || string(r.body) != "ok" {
			t.Fatalf("%s: %d %s", p, r.code, r.body)
		}
	}
	if v := do(t, ts, "GET", "/version", "").object(t); str(v, "major") != "1" || str(v, "gitVersion") == "" {
		t.Fatalf("/version: %v", v)
	}
}

func TestOpenAPI(t *testing.T) {
	_, ts := newTestServer(t)
	index := do(t, ts, "GET", "/openapi/v3", "").object(t)
	paths := index["paths"].(map[string]any)
	entry, ok := paths["apis/example.dev/v1"].(map[string]any)
	if !ok || !strings.HasPrefix(entry["serverRelativeURL"].(string), "/openapi/v3/apis/example.dev/v1?hash=") {
		t.Fatalf("openapi v3 index: %v", index)
	}
	if _, ok := paths["api/v1"]; !ok {
		t.Fatalf("openapi v3 index lacks api/v1: %v", index)
	}
	r := do(t, ts, "GET", entry["serverRelativeURL"].(string), "")
	var doc struct {
		OpenAPI    string
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Schemas map[string]map[string]any
		}
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	item := doc.Paths["/apis/example.dev/v1/namespaces/{namespace}/widgets/{name}"]
	var patch struct {
		Parameters []struct{ Name, In string }
		GVK        map[string]string `json:"x-kubernetes-group-version-kind"`
		Action     string            `json:"x-kubernetes-action"`
	}
	if err := json.Unmarshal(item["patch"], &patch); err != nil {
		t.Fatalf("patch op: %v (%s)", err, item["patch"])
	}
	var params []string
	for _, p := range patch.Parameters {
		if p.In == "query" {
			params = append(params, p.Name)
		}
	}
	if patch.GVK["kind"] != "Widget" || patch.GVK["group"] != "example.dev" || patch.Action != "patch" ||
		!strings.Contains(strings.Join(params, ","), "fieldValidation") || !strings.Contains(strings.Join(params, ","), "dryRun") {
		t.Fatalf("patch op: %+v", patch)
	}
	w := doc.Components.Schemas["dev.example.v1.Widget"]
	if w == nil || !strings.Contains(str(w, "x-kubernetes-group-version-kind"), `"kind":"Widget"`) || !strings.Contains(str(w, "properties", "spec", "properties"), `"size"`) {
		t.Fatalf("widget schema: %v", w)
	}
	if doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] == nil {
		t.Fatal("ObjectMeta schema missing")
	}
	do(t, ts, "GET", "/openapi/v3/apis/nope/v1", "").status(t, 404, meta.StatusReasonNotFound)
	v2 := do(t, ts, "GET", "/openapi/v2", "", "Accept", "application/json").object(t)
	if str(v2, "swagger") != "2.0" || !strings.Contains(str(v2, "definitions"), "io.k8s.api.core.v1.ConfigMap") {
		t.Fatalf("openapi v2: %.300s", str(v2, "definitions"))
	}
}

// The handler works under a prefix in a chi router and in a ServeMux.
func TestMountUnderPrefix(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	router := chi.NewRouter()
	router.Get("/hello", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hi")) })
	router.Mount("/kube", api)
	mux := http.NewServeMux()
	mux.Handle("/k8s/", http.StripPrefix("/k8s", api))
	for _, tc := range []struct {
		h      http.Handler
		prefix string
	}{{router, "/kube"}, {mux, "/k8s"}} {
		ts := httptest.NewServer(tc.h)
		r := do(t, ts, "POST", tc.prefix+"/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"m`+strings.Trim(tc.prefix, "/")+`"}}`)
		if r.code != 201 {
			t.Fatalf("%s: create: %d %s", tc.prefix, r.code, r.body)
		}
		if r := do(t, ts, "GET", tc.prefix+"/api/v1/namespaces/default/configmaps/m"+strings.Trim(tc.prefix, "/"), ""); r.code != 200 {
			t.Fatalf("%s: get: %d %s", tc.prefix, r.code, r.body)
		}
		if r := do(t, ts, "GET", tc.prefix+"/apis", ""); r.code != 200 {
			t.Fatalf("%s: /apis: %d %s", tc.prefix, r.code, r.body)
		}
		ts.Close()
	}
}

// Aggregated discovery and the OpenAPI v3 documents carry ETags and answer
// 304 to a client that has them, as kube-apiserver's (client-go's discovery
// cache revalidates with them); a changed registry changes them.
func TestDiscoveryETags(t *testing.T) {
	api, ts := newTestServer(t)
	const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	const v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	tags := map[string]string{}
	for _, c := range []struct{ path, accept string }{
		{"/api", v2}, {"/apis", v2}, {"/apis", v2beta1}, {"/openapi/v3/apis/example.dev/v1", "application/json"},
	} {
		r := do(t, ts, "GET", c.path, "", "Accept", c.accept)
		tag := r.header.Get("Etag")
		if r.code != 200 || len(tag) != 130 || tag[0] != '"' {
			t.Fatalf("GET %s (%s): %d, ETag %q", c.path, c.accept, r.code, tag)
		}
		for k, other := range tags {
			if other == tag {
				t.Errorf("GET %s (%s) has the ETag of %s", c.path, c.accept, k)
			}
		}
		tags[c.path+" "+c.accept] = tag
		if r := do(t, ts, "GET", c.path, "", "Accept", c.accept, "If-None-Match", tag); r.code != 304 || len(r.body) != 0 {
			t.Errorf("GET %s with its ETag: %d (%d bytes), want 304", c.path, r.code, len(r.body))
		}
		if r := do(t, ts, "GET", c.path, "", "Accept", c.accept, "If-None-Match", `"stale"`); r.code != 200 {
			t.Errorf("GET %s with another ETag: %d, want 200", c.path, r.code)
		}
	}
	for accept, version := range map[string]string{v2: "v2", v2beta1: "v2beta1"} {
		if r := do(t, ts, "GET", "/api", "", "Accept", accept); str(r.object(t), "apiVersion") != "apidiscovery.k8s.io/"+version {
			t.Errorf("GET /api as %s: %.100s", version, r.body)
		}
	}
	if tag := do(t, ts, "GET", "/apis", "").header.Get("Etag"); tag != "" {
		t.Errorf("legacy /apis has an ETag %q", tag)
	}
	if err := api.Unregister(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}); err != nil {
		t.Fatal(err)
	}
	if r := do(t, ts, "GET", "/apis", "", "Accept", v2, "If-None-Match", tags["/apis "+v2]); r.code != 200 {
		t.Errorf("GET /apis with the ETag from before a change: %d, want 200", r.code)
	}
}

// An OpenAPI v3 document asked for with a hash from an older index moves to
// the current one (301, relative to the request), as kube-apiserver.
func TestOpenAPIV3StaleHash(t *testing.T) {
	_, ts := newTestServer(t)
	paths := do(t, ts, "GET", "/openapi/v3", "").object(t)["paths"].(map[string]any)
	current := paths["apis/example.dev/v1"].(map[string]any)["serverRelativeURL"].(string)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.URL + "/openapi/v3/apis/example.dev/v1?hash=ABC")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 301 || loc == nil || loc.RequestURI() != current {
		t.Fatalf("stale hash: %d, Location %q (%v), want 301 to %s", resp.StatusCode, resp.Header.Get("Location"), loc, current)
	}
	if r := do(t, ts, "GET", current, ""); r.code != 200 || r.header.Get("Cache-Control") != "public, immutable" {
		t.Fatalf("current hash: %d %q", r.code, r.header.Get("Cache-Control"))
	}
}
