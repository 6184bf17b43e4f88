package patch

import (
	"slices"
	"strings"

	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Names of the structured-merge-diff types every converted schema has.
const (
	rootTypeName       = "__kapi_object"
	objectMetaTypeName = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	untypedName        = "__untyped_atomic_"
	deducedName        = "__untyped_deduced_"
)

// SMDSchema converts a structural schema to a structured-merge-diff schema
// whose type rootTypeName describes the object, the way kube-apiserver
// converts a CustomResourceDefinition's schema for server-side apply:
//
//   - objects with properties are structs; x-kubernetes-map-type atomic makes
//     them (and maps) atomic, granular or unset makes them granular; an
//     object without properties, with additionalProperties: true, or under
//     x-kubernetes-preserve-unknown-fields is unstructured ("deduced": keys
//     are fields, lists are atomic);
//   - arrays follow x-kubernetes-list-type (atomic, set, map with
//     x-kubernetes-list-map-keys), or, without one, an
//     x-kubernetes-patch-strategy of merge (with its merge key); otherwise
//     they are atomic, as Kubernetes treats custom resources;
//   - integers and numbers are numeric, booleans boolean, strings string
//     (untyped with a format other than byte, like kube-apiserver);
//     x-kubernetes-int-or-string is an untyped scalar;
//   - the object and every x-kubernetes-embedded-resource get apiVersion,
//     kind and metadata, where metadata is Kubernetes' ObjectMeta with its own
//     rules (labels and annotations granular, finalizers a set,
//     ownerReferences a map keyed by uid, managedFields atomic).
func SMDSchema(s *schema.Schema) *smdschema.Schema {
	c := converter{}
	root := c.atom(s, false, true)
	out := &smdschema.Schema{Types: []smdschema.TypeDef{
		{Name: rootTypeName, Atom: root},
		{Name: objectMetaTypeName, Atom: objectMetaAtom()},
		untypedDef(),
		deducedDef(),
	}}
	return out
}

type converter struct{}

func named(name string) smdschema.TypeRef {
	n := name
	return smdschema.TypeRef{NamedType: &n}
}

func inlined(a smdschema.Atom) smdschema.TypeRef { return smdschema.TypeRef{Inlined: a} }

func scalar(s smdschema.Scalar) smdschema.Atom { return smdschema.Atom{Scalar: &s} }

// atom converts one schema node. preserve is true below
// x-kubernetes-preserve-unknown-fields; resource is true for the root and
// embedded resources.
func (c converter) atom(s *schema.Schema, preserve, resource bool) smdschema.Atom {
	if s == nil {
		return deducedDef().Atom
	}
	preserve = preserve || s.XPreserveUnknownFields
	resource = resource || s.XEmbeddedResource
	switch s.Type {
	case "":
		if s.XIntOrString {
			return scalar("untyped")
		}
		return smdschema.Atom{
			Scalar: scalar("untyped").Scalar,
			List:   c.list(s, preserve),
			Map:    c.object(s, preserve, resource),
		}
	case schema.TypeObject:
		return smdschema.Atom{Map: c.object(s, preserve, resource)}
	case schema.TypeArray:
		return smdschema.Atom{List: c.list(s, preserve)}
	case schema.TypeInteger, schema.TypeNumber:
		return scalar(smdschema.Numeric)
	case schema.TypeBoolean:
		return scalar(smdschema.Boolean)
	case schema.TypeString:
		if s.Format == "" || s.Format == "byte" {
			return scalar(smdschema.String)
		}
		return scalar("untyped")
	}
	return scalar("untyped")
}

func (c converter) object(s *schema.Schema, preserve, resource bool) *smdschema.Map {
	fields := make([]smdschema.StructField, 0, len(s.Properties)+3)
	for _, name := range meta.SortedKeys(s.Properties) {
		if resource && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		fields = append(fields, smdschema.StructField{Name: name, Type: inlined(c.atom(s.Properties[name], preserve, false))})
	}
	if resource {
		fields = append(fields,
			smdschema.StructField{Name: "apiVersion", Type: inlined(scalar(smdschema.String))},
			smdschema.StructField{Name: "kind", Type: inlined(scalar(smdschema.String))},
			smdschema.StructField{Name: "metadata", Type: named(objectMetaTypeName)},
		)
		slices.SortFunc(fields, func(a, b smdschema.StructField) int { return strings.Compare(a.Name, b.Name) })
	}
	m := &smdschema.Map{Fields: fields}
	switch ap := s.AdditionalProperties; {
	case ap != nil && ap.Schema != nil:
		m.ElementType = inlined(c.atom(ap.Schema, preserve, false))
	case ap != nil && ap.Allows:
		m.ElementType = named(deducedName)
	case ap == nil && (preserve || len(fields) == 0):
		m.ElementType = named(deducedName)
	}
	switch s.XMapType {
	case schema.MapTypeAtomic:
		m.ElementRelationship = smdschema.Atomic
	case schema.MapTypeGranular:
		m.ElementRelationship = smdschema.Separable
	}
	return m
}

func (c converter) list(s *schema.Schema, preserve bool) *smdschema.List {
	l := &smdschema.List{ElementRelationship: smdschema.Atomic}
	switch s.XListType {
	case schema.ListTypeSet:
		l.ElementRelationship = smdschema.Associative
	case schema.ListTypeMap:
		l.ElementRelationship = smdschema.Associative
		l.Keys = slices.Clone(s.XListMapKeys)
	case schema.ListTypeAtomic:
	default:
		st := strategies(s)
		if slices.Contains(st, directiveMerge) {
			l.ElementRelationship = smdschema.Associative
			if s.XPatchMergeKey != "" {
				l.Keys = []string{s.XPatchMergeKey}
			}
		}
	}
	if s.Items != nil {
		l.ElementType = inlined(c.atom(s.Items, preserve, false))
	} else {
		l.ElementType = named(untypedName)
	}
	return l
}

func untypedDef() smdschema.TypeDef {
	return smdschema.TypeDef{Name: untypedName, Atom: smdschema.Atom{
		Scalar: scalar("untyped").Scalar,
		List:   &smdschema.List{ElementType: named(untypedName), ElementRelationship: smdschema.Atomic},
		Map:    &smdschema.Map{ElementType: named(untypedName), ElementRelationship: smdschema.Atomic},
	}}
}

func deducedDef() smdschema.TypeDef {
	return smdschema.TypeDef{Name: deducedName, Atom: smdschema.Atom{
		Scalar: scalar("untyped").Scalar,
		List:   &smdschema.List{ElementType: named(untypedName), ElementRelationship: smdschema.Atomic},
		Map:    &smdschema.Map{ElementType: named(deducedName), ElementRelationship: smdschema.Separable},
	}}
}

// objectMetaAtom is Kubernetes' ObjectMeta for structured-merge-diff.
func objectMetaAtom() smdschema.Atom {
	str := func() smdschema.TypeRef { return inlined(scalar(smdschema.String)) }
	num := func() smdschema.TypeRef { return inlined(scalar(smdschema.Numeric)) }
	untyped := func() smdschema.TypeRef { return inlined(scalar("untyped")) }
	boolean := func() smdschema.TypeRef { return inlined(scalar(smdschema.Boolean)) }
	stringMap := func() smdschema.TypeRef {
		return inlined(smdschema.Atom{Map: &smdschema.Map{ElementType: str()}})
	}
	ownerRef := smdschema.Atom{Map: &smdschema.Map{ElementRelationship: smdschema.Atomic, Fields: []smdschema.StructField{
		{Name: "apiVersion", Type: str()},
		{Name: "blockOwnerDeletion", Type: boolean()},
		{Name: "controller", Type: boolean()},
		{Name: "kind", Type: str()},
		{Name: "name", Type: str()},
		{Name: "uid", Type: str()},
	}}}
	managedEntry := smdschema.Atom{Map: &smdschema.Map{Fields: []smdschema.StructField{
		{Name: "apiVersion", Type: str()},
		{Name: "fieldsType", Type: str()},
		{Name: "fieldsV1", Type: named(deducedName)},
		{Name: "manager", Type: str()},
		{Name: "operation", Type: str()},
		{Name: "subresource", Type: str()},
		{Name: "time", Type: untyped()},
	}}}
	return smdschema.Atom{Map: &smdschema.Map{Fields: []smdschema.StructField{
		{Name: "annotations", Type: stringMap()},
		{Name: "creationTimestamp", Type: untyped()},
		{Name: "deletionGracePeriodSeconds", Type: num()},
		{Name: "deletionTimestamp", Type: untyped()},
		{Name: "finalizers", Type: inlined(smdschema.Atom{List: &smdschema.List{ElementType: str(), ElementRelationship: smdschema.Associative}})},
		{Name: "generateName", Type: str()},
		{Name: "generation", Type: num()},
		{Name: "labels", Type: stringMap()},
		{Name: "managedFields", Type: inlined(smdschema.Atom{List: &smdschema.List{ElementType: inlined(managedEntry), ElementRelationship: smdschema.Atomic}})},
		{Name: "name", Type: str()},
		{Name: "namespace", Type: str()},
		{Name: "ownerReferences", Type: inlined(smdschema.Atom{List: &smdschema.List{ElementType: inlined(ownerRef), ElementRelationship: smdschema.Associative, Keys: []string{"uid"}}})},
		{Name: "resourceVersion", Type: str()},
		{Name: "selfLink", Type: str()},
		{Name: "uid", Type: str()},
	}}}
}
