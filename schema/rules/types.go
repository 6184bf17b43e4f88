package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/kapi-dev/kapi/schema"
)

// node is one level of a schema as CEL sees it: its type, its fields (an
// object's, by CEL name), the schema of its elements (a list's items, a
// map's values), and the rules that run on its values.
type node struct {
	s      *schema.Schema
	typ    *types.Type
	fields map[string]*field // object fields by (escaped) CEL name
	order  []*field          // the fields by JSON name: errors come in a stable order
	elem   *node             // list items or map values
	rules  []*rule
	// rulesBelow says a rule runs at this level or under it: a value
	// whose level has none needs no walk.
	rulesBelow bool
}

type field struct {
	json string // the JSON property name
	n    *node
}

// declare builds the node tree of s. path names object types uniquely
// (CEL object types are declared by name); root adds the metadata a rule at
// the root may see (name and generateName), as Kubernetes does.
func (c *compiler) declare(s *schema.Schema, path string, root bool) *node {
	n := &node{s: s}
	switch {
	case s == nil || s.XIntOrString:
		n.typ = types.DynType
	case s.Type == "object" || (s.Type == "" && (len(s.Properties) > 0 || root)):
		c.declareObject(n, s, path, root)
	case s.Type == "array":
		n.elem = c.declare(s.Items, path+"@items", false)
		n.typ = types.NewListType(n.elem.typ)
	case s.Type == "string":
		n.typ = stringType(s.Format)
	case s.Type == "integer":
		n.typ = types.IntType
	case s.Type == "number":
		n.typ = types.DoubleType
	case s.Type == "boolean":
		n.typ = types.BoolType
	default:
		n.typ = types.DynType
	}
	return n
}

// declareObject declares an object node: a map of its
// additionalProperties' schema, or an object type with its properties (and
// nothing else: as in Kubernetes, fields a schema keeps without describing
// them, x-kubernetes-preserve-unknown-fields, are not visible to rules).
func (c *compiler) declareObject(n *node, s *schema.Schema, path string, root bool) {
	if len(s.Properties) == 0 && !root && !s.XEmbeddedResource && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		n.elem = c.declare(s.AdditionalProperties.Schema, path+"@values", false)
		n.typ = types.NewMapType(types.StringType, n.elem.typ)
		return
	}
	// Names are unique by a counter: paths alone collide ("a.b" vs a's b).
	c.nextType++
	name := fmt.Sprintf("kapi.rules.object%d", c.nextType)
	n.typ = types.NewObjectType(name, traits.FieldTesterType|traits.IndexerType)
	n.fields = map[string]*field{}
	for prop, ps := range s.Properties {
		if (root || s.XEmbeddedResource) && prop == "metadata" {
			continue
		}
		if esc, ok := escape(prop); ok {
			n.fields[esc] = &field{json: prop, n: c.declare(ps, path+"."+prop, false)}
		}
	}
	if root || s.XEmbeddedResource {
		// Rules see kind, apiVersion and, of metadata, name and
		// generateName only.
		str := func() *node { return &node{s: &schema.Schema{Type: "string"}, typ: types.StringType} }
		md := &node{s: &schema.Schema{Type: "object"}, fields: map[string]*field{
			"name": {json: "name", n: str()}, "generateName": {json: "generateName", n: str()}}}
		md.typ = types.NewObjectType(name+".metadata", traits.FieldTesterType|traits.IndexerType)
		c.objects[md.typ.TypeName()] = md
		n.fields["metadata"] = &field{json: "metadata", n: md}
		for _, f := range []string{"kind", "apiVersion"} {
			if _, ok := n.fields[f]; !ok {
				n.fields[f] = &field{json: f, n: str()}
			}
		}
	}
	for _, f := range n.fields {
		n.order = append(n.order, f)
	}
	slices.SortFunc(n.order, func(a, b *field) int { return strings.Compare(a.json, b.json) })
	c.objects[name] = n
}

// stringType is the CEL type of a string of format f: Kubernetes gives
// byte strings, durations and times their own types.
func stringType(f string) *types.Type {
	switch f {
	case "byte":
		return types.BytesType
	case "duration":
		return types.DurationType
	case "date", "date-time":
		return types.TimestampType
	}
	return types.StringType
}

// celKeywords are the words CEL reserves; a property so named is reached
// as __word__.
var celKeywords = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true,
}

// escape is the CEL name of a property, as Kubernetes escapes it: keywords
// as __word__, and "__", ".", "-", "/" as __underscores__, __dot__,
// __dash__, __slash__. ok is false for a name CEL cannot reach.
func escape(prop string) (string, bool) {
	if celKeywords[prop] {
		return "__" + prop + "__", true
	}
	if prop == "" {
		return "", false
	}
	for i, r := range prop {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' || r == '/'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return "", false
		}
	}
	var b strings.Builder
	for i := 0; i < len(prop); i++ {
		switch {
		case strings.HasPrefix(prop[i:], "__"):
			b.WriteString("__underscores__")
			i++
		case prop[i] == '.':
			b.WriteString("__dot__")
		case prop[i] == '-':
			b.WriteString("__dash__")
		case prop[i] == '/':
			b.WriteString("__slash__")
		default:
			b.WriteByte(prop[i])
		}
	}
	return b.String(), true
}

// provider declares the object types of a compiler to CEL's checker.
type provider struct {
	*types.Registry
	objects map[string]*node
}

func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if n, ok := p.objects[name]; ok {
		return types.NewTypeTypeWithParam(n.typ), true
	}
	return p.Registry.FindStructType(name)
}

func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	n, ok := p.objects[name]
	if !ok {
		return p.Registry.FindStructFieldNames(name)
	}
	names := make([]string, 0, len(n.fields))
	for f := range n.fields {
		names = append(names, f)
	}
	return names, true
}

func (p *provider) FindStructFieldType(name, fieldName string) (*types.FieldType, bool) {
	n, ok := p.objects[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, fieldName)
	}
	f, ok := n.fields[fieldName]
	if !ok {
		return nil, false
	}
	return &types.FieldType{Type: f.n.typ}, true
}

// NewValue refuses object construction: rules read objects, they do not
// build them.
func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.objects[name]; ok {
		return types.NewErr("rules cannot construct %s objects", name)
	}
	return p.Registry.NewValue(name, fields)
}

func (n *node) String() string { return fmt.Sprintf("node(%s)", n.typ) }
