package apiserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// The CRD of a type in several versions lists every version, served or
// not, each with its own schema, columns, subresources and selectable
// fields, and the stored versions of the type record (no controllers
// run, so no migration changes them; TestServerMigratesStorageVersion
// shows them after one).
func TestVersionsCRDView(t *testing.T) {
	vw := &versionedWidgets{}
	api, ts := newVersionsServer(t, vw, func(c *Config) { c.DisableControllers = true })
	r := do(t, ts, "GET", crdsPath+"/widgets.example.dev", "")
	if r.code != 200 {
		t.Fatalf("get the CRD: %d %s", r.code, r.body)
	}
	crd := r.object(t)
	var names []string
	for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
		names = append(names, v.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "v2,v1,v1beta1,v1alpha1" {
		t.Fatalf("versions %v, want kube's priority order", names)
	}
	for path, want := range map[string]string{
		"spec.versions.0.served":                   "true",
		"spec.versions.0.storage":                  "false",
		"spec.versions.0.deprecated":               "",
		"spec.versions.0.additionalPrinterColumns": `[{"jsonPath":".spec.paint.color","name":"Paint","type":"string"},{"jsonPath":".spec.size","name":"Size","priority":1,"type":"integer"}]`,
		"spec.versions.0.selectableFields":         `[{"jsonPath":".spec.paint.color"}]`,
		"spec.versions.0.subresources":             `{"scale":{"specReplicasPath":".spec.scale.replicas","statusReplicasPath":".status.replicas"},"status":{}}`,
		"spec.versions.1.served":                   "true",
		"spec.versions.1.storage":                  "true",
		"spec.versions.1.selectableFields":         `[{"jsonPath":".spec.color"}]`,
		"spec.versions.1.subresources":             `{"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"},"status":{}}`,
		"spec.versions.2.served":                   "true",
		"spec.versions.2.storage":                  "false",
		"spec.versions.2.deprecated":               "true",
		"spec.versions.2.deprecationWarning":       "example.dev/v1beta1 Widget is deprecated; use example.dev/v2 Widget",
		"spec.versions.3.served":                   "false",
		"spec.versions.3.storage":                  "false",
		"spec.conversion":                          `{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"]}}`,
		"status.storedVersions":                    `["v1"]`,
	} {
		if got := pathString(crd, path); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	for i, src := range map[int]string{0: vwV2Schema, 1: vwV1Schema} {
		var want, got any
		_ = json.Unmarshal([]byte(src), &want)
		_ = json.Unmarshal([]byte(pathString(crd, "spec.versions."+string(rune('0'+i))+".schema.openAPIV3Schema")), &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("version %d schema: %v", i, got)
		}
	}
	_, byName := crdList(t, func(p string) response { return do(t, ts, "GET", p, "") }, "")
	if !reflect.DeepEqual(byName["widgets.example.dev"], crd) {
		t.Errorf("the list's CRD differs from the get's:\n%v", byName["widgets.example.dev"])
	}

	// A new storage version: both are stored versions until a migration.
	def := vw.definition(t)
	def.Storage = "v2"
	if err := api.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	crd = do(t, ts, "GET", crdsPath+"/widgets.example.dev", "").object(t)
	if pathString(crd, "status.storedVersions") != `["v1","v2"]` || pathString(crd, "spec.versions.0.storage") != "true" || pathString(crd, "spec.versions.1.storage") != "false" {
		t.Errorf("after the storage version changed: %v %v", crd["spec"], crd["status"])
	}
	// Conversion None is a CRD's None.
	def.Conversion = registryConversionNone()
	if err := api.RegisterVersions(def); err != nil {
		t.Fatal(err)
	}
	if got := pathString(do(t, ts, "GET", crdsPath+"/widgets.example.dev", "").object(t), "spec.conversion"); got != `{"strategy":"None"}` {
		t.Errorf("conversion None: %s", got)
	}
}

// Discovery lists the served versions, the preferred one first as kube
// chooses it (GA before beta before alpha, higher first); unserved
// versions are absent.
func TestVersionsDiscovery(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	group := do(t, ts, "GET", "/apis/example.dev", "").object(t)
	if str(group, "preferredVersion", "groupVersion") != "example.dev/v2" ||
		str(group, "versions") != `[{"groupVersion":"example.dev/v2","version":"v2"},{"groupVersion":"example.dev/v1","version":"v1"},{"groupVersion":"example.dev/v1beta1","version":"v1beta1"}]` {
		t.Errorf("/apis/example.dev: %v", group)
	}
	list := do(t, ts, "GET", "/apis", "").object(t)
	if !strings.Contains(str(list, "groups"), `{"name":"example.dev","preferredVersion":{"groupVersion":"example.dev/v2","version":"v2"},"versions":[{"groupVersion":"example.dev/v2","version":"v2"},{"groupVersion":"example.dev/v1","version":"v1"},{"groupVersion":"example.dev/v1beta1","version":"v1beta1"}]}`) {
		t.Errorf("/apis: %v", list["groups"])
	}
	hashes := map[string]string{}
	for _, v := range []string{"v2", "v1", "v1beta1"} {
		gv := do(t, ts, "GET", "/apis/example.dev/"+v, "").object(t)
		var res []string
		for _, r := range gv["resources"].([]any) {
			r := r.(map[string]any)
			res = append(res, r["name"].(string))
			if r["name"] == "widgets" {
				hashes[v] = str(r, "storageVersionHash")
			}
		}
		if strings.Join(res, ",") != "widgets,widgets/status,widgets/scale" && !(v == "v1beta1" && strings.Join(res, ",") == "widgets") {
			t.Errorf("/apis/example.dev/%s resources: %v", v, res)
		}
	}
	// The storage version hash names the storage version, the same in
	// every version (what a storage migrator compares).
	if hashes["v1"] == "" || hashes["v1"] != hashes["v2"] || hashes["v1"] != hashes["v1beta1"] {
		t.Errorf("storage version hashes: %v", hashes)
	}
	do(t, ts, "GET", "/apis/example.dev/v1alpha1", "").status(t, 404, meta.StatusReasonNotFound)

	accept := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	var agg struct {
		Items []struct {
			Metadata struct{ Name string }
			Versions []struct {
				Version   string
				Freshness string
				Resources []struct {
					Resource     string
					ResponseKind struct{ Group, Version, Kind string }
				}
			}
		}
	}
	if err := json.Unmarshal(do(t, ts, "GET", "/apis", "", "Accept", accept).body, &agg); err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, g := range agg.Items {
		if g.Metadata.Name != "example.dev" {
			continue
		}
		for _, v := range g.Versions {
			versions = append(versions, v.Version)
			if len(v.Resources) != 1 || v.Resources[0].ResponseKind.Version != v.Version || v.Resources[0].ResponseKind.Kind != "Widget" {
				t.Errorf("aggregated %s: %+v", v.Version, v.Resources)
			}
		}
	}
	if strings.Join(versions, ",") != "v2,v1,v1beta1" {
		t.Errorf("aggregated discovery versions %v", versions)
	}
}

// OpenAPI v2 and v3 carry each version's own schema.
func TestVersionsOpenAPI(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	index := do(t, ts, "GET", "/openapi/v3", "").object(t)["paths"].(map[string]any)
	for _, v := range []string{"v1", "v2", "v1beta1"} {
		if _, ok := index["apis/example.dev/"+v]; !ok {
			t.Errorf("openapi v3 index lacks %s: %v", v, index)
		}
	}
	if _, ok := index["apis/example.dev/v1alpha1"]; ok {
		t.Error("openapi v3 index has the unserved v1alpha1")
	}
	do(t, ts, "GET", "/openapi/v3/apis/example.dev/v1alpha1", "").status(t, 404, meta.StatusReasonNotFound)
	// spec returns the names of a schema's spec properties.
	spec := func(schemas map[string]map[string]any, name string) string {
		props, _ := schemas[name]["properties"].(map[string]any)
		spec, _ := props["spec"].(map[string]any)
		return strings.Join(meta.SortedKeys(spec["properties"].(map[string]any)), ",")
	}
	for v, want := range map[string]string{"v1": "color,replicas,size", "v2": "paint,scale,size"} {
		var doc struct {
			Paths      map[string]any
			Components struct{ Schemas map[string]map[string]any }
		}
		if err := json.Unmarshal(do(t, ts, "GET", "/openapi/v3/apis/example.dev/"+v, "").body, &doc); err != nil {
			t.Fatal(err)
		}
		if s := spec(doc.Components.Schemas, "dev.example."+v+".Widget"); s != want {
			t.Errorf("openapi v3 %s Widget spec: %s", v, s)
		}
		if _, ok := doc.Paths["/apis/example.dev/"+v+"/namespaces/{namespace}/widgets/{name}/status"]; !ok {
			t.Errorf("openapi v3 %s lacks the status path", v)
		}
	}
	var v2 struct {
		Definitions map[string]map[string]any
		Paths       map[string]any
	}
	if err := json.Unmarshal(do(t, ts, "GET", "/openapi/v2", "", "Accept", "application/json").body, &v2); err != nil {
		t.Fatal(err)
	}
	if s := spec(v2.Definitions, "dev.example.v1.Widget"); s != "color,replicas,size" {
		t.Errorf("openapi v2 v1 Widget spec: %s", s)
	}
	if s := spec(v2.Definitions, "dev.example.v2.Widget"); s != "paint,scale,size" {
		t.Errorf("openapi v2 v2 Widget spec: %s", s)
	}
	if v2.Definitions["dev.example.v1beta1.Widget"] == nil || v2.Definitions["dev.example.v1alpha1.Widget"] != nil {
		t.Errorf("openapi v2 definitions: v1beta1 %v, v1alpha1 %v", v2.Definitions["dev.example.v1beta1.Widget"] != nil, v2.Definitions["dev.example.v1alpha1.Widget"] != nil)
	}
	if _, ok := v2.Paths["/apis/example.dev/v1alpha1/namespaces/{namespace}/widgets"]; ok {
		t.Error("openapi v2 has paths of the unserved v1alpha1")
	}
}
