package discovery

import (
	"sort"
	"strings"
	"testing"
)

func TestVersionLess(t *testing.T) {
	vs := []string{"v1alpha1", "v2", "v1beta2", "v10", "v1", "v2beta1", "v1beta1", "v3alpha2"}
	sort.Slice(vs, func(i, j int) bool { return VersionLess(vs[j], vs[i]) })
	if got, want := strings.Join(vs, ","), "v10,v2,v1,v2beta1,v1beta2,v1beta1,v3alpha2,v1alpha1"; got != want {
		t.Errorf("by priority: %s, want %s", got, want)
	}
}

// No types at all (a server always has namespaces): empty lists, not null.
func TestBuildEmpty(t *testing.T) {
	d := Build(nil)
	for name, got := range map[string][]byte{
		"APIVersions":    d.APIVersions,
		"GroupList":      d.GroupList,
		"AggregatedAPI":  d.AggregatedAPI,
		"AggregatedAPIs": d.AggregatedAPIs,
	} {
		want := map[string]string{
			"APIVersions":    `{"kind":"APIVersions","versions":[],"serverAddressByClientCIDRs":[]}`,
			"GroupList":      `{"apiVersion":"v1","groups":[],"kind":"APIGroupList"}`,
			"AggregatedAPI":  `{"apiVersion":"apidiscovery.k8s.io/v2","items":[],"kind":"APIGroupDiscoveryList","metadata":{}}`,
			"AggregatedAPIs": `{"apiVersion":"apidiscovery.k8s.io/v2","items":[],"kind":"APIGroupDiscoveryList","metadata":{}}`,
		}[name]
		if string(got) != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}
