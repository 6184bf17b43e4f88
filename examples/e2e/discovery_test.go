package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// wantResource is what discovery must say about one resource.
type wantResource struct {
	groupVersion string
	name         string
	kind         string
	singular     string
	namespaced   bool
	verbs        []string
	shortNames   []string
	categories   []string
}

// The resources of the quickstart, as kube-apiserver v1.36 describes them
// (namespaces, configmaps, secrets and leases built in, widgets from
// widgets-crd.yaml, in two versions).
var quickstartResources = []wantResource{
	{
		groupVersion: "v1", name: "namespaces", kind: "Namespace", singular: "namespace",
		namespaced: false,
		verbs:      []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		shortNames: []string{"ns"},
	},
	{
		groupVersion: "v1", name: "configmaps", kind: "ConfigMap", singular: "configmap",
		namespaced: true,
		verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		shortNames: []string{"cm"},
	},
	{
		groupVersion: "v1", name: "secrets", kind: "Secret", singular: "secret",
		namespaced: true,
		verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	},
	{
		groupVersion: "coordination.k8s.io/v1", name: "leases", kind: "Lease", singular: "lease",
		namespaced: true,
		verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	},
	{
		groupVersion: "example.dev/v1", name: "widgets", kind: "Widget", singular: "widget",
		namespaced: true,
		verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		shortNames: []string{"wd"},
		categories: []string{"all"},
	},
	{
		groupVersion: "example.dev/v2", name: "widgets", kind: "Widget", singular: "widget",
		namespaced: true,
		verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		shortNames: []string{"wd"},
		categories: []string{"all"},
	},
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ServerGroupsAndResources", func(t *testing.T) {
		groups, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("ServerGroupsAndResources: %v", err)
		}
		versions, preferred := map[string][]string{}, map[string]string{}
		for _, g := range groups {
			preferred[g.Name] = g.PreferredVersion.GroupVersion
			for _, v := range g.Versions {
				versions[g.Name] = append(versions[g.Name], v.GroupVersion)
			}
			if g.PreferredVersion.GroupVersion == "" {
				t.Errorf("group %q has no preferred version", g.Name)
			}
		}
		if !slices.Contains(versions[""], "v1") {
			t.Errorf("core group versions = %v, want v1 among them", versions[""])
		}
		// Highest priority first, as kube-apiserver orders a CRD's versions.
		if !slices.Equal(versions["example.dev"], []string{"example.dev/v2", "example.dev/v1"}) || preferred["example.dev"] != "example.dev/v2" {
			t.Errorf("example.dev versions = %v, preferred %s; want [example.dev/v2 example.dev/v1], preferred example.dev/v2", versions["example.dev"], preferred["example.dev"])
		}

		byGV := map[string]map[string]metav1.APIResource{}
		for _, l := range lists {
			m := map[string]metav1.APIResource{}
			for _, r := range l.APIResources {
				m[r.Name] = r
			}
			byGV[l.GroupVersion] = m
		}
		for _, w := range quickstartResources {
			r, ok := byGV[w.groupVersion][w.name]
			if !ok {
				t.Errorf("%s %s: not in discovery (have %v)", w.groupVersion, w.name, keys(byGV[w.groupVersion]))
				continue
			}
			if r.Kind != w.kind {
				t.Errorf("%s: kind = %q, want %q", w.name, r.Kind, w.kind)
			}
			if r.Namespaced != w.namespaced {
				t.Errorf("%s: namespaced = %v, want %v", w.name, r.Namespaced, w.namespaced)
			}
			if !sameSet(r.Verbs, w.verbs) {
				t.Errorf("%s: verbs = %v, want %v", w.name, r.Verbs, w.verbs)
			}
			if r.SingularName != w.singular {
				t.Errorf("%s: singularName = %q, want %q", w.name, r.SingularName, w.singular)
			}
			if !sameSet(r.ShortNames, w.shortNames) {
				t.Errorf("%s: shortNames = %v, want %v", w.name, r.ShortNames, w.shortNames)
			}
			if !sameSet(r.Categories, w.categories) {
				t.Errorf("%s: categories = %v, want %v", w.name, r.Categories, w.categories)
			}
		}

		for _, gv := range []string{"example.dev/v1", "example.dev/v2"} {
			checkWidgetSubresources(t, gv, byGV[gv])
		}
	})

	// client-go's discovery asks for the aggregated form first (it falls back
	// to the legacy one silently), so check it is served in its own right.
	t.Run("aggregated", func(t *testing.T) {
		const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;q=0.9"
		got := map[string]apidiscoveryv2.APIResourceDiscovery{} // "group/version/resource"
		for _, path := range []string{"/api", "/apis"} {
			code, body := s.Do(t, "GET", path, nil, "Accept", accept)
			if code != 200 {
				t.Fatalf("GET %s (aggregated): %d %s", path, code, body)
			}
			var list apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("GET %s (aggregated): %v\n%s", path, err, body)
			}
			if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != "apidiscovery.k8s.io/v2" {
				t.Fatalf("GET %s with Accept %s: kind %q apiVersion %q, want APIGroupDiscoveryList apidiscovery.k8s.io/v2\n%.400s",
					path, accept, list.Kind, list.APIVersion, body)
			}
			for _, g := range list.Items {
				for _, v := range g.Versions {
					for _, r := range v.Resources {
						got[g.Name+"/"+v.Version+"/"+r.Resource] = r
					}
				}
			}
		}
		for _, w := range quickstartResources {
			gv, _ := schema.ParseGroupVersion(w.groupVersion)
			r, ok := got[gv.Group+"/"+gv.Version+"/"+w.name]
			if !ok {
				t.Errorf("aggregated discovery lacks %s %s", w.groupVersion, w.name)
				continue
			}
			scope := apidiscoveryv2.ScopeCluster
			if w.namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			if r.ResponseKind == nil || r.ResponseKind.Kind != w.kind {
				t.Errorf("%s: responseKind = %+v, want kind %s", w.name, r.ResponseKind, w.kind)
			}
			if r.Scope != scope || r.SingularResource != w.singular || !sameSet(r.Verbs, w.verbs) ||
				!sameSet(r.ShortNames, w.shortNames) || !sameSet(r.Categories, w.categories) {
				t.Errorf("%s: scope %q singular %q verbs %v shortNames %v categories %v; want %q %q %v %v %v",
					w.name, r.Scope, r.SingularResource, r.Verbs, r.ShortNames, r.Categories,
					scope, w.singular, w.verbs, w.shortNames, w.categories)
			}
		}
		sub := map[string]apidiscoveryv2.APISubresourceDiscovery{}
		for _, sr := range got["example.dev/v1/widgets"].Subresources {
			sub[sr.Subresource] = sr
		}
		if st, ok := sub["status"]; !ok || st.ResponseKind == nil || st.ResponseKind.Kind != "Widget" {
			t.Errorf("widgets subresource status = %+v (present %v), want responseKind Widget", st, ok)
		}
		if sc, ok := sub["scale"]; !ok || sc.ResponseKind == nil ||
			*sc.ResponseKind != (metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}) {
			t.Errorf("widgets subresource scale = %+v (present %v), want responseKind autoscaling/v1 Scale", sc, ok)
		}
	})

	t.Run("RESTMapper", func(t *testing.T) {
		cached := memory.NewMemCacheClient(dc)
		mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)

		m, err := mapper.RESTMapping(schema.GroupKind{Group: "example.dev", Kind: "Widget"}, "v1")
		if err != nil {
			t.Fatalf("RESTMapping(Widget.example.dev): %v", err)
		}
		if want := (schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}); m.Resource != want {
			t.Errorf("RESTMapping(Widget).Resource = %v, want %v", m.Resource, want)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Errorf("RESTMapping(Widget).Scope = %v, want namespace", m.Scope.Name())
		}
		// Without a version: the preferred one.
		if m, err := mapper.RESTMapping(schema.GroupKind{Group: "example.dev", Kind: "Widget"}); err != nil || m.Resource.Version != "v2" {
			t.Errorf("RESTMapping(Widget.example.dev) without a version: %v %v, want widgets.v2.example.dev", m, err)
		}

		for _, in := range []string{"widgets", "widget", "wd"} {
			gvk, err := mapper.KindFor(schema.GroupVersionResource{Resource: in})
			if err != nil {
				t.Errorf("KindFor(%q): %v", in, err)
				continue
			}
			// The preferred version, v2.
			if want := (schema.GroupVersionKind{Group: "example.dev", Version: "v2", Kind: "Widget"}); gvk != want {
				t.Errorf("KindFor(%q) = %v, want %v", in, gvk, want)
			}
			gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: in})
			if err != nil {
				t.Errorf("ResourceFor(%q): %v", in, err)
				continue
			}
			if want := (schema.GroupVersionResource{Group: "example.dev", Version: "v2", Resource: "widgets"}); gvr != want {
				t.Errorf("ResourceFor(%q) = %v, want widgets.v2.example.dev", in, gvr)
			}
		}

		for _, c := range []struct {
			kind     string
			resource string
			scope    meta.RESTScopeName
		}{
			{"ConfigMap", "configmaps", meta.RESTScopeNameNamespace},
			{"Namespace", "namespaces", meta.RESTScopeNameRoot},
		} {
			m, err := mapper.RESTMapping(schema.GroupKind{Kind: c.kind}, "v1")
			if err != nil {
				t.Errorf("RESTMapping(%s): %v", c.kind, err)
				continue
			}
			if m.Resource.Resource != c.resource || m.Scope.Name() != c.scope {
				t.Errorf("RESTMapping(%s) = %v scope %v, want %s scope %v", c.kind, m.Resource, m.Scope.Name(), c.resource, c.scope)
			}
		}
	})
}

// checkWidgetSubresources checks the subresources of widgets in one
// version's legacy discovery: status and scale, and the custom restart,
// log and health, whose kinds are the version's.
func checkWidgetSubresources(t *testing.T, gv string, widgets map[string]metav1.APIResource) {
	t.Helper()
	status, ok := widgets["widgets/status"]
	if !ok {
		t.Errorf("%s widgets/status is not in discovery (have %v)", gv, keys(widgets))
	} else if status.Kind != "Widget" || !status.Namespaced || !sameSet(status.Verbs, []string{"get", "patch", "update"}) {
		t.Errorf("%s widgets/status = %+v, want kind Widget, namespaced, verbs [get patch update]", gv, status)
	}
	scale, ok := widgets["widgets/scale"]
	if !ok {
		t.Errorf("%s widgets/scale is not in discovery (have %v)", gv, keys(widgets))
	} else if scale.Kind != "Scale" || scale.Group != "autoscaling" || scale.Version != "v1" ||
		!scale.Namespaced || !sameSet(scale.Verbs, []string{"get", "patch", "update"}) {
		t.Errorf("%s widgets/scale = %+v, want kind Scale in autoscaling/v1, namespaced, verbs [get patch update]", gv, scale)
	}
	version := strings.TrimPrefix(gv, "example.dev/")
	for sub, kind := range map[string]string{"restart": "WidgetRestart", "health": "WidgetHealth"} {
		r, ok := widgets["widgets/"+sub]
		if !ok || r.Kind != kind || (r.Version != "" && r.Version != version) {
			t.Errorf("%s widgets/%s = %+v (present %v), want kind %s of %s", gv, sub, r, ok, kind, gv)
		}
	}
	if _, ok := widgets["widgets/log"]; !ok {
		t.Errorf("%s widgets/log is not in discovery (have %v)", gv, keys(widgets))
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
