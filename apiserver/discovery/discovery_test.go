package discovery

import (
	"testing"
)

// No types at all (a server always has namespaces): empty lists, not null.
func TestBuildEmpty(t *testing.T) {
	d := Build(nil)
	for name, got := range map[string][]byte{
		"APIVersions":    d.APIVersions,
		"GroupList":      d.GroupList,
		"AggregatedAPI":  d.AggregatedAPI.V2,
		"AggregatedAPIs": d.AggregatedAPIs.V2,
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
