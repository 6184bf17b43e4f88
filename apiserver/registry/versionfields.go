package registry

import (
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
)

// fieldManagers returns the field managers of the set's versions, by
// version: each records managedFields entries in its own version and
// converts objects with the set's conversion to read the entries recorded
// in the others.
func (vs *versionSet) fieldManagers() map[string]*patch.FieldManager {
	tvs := make([]patch.TypeVersion, len(vs.def.Versions))
	for i := range vs.def.Versions {
		r := &vs.def.Versions[i]
		tvs[i] = patch.TypeVersion{GVK: r.GroupVersionKind(), Schema: r.Schema, StatusSubresource: r.Subresources.Status}
	}
	fms := patch.NewFieldManagers(tvs, fieldConversion{vs})
	out := make(map[string]*patch.FieldManager, len(fms))
	for i, fm := range fms {
		out[vs.def.Versions[i].Version] = fm
	}
	return out
}

// fieldConversion is the set's conversion as the field managers call it,
// by apiVersion.
type fieldConversion struct{ vs *versionSet }

func (c fieldConversion) ConvertVersion(obj map[string]any, from, to string) (map[string]any, error) {
	f, fok := meta.ParseGroupVersion(from)
	t, tok := meta.ParseGroupVersion(to)
	if !fok || !tok || f.Group != c.vs.group || t.Group != c.vs.group {
		return nil, fmt.Errorf("converting %s %s to %s: not versions of group %q", from, c.vs.kind, to, c.vs.group)
	}
	name := meta.GetName(obj)
	if ns := meta.GetNamespace(obj); ns != "" {
		name = ns + "/" + name
	}
	return c.vs.convert(obj, f.Version, t.Version, name)
}
