package meta

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
