package apiserver

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// crdList lists the CRDs and returns them by name, in the order served.
func crdList(t *testing.T, call func(string) response, query string) ([]string, map[string]map[string]any) {
	t.Helper()
	r := call(crdsPath + query)
	if r.code != 200 {
		t.Fatalf("list CRDs%s: %d %s", query, r.code, r.body)
	}
	var list struct {
		Kind, APIVersion string
		Items            []map[string]any
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "CustomResourceDefinitionList" || list.APIVersion != "apiextensions.k8s.io/v1" {
		t.Fatalf("list CRDs: %s", r.body)
	}
	var names []string
	byName := map[string]map[string]any{}
	for _, it := range list.Items {
		n := str(it, "metadata", "name")
		names = append(names, n)
		byName[n] = it
	}
	return names, byName
}

// crdServer is newTestServer (namespaces, configmaps, widgets) with more
// types: widgets in a second version, cluster-scoped gadgets, types in
// Kubernetes' groups, and a custom virtual type; none but the widgets and
// gadgets are CRDs.
func crdServer(t *testing.T) (*Server, func(string) response, func(method, path, body string, headers ...string) response) {
	t.Helper()
	api, ts := newTestServer(t)
	beta := widgetResource(t)
	beta.Version, beta.PrinterColumns, beta.SelectableFields, beta.Subresources = "v1beta1", nil, nil, registry.Subresources{}
	gadget := widgetResource(t)
	gadget.Resource, gadget.Kind, gadget.ShortNames, gadget.Categories, gadget.Namespaced = "gadgets", "Gadget", nil, nil, false
	gadget.Subresources = registry.Subresources{}
	deployments := widgetResource(t)
	deployments.Group, deployments.Resource, deployments.Kind, deployments.ShortNames = "apps", "deployments", "Deployment", []string{"deploy"}
	leases := widgetResource(t)
	leases.Group, leases.Resource, leases.Kind, leases.ShortNames = "coordination.k8s.io", "leases", "Lease", nil
	for _, res := range []registry.Resource{beta, gadget, deployments, leases, reviews(t, &extRecorder{})} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	call := func(method, path, body string, headers ...string) response {
		t.Helper()
		return do(t, ts, method, path, body, headers...)
	}
	get := func(path string) response {
		t.Helper()
		return do(t, ts, "GET", path, "")
	}
	return api, get, call
}

func TestIsKubernetesGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "batch": true, "policy": true, "autoscaling": true, "extensions": true,
		"networking.k8s.io": true, "apiextensions.k8s.io": true, "rbac.authorization.k8s.io": true, "k8s.io": true,
		"internal.apiserver.k8s.io": true, "kubernetes.io": true, "node.kubernetes.io": true,
		"example.dev": false, "apps.example.dev": false, "mycorp.io": false, "k8s.io.example.dev": false, "xk8s.io": false,
	} {
		if got := isKubernetesGroup(group); got != want {
			t.Errorf("isKubernetesGroup(%q) = %v, want %v", group, got, want)
		}
	}
}

func TestCRDViewList(t *testing.T) {
	_, get, _ := crdServer(t)
	names, byName := crdList(t, get, "")
	// Custom stored types only: not configmaps, namespaces, deployments
	// (apps), leases (coordination.k8s.io), selfsubjectaccessreviews, the
	// CRDs themselves, or the virtual reviews.
	if strings.Join(names, ",") != "gadgets.example.dev,widgets.example.dev" {
		t.Fatalf("CRDs: %v", names)
	}
	w := byName["widgets.example.dev"]
	if w["kind"] != "CustomResourceDefinition" || w["apiVersion"] != "apiextensions.k8s.io/v1" {
		t.Errorf("kind/apiVersion: %v %v", w["kind"], w["apiVersion"])
	}
	uid := str(w, "metadata", "uid")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(uid) || uid == str(byName["gadgets.example.dev"], "metadata", "uid") {
		t.Errorf("uid %q", uid)
	}
	if uid != crdUID("widgets.example.dev") {
		t.Errorf("uid %q is not the name's", uid)
	}
	if str(w, "metadata", "creationTimestamp") == "" || str(w, "metadata", "resourceVersion") != "" {
		t.Errorf("metadata: %s", str(w, "metadata"))
	}
	for path, want := range map[string]string{
		"spec.group":                   "example.dev",
		"spec.scope":                   "Namespaced",
		"spec.names":                   `{"categories":["all"],"kind":"Widget","listKind":"WidgetList","plural":"widgets","shortNames":["wd"],"singular":"widget"}`,
		"status.acceptedNames":         `{"categories":["all"],"kind":"Widget","listKind":"WidgetList","plural":"widgets","shortNames":["wd"],"singular":"widget"}`,
		"status.storedVersions":        `["v1"]`,
		"spec.conversion":              `{"strategy":"None"}`,
		"spec.names.shortNames":        `["wd"]`,
		"spec.versions.0.name":         "v1",
		"spec.versions.0.served":       "true",
		"spec.versions.0.storage":      "true",
		"spec.versions.0.subresources": `{"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"},"status":{}}`,
		"spec.versions.0.additionalPrinterColumns": `[{"jsonPath":".spec.size","name":"Size","type":"integer"},{"jsonPath":".spec.color","name":"Color","type":"string"},` +
			`{"jsonPath":".metadata.creationTimestamp","name":"Age","type":"date"}]`,
		"spec.versions.0.selectableFields": `[{"jsonPath":".spec.color"}]`,
		"spec.versions.1.name":             "v1beta1",
		"spec.versions.1.served":           "true",
		"spec.versions.1.storage":          "false",
	} {
		if got := pathString(w, path); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	if got := pathString(w, "spec.versions.1.subresources"); got != "" {
		t.Errorf("v1beta1 subresources: %s", got)
	}
	// The schema is the type's structural schema.
	var want, got any
	_ = json.Unmarshal([]byte(testWidgetSchema), &want)
	if err := json.Unmarshal([]byte(pathString(w, "spec.versions.0.schema.openAPIV3Schema")), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("openAPIV3Schema = %s (%v)", pathString(w, "spec.versions.0.schema.openAPIV3Schema"), err)
	}
	conds := map[string]string{}
	for _, c := range w["status"].(map[string]any)["conditions"].([]any) {
		c := c.(map[string]any)
		conds[c["type"].(string)] = c["status"].(string)
	}
	if conds["Established"] != "True" || conds["NamesAccepted"] != "True" {
		t.Errorf("conditions: %v", conds)
	}
	g := byName["gadgets.example.dev"]
	if pathString(g, "spec.scope") != "Cluster" || pathString(g, "spec.names.kind") != "Gadget" || pathString(g, "spec.versions.0.subresources") != "" {
		t.Errorf("gadgets: %v", g["spec"])
	}
}

// pathString returns the value at a dotted path (numbers index arrays) as
// a string or JSON, "" when missing.
func pathString(obj map[string]any, path string) string {
	var cur any = obj
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := int(p[0] - '0')
			if len(p) != 1 || i < 0 || i >= len(c) {
				return ""
			}
			cur = c[i]
		default:
			return ""
		}
	}
	switch v := cur.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func TestCRDViewGet(t *testing.T) {
	_, get, _ := crdServer(t)
	_, byName := crdList(t, get, "")
	r := get(crdsPath + "/widgets.example.dev")
	if r.code != 200 {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	if o := r.object(t); !reflect.DeepEqual(o, byName["widgets.example.dev"]) {
		t.Errorf("get differs from the list item:\n%s", r.body)
	}
	for _, name := range []string{"nope.example.dev", "widgets", "widgets.", "configmaps.", "namespaces",
		"selfsubjectaccessreviews.authorization.k8s.io", "customresourcedefinitions.apiextensions.k8s.io",
		"deployments.apps", "leases.coordination.k8s.io", "reviews.review.example.dev"} {
		st := get(crdsPath+"/"+name).status(t, 404, meta.StatusReasonNotFound)
		if want := `customresourcedefinitions.apiextensions.k8s.io "` + name + `" not found`; st.Message != want {
			t.Errorf("get %s: message %q, want %q", name, st.Message, want)
		}
	}
	// A cluster-scoped type: no namespaced paths.
	get("/apis/apiextensions.k8s.io/v1/namespaces/default/customresourcedefinitions").status(t, 404, meta.StatusReasonNotFound)
}

func TestCRDViewReadOnly(t *testing.T) {
	_, get, call := crdServer(t)
	_, byName := crdList(t, get, "")
	body, _ := json.Marshal(byName["widgets.example.dev"])
	named := crdsPath + "/widgets.example.dev"
	for _, c := range []struct{ method, path, body, contentType string }{
		{"POST", crdsPath, string(body), "application/json"},
		{"PUT", named, string(body), "application/json"},
		{"PATCH", named, `{"metadata":{"labels":{"a":"b"}}}`, "application/merge-patch+json"},
		{"DELETE", named, "", ""},
		{"DELETE", crdsPath, "", ""},
		{"GET", crdsPath + "?watch=1", "", ""},
	} {
		var headers []string
		if c.contentType != "" {
			headers = []string{"Content-Type", c.contentType}
		}
		call(c.method, c.path, c.body, headers...).status(t, 405, meta.StatusReasonMethodNotAllowed)
	}
	if r := get(named); r.code != 200 {
		t.Fatalf("after refused writes: %d %s", r.code, r.body)
	}
}

func TestCRDViewSelectors(t *testing.T) {
	_, get, _ := crdServer(t)
	for query, want := range map[string]string{
		"?fieldSelector=metadata.name%3Dwidgets.example.dev":  "widgets.example.dev",
		"?fieldSelector=metadata.name!%3Dwidgets.example.dev": "gadgets.example.dev",
		"?fieldSelector=metadata.namespace%3D":                "gadgets.example.dev,widgets.example.dev",
		"?labelSelector=a%3Db":                                "",
		"?labelSelector=!a":                                   "gadgets.example.dev,widgets.example.dev",
	} {
		if names, _ := crdList(t, get, query); strings.Join(names, ",") != want {
			t.Errorf("%s: %v, want %s", query, names, want)
		}
	}
	for _, q := range []string{"?fieldSelector=spec.group%3Dexample.dev", "?fieldSelector=x", "?labelSelector=a%20in"} {
		get(crdsPath+q).status(t, 400, meta.StatusReasonBadRequest)
	}
}

func TestCRDViewTable(t *testing.T) {
	_, _, call := crdServer(t)
	r := call("GET", crdsPath, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table struct {
		Kind              string
		ColumnDefinitions []struct{ Name, Type string }
		Rows              []struct{ Cells []any }
	}
	if err := json.Unmarshal(r.body, &table); err != nil || r.code != 200 || table.Kind != "Table" {
		t.Fatalf("table: %d %v %s", r.code, err, r.body)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Created At" || len(table.Rows) != 2 || table.Rows[1].Cells[0] != "widgets.example.dev" || table.Rows[1].Cells[1] == nil {
		t.Fatalf("table: %s", r.body)
	}
}

// The view follows the registry: types registered and unregistered at run
// time show at once, in discovery and in the CRDs alike.
func TestCRDViewFollowsRegistry(t *testing.T) {
	api, get, _ := crdServer(t)
	var s schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","x-kubernetes-preserve-unknown-fields":true}`), &s); err != nil {
		t.Fatal(err)
	}
	sprocket := registry.Resource{Group: "tools.example.org", Version: "v2", Resource: "sprockets", Kind: "Sprocket", Namespaced: true, Schema: &s}
	if err := api.Register(sprocket); err != nil {
		t.Fatal(err)
	}
	names, byName := crdList(t, get, "")
	if strings.Join(names, ",") != "gadgets.example.dev,sprockets.tools.example.org,widgets.example.dev" {
		t.Fatalf("after Register: %v", names)
	}
	sp := byName["sprockets.tools.example.org"]
	if pathString(sp, "spec.versions") != `[{"name":"v2","schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},"served":true,"storage":true}]` ||
		pathString(sp, "spec.names.singular") != "sprocket" || pathString(sp, "spec.names.listKind") != "SprocketList" {
		t.Errorf("sprockets: %v", sp["spec"])
	}
	if r := get(crdsPath + "/sprockets.tools.example.org"); r.code != 200 {
		t.Fatalf("get after Register: %d %s", r.code, r.body)
	}
	created := pathString(sp, "metadata.creationTimestamp")
	// Replacing a registration keeps the CRD (and its creation time).
	sprocket.ShortNames = []string{"spr"}
	if err := api.Register(sprocket); err != nil {
		t.Fatal(err)
	}
	if o := get(crdsPath + "/sprockets.tools.example.org").object(t); pathString(o, "spec.names.shortNames") != `["spr"]` || pathString(o, "metadata.creationTimestamp") != created {
		t.Errorf("after a new registration: %v %v", o["spec"], o["metadata"])
	}
	// Removing one of two versions keeps the CRD with the other one.
	if err := api.Unregister(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}); err != nil {
		t.Fatal(err)
	}
	if o := get(crdsPath + "/widgets.example.dev").object(t); pathString(o, "spec.versions.0.name") != "v1beta1" || pathString(o, "spec.versions.1") != "" ||
		pathString(o, "spec.versions.0.storage") != "true" || pathString(o, "status.storedVersions") != `["v1beta1"]` {
		t.Errorf("widgets without v1: %v", o["spec"])
	}
	if err := api.Unregister(sprocket.GroupVersionResource()); err != nil {
		t.Fatal(err)
	}
	get(crdsPath+"/sprockets.tools.example.org").status(t, 404, meta.StatusReasonNotFound)
	if names, _ := crdList(t, get, ""); strings.Join(names, ",") != "gadgets.example.dev,widgets.example.dev" {
		t.Fatalf("after Unregister: %v", names)
	}

	// Every CRD is a stored type in discovery with the same names, and every
	// stored custom type in discovery has its CRD.
	var agg struct {
		Items []struct {
			Metadata struct{ Name string }
			Versions []struct {
				Version   string
				Resources []struct {
					Resource, Scope, SingularResource string
					ResponseKind                      struct{ Kind string }
					ShortNames, Verbs                 []string
				}
			}
		}
	}
	if err := json.Unmarshal(api.discoveryDocuments().AggregatedAPIs.V2, &agg); err != nil {
		t.Fatal(err)
	}
	_, byName = crdList(t, get, "")
	seen := map[string]bool{}
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			for _, res := range v.Resources {
				name := res.Resource + "." + g.Metadata.Name
				crd, ok := byName[name]
				stored := strings.Contains(strings.Join(res.Verbs, ","), "watch")
				if !stored || isKubernetesGroup(g.Metadata.Name) {
					if ok {
						t.Errorf("%s is a CRD", name)
					}
					continue
				}
				seen[name] = true
				if !ok {
					t.Errorf("%s/%s has no CRD", g.Metadata.Name, v.Version)
					continue
				}
				if pathString(crd, "spec.names.kind") != res.ResponseKind.Kind || pathString(crd, "spec.scope") != res.Scope ||
					pathString(crd, "spec.names.singular") != res.SingularResource || !strings.Contains(pathString(crd, "spec.versions"), `"name":"`+v.Version+`"`) {
					t.Errorf("%s: CRD %v, discovery %+v", name, crd["spec"], res)
				}
			}
		}
	}
	if len(seen) != len(byName) {
		t.Errorf("CRDs %v, in discovery %v", keysOf(byName), seen)
	}
}

func keysOf(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Discovery lists the view as kube-apiserver lists CRDs, with get and list.
func TestCRDViewDiscovery(t *testing.T) {
	_, get, _ := crdServer(t)
	gv := get("/apis/apiextensions.k8s.io/v1").object(t)
	res := gv["resources"].([]any)
	if len(res) != 1 {
		t.Fatalf("apiextensions.k8s.io/v1: %v", gv)
	}
	crd := res[0].(map[string]any)
	if crd["name"] != "customresourcedefinitions" || crd["kind"] != "CustomResourceDefinition" || crd["namespaced"] != false ||
		crd["singularName"] != "customresourcedefinition" || str(crd, "shortNames") != `["crd","crds"]` || str(crd, "verbs") != `["get","list"]` {
		t.Fatalf("customresourcedefinitions discovery: %v", crd)
	}
	if g := get("/apis/apiextensions.k8s.io").object(t); str(g, "preferredVersion", "groupVersion") != "apiextensions.k8s.io/v1" {
		t.Fatalf("apiextensions.k8s.io: %v", g)
	}
	// limit is not served: every CRD, no continue token.
	if names, _ := crdList(t, get, "?limit=1"); len(names) != 2 {
		t.Fatalf("list with limit: %v", names)
	}
}
