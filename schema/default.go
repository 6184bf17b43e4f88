package schema

import "github.com/kapi-dev/kapi/meta"

// Default applies the schema's default values to a generic object, in
// place, as Kubernetes structural defaulting does for custom resources:
//
//   - an absent property whose schema has a default gets a deep copy of it;
//   - so does a null property, array item or map value whose schema is not
//     nullable and has a default;
//   - a null property or map value whose schema is not nullable and has no
//     default is removed (Kubernetes prunes such nulls before defaulting);
//   - defaults apply recursively, inside array items and additionalProperties
//     values, and inside defaulted values themselves.
//
// Defaults apply only below objects that exist: a default for spec.size does
// not create spec. A nil schema does nothing.
func Default(obj any, s *Schema) {
	if s == nil {
		return
	}
	switch t := obj.(type) {
	case map[string]any:
		for k, ps := range s.Properties {
			if ps == nil {
				continue
			}
			v, found := t[k]
			switch {
			case ps.Default != nil && (!found || (v == nil && !ps.Nullable)):
				t[k] = meta.DeepCopy(ps.Default)
			case found && v == nil && !ps.Nullable:
				delete(t, k)
			}
		}
		as := s.additional()
		for k, v := range t {
			if ps, ok := s.Properties[k]; ok {
				Default(v, ps)
				continue
			}
			if as == nil {
				continue
			}
			if v == nil && !as.Nullable {
				if as.Default == nil {
					delete(t, k)
					continue
				}
				t[k] = meta.DeepCopy(as.Default)
			}
			Default(t[k], as)
		}
	case []any:
		if s.Items == nil {
			return
		}
		for i, v := range t {
			if v == nil && !s.Items.Nullable && s.Items.Default != nil {
				t[i] = meta.DeepCopy(s.Items.Default)
			}
			Default(t[i], s.Items)
		}
	}
}
