package schema

import (
	"encoding/json"
	"slices"

	"github.com/kapi-dev/kapi/meta"
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
	return prune(obj, s, false).Unknown
}

// Normalized is what Normalize changed in an object.
type Normalized struct {
	Unknown  []string         // the dropped fields, as Prune returns them
	Integers []IntegerRewrite // the rewritten integers, by path
}

// Normalize is Prune that also rewrites, in the same walk, every integral
// value of an integer or int-or-string field written with a fraction or an
// exponent ("1e2", "8.0e1", "2.0") or as "-0" as a plain integer, as
// Kubernetes stores custom resources; it reports both.
func Normalize(obj any, s *Schema) Normalized {
	return prune(obj, s, true)
}

func prune(obj any, s *Schema, integers bool) Normalized {
	if s == nil {
		return Normalized{}
	}
	p := pruner{path: make([]pathElem, 0, 8), integers: integers}
	p.prune(obj, s, true)
	slices.Sort(p.dropped)
	if len(p.rewritten) > 1 {
		sortRewrites(p.rewritten)
	}
	return Normalized{Unknown: slices.Compact(p.dropped), Integers: p.rewritten}
}

// pruner prunes one object. path is the place of the value being pruned,
// kept as a stack and rendered only for a dropped field or a rewrite.
type pruner struct {
	dropped   []string
	rewritten []IntegerRewrite
	path      []pathElem
	integers  bool // rewrite integers (Normalize)
}

// pathElem is a field name, or an index when index >= 0.
type pathElem struct {
	name  string
	index int
}

func (p *pruner) push(e pathElem) { p.path = append(p.path, e) }
func (p *pruner) pop()            { p.path = p.path[:len(p.path)-1] }

// drop records the field k of the value at p.path as dropped.
func (p *pruner) drop(k string) {
	p.dropped = append(p.dropped, p.at().Child(k).String())
}

// at renders p.path.
func (p *pruner) at() *meta.Path {
	var mp *meta.Path
	for _, e := range p.path {
		if e.index >= 0 {
			mp = mp.Index(e.index)
		} else {
			mp = mp.Child(e.name)
		}
	}
	return mp
}

// keepResourceField handles apiVersion, kind and metadata of a resource
// (the root or an embedded resource), reporting whether k was one of them
// and kept.
func (p *pruner) keepResourceField(x map[string]any, k string) bool {
	switch k {
	case "apiVersion", "kind":
		_, ok := x[k].(string)
		return ok
	case "metadata":
		m, ok := x[k].(map[string]any)
		if ok {
			p.field(x, m, objectMetaSchema, k)
		}
		return ok
	}
	return false
}

// field prunes v, field k of x (the value at p.path), against s.
func (p *pruner) field(x map[string]any, v any, s *Schema, k string) {
	e := pathElem{name: k, index: -1}
	if n, ok := v.(json.Number); ok {
		if c, ok := p.number(n, s, e); ok {
			x[k] = c
		}
		return
	}
	p.push(e)
	p.prune(v, s, false)
	p.pop()
}

// item prunes element i of x (the value at p.path) against s, with skipPrune
// when skip is set.
func (p *pruner) item(x []any, i int, s *Schema, skip bool) {
	e := pathElem{index: i}
	if n, ok := x[i].(json.Number); ok {
		if c, ok := p.number(n, s, e); ok {
			x[i] = c
		}
		return
	}
	p.push(e)
	if skip {
		p.skipPrune(x[i], s, false)
	} else {
		p.prune(x[i], s, false)
	}
	p.pop()
}

// prune prunes x against s; resource is true at the root.
func (p *pruner) prune(x any, s *Schema, resource bool) {
	if s != nil && s.XPreserveUnknownFields {
		p.skipPrune(x, s, resource)
		return
	}
	switch t := x.(type) {
	case map[string]any:
		if s == nil {
			for k := range t {
				p.drop(k)
				delete(t, k)
			}
			return
		}
		if s.Type != "" && s.Type != TypeObject {
			return
		}
		resource = resource || s.XEmbeddedResource
		for k, v := range t {
			if resource && p.keepResourceField(t, k) {
				continue
			}
			if ps, ok := s.Properties[k]; ok {
				p.field(t, v, ps, k)
				continue
			}
			if ap := s.AdditionalProperties; ap != nil && (ap.Allows || ap.Schema != nil) {
				if ap.Schema != nil {
					p.field(t, v, ap.Schema, k)
				}
				continue
			}
			p.drop(k)
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
		for i := range t {
			p.item(t, i, items, false)
		}
	}
}

// skipPrune walks a value whose schema preserves unknown fields: unknown
// fields stay, known ones are pruned by their schemas.
func (p *pruner) skipPrune(x any, s *Schema, resource bool) {
	if s == nil {
		return
	}
	switch t := x.(type) {
	case map[string]any:
		resource = resource || s.XEmbeddedResource
		for k, v := range t {
			if resource && (k == "apiVersion" || k == "kind" || k == "metadata") {
				p.keepResourceField(t, k)
				continue
			}
			if ps, ok := s.Properties[k]; ok {
				p.field(t, v, ps, k)
			} else if as := s.additional(); as != nil {
				p.field(t, v, as, k)
			}
		}
	case []any:
		for i := range t {
			p.item(t, i, s.Items, true)
		}
	}
}
