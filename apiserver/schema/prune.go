package schema

import (
	"slices"

	"github.com/kapi-dev/kapi/apiserver/meta"
)

// Prune removes, in place, the fields of a generic object that s does not
// describe, as Kubernetes prunes custom resources, and returns the paths of
// the dropped fields, sorted ("spec.bogus", "spec.ports[0].bogus"), for the
// fieldValidation Warn and Strict levels (`unknown field "spec.bogus"`).
//
// Fields are kept where x-kubernetes-preserve-unknown-fields is set (known
// fields below it are still pruned by their own schemas) and under
// additionalProperties: true. The root is treated as an embedded resource,
// like every x-kubernetes-embedded-resource object: apiVersion and kind are
// kept when they are strings, and metadata is kept when it is an object, with
// its own unknown fields (those not in ObjectMeta) dropped. Values whose type
// does not match the schema are left for Validate to report. A nil schema
// prunes nothing.
func Prune(obj any, s *Schema) []string {
	if s == nil {
		return nil
	}
	p := pruner{}
	p.prune(obj, s, nil, true)
	slices.Sort(p.dropped)
	return slices.Compact(p.dropped)
}

type pruner struct {
	dropped []string
}

// keepResourceField handles apiVersion, kind and metadata of a resource
// (the root or an embedded resource), reporting whether k was one of them
// and kept.
func (p *pruner) keepResourceField(x map[string]any, k string, path *meta.Path) bool {
	switch k {
	case "apiVersion", "kind":
		_, ok := x[k].(string)
		return ok
	case "metadata":
		m, ok := x[k].(map[string]any)
		if ok {
			p.prune(m, objectMetaSchema, path.Child(k), false)
		}
		return ok
	}
	return false
}

// prune prunes x against s; resource is true at the root.
func (p *pruner) prune(x any, s *Schema, path *meta.Path, resource bool) {
	if s != nil && s.XPreserveUnknownFields {
		p.skipPrune(x, s, path, resource)
		return
	}
	switch t := x.(type) {
	case map[string]any:
		if s == nil {
			for k := range t {
				p.dropped = append(p.dropped, path.Child(k).String())
				delete(t, k)
			}
			return
		}
		if s.Type != "" && s.Type != TypeObject {
			return
		}
		resource = resource || s.XEmbeddedResource
		for k, v := range t {
			if resource && p.keepResourceField(t, k, path) {
				continue
			}
			if ps, ok := s.Properties[k]; ok {
				p.prune(v, ps, path.Child(k), false)
				continue
			}
			if ap := s.AdditionalProperties; ap != nil && (ap.Allows || ap.Schema != nil) {
				if ap.Schema != nil {
					p.prune(v, ap.Schema, path.Child(k), false)
				}
				continue
			}
			p.dropped = append(p.dropped, path.Child(k).String())
			delete(t, k)
		}
	case []any:
		if s != nil && s.Type != "" && s.Type != TypeArray {
			return
		}
		var items *Schema
		if s != nil {
			items = s.Items
		}
		for i, e := range t {
			p.prune(e, items, path.Index(i), false)
		}
	}
}

// skipPrune walks a value whose schema preserves unknown fields: unknown
// fields stay, known ones are pruned by their schemas.
func (p *pruner) skipPrune(x any, s *Schema, path *meta.Path, resource bool) {
	if s == nil {
		return
	}
	switch t := x.(type) {
	case map[string]any:
		resource = resource || s.XEmbeddedResource
		for k, v := range t {
			if resource && (k == "apiVersion" || k == "kind" || k == "metadata") {
				p.keepResourceField(t, k, path)
				continue
			}
			if ps, ok := s.Properties[k]; ok {
				p.prune(v, ps, path.Child(k), false)
			} else if as := s.additional(); as != nil {
				p.prune(v, as, path.Child(k), false)
			}
		}
	case []any:
		for i, e := range t {
			p.skipPrune(e, s.Items, path.Index(i), false)
		}
	}
}
