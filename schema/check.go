package schema

import (
	"fmt"

	"github.com/kapi-dev/kapi/meta"
)

// Check reports whether s is a well-formed structural schema, as Kubernetes
// requires of CustomResourceDefinition schemas, and returns every problem
// (nil when there is none), with paths in Kubernetes' style
// ("properties[spec].properties[ports].x-kubernetes-list-map-keys"):
//
//   - every type is one of object, array, string, integer, number, boolean,
//     and is set unless x-kubernetes-int-or-string or
//     x-kubernetes-preserve-unknown-fields allow any type;
//   - arrays have items; only objects have properties or
//     additionalProperties, and not both;
//   - x-kubernetes-int-or-string has no type; embedded resources are objects;
//   - list and map types have known values and fit the type; a set's items
//     are scalars (or atomic); a map list's items are objects whose
//     x-kubernetes-list-map-keys are scalar properties, each required or
//     defaulted;
//   - patterns compile, bounds are not negative;
//   - enum values have the schema's type, and defaults are valid and have no
//     fields pruning would drop.
//
// Check does not modify s.
func Check(s *Schema) error {
	if s == nil {
		return fmt.Errorf("schema: nil schema")
	}
	c := checker{}
	c.check(s, nil)
	if err := c.errs.ToAggregate(); err != nil {
		return fmt.Errorf("schema: invalid structural schema: %w", err)
	}
	return nil
}

type checker struct {
	errs meta.ErrorList
}

func (c *checker) add(e *meta.FieldError) { c.errs = append(c.errs, e) }

func (c *checker) check(s *Schema, p *meta.Path) {
	switch s.Type {
	case TypeObject, TypeArray, TypeString, TypeInteger, TypeNumber, TypeBoolean:
		if s.XIntOrString {
			c.add(meta.Invalid(p.Child("type"), s.Type, "must be empty if x-kubernetes-int-or-string is true"))
		}
	case "":
		if !s.XIntOrString && !s.XPreserveUnknownFields {
			c.add(meta.Required(p.Child("type"), "must not be empty for specified fields unless x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields is true"))
		}
	default:
		c.add(meta.NotSupported(p.Child("type"), s.Type, []string{TypeArray, TypeBoolean, TypeInteger, TypeNumber, TypeObject, TypeString}))
	}
	if s.Type == TypeArray && s.Items == nil {
		c.add(meta.Required(p.Child("items"), "must be specified for arrays"))
	}
	if s.Items != nil && s.Type != TypeArray && s.Type != "" {
		c.add(meta.Forbidden(p.Child("items"), "only arrays have items"))
	}
	if (len(s.Properties) > 0 || s.AdditionalProperties != nil) && s.Type != TypeObject && s.Type != "" {
		c.add(meta.Forbidden(p.Child("properties"), "only objects have properties or additionalProperties"))
	}
	if len(s.Properties) > 0 && s.AdditionalProperties != nil {
		c.add(meta.Forbidden(p.Child("additionalProperties"), "additionalProperties and properties are mutually exclusive"))
	}
	if s.XEmbeddedResource && s.Type != TypeObject {
		c.add(meta.Invalid(p.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
	}
	c.checkBounds(s, p)
	if s.Pattern != "" {
		if _, err := s.regexp(); err != nil {
			c.add(meta.Invalid(p.Child("pattern"), s.Pattern, err.Error()))
		}
	}
	c.checkListType(s, p)
	if s.XMapType != "" {
		if s.XMapType != MapTypeGranular && s.XMapType != MapTypeAtomic {
			c.add(meta.NotSupported(p.Child("x-kubernetes-map-type"), s.XMapType, []string{MapTypeGranular, MapTypeAtomic}))
		}
		if s.Type != TypeObject {
			c.add(meta.Invalid(p.Child("x-kubernetes-map-type"), s.XMapType, "may only be set on objects"))
		}
	}
	for _, k := range meta.SortedKeys(s.Properties) {
		ps := s.Properties[k]
		if ps == nil {
			c.add(meta.Required(p.Child("properties").Key(k), "must be a schema"))
			continue
		}
		c.check(ps, p.Child("properties").Key(k))
	}
	if as := s.additional(); as != nil {
		c.check(as, p.Child("additionalProperties"))
	}
	if s.Items != nil {
		c.check(s.Items, p.Child("items"))
	}
	c.checkValues(s, p)
}

func (c *checker) checkBounds(s *Schema, p *meta.Path) {
	for _, b := range []struct {
		name string
		v    *int64
	}{
		{"minLength", s.MinLength}, {"maxLength", s.MaxLength}, {"minItems", s.MinItems},
		{"maxItems", s.MaxItems}, {"minProperties", s.MinProperties}, {"maxProperties", s.MaxProperties},
	} {
		if b.v != nil && *b.v < 0 {
			c.add(meta.Invalid(p.Child(b.name), *b.v, "must be greater than or equal to 0"))
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf <= 0 {
		c.add(meta.Invalid(p.Child("multipleOf"), *s.MultipleOf, "must be greater than 0"))
	}
}

func isScalarType(t string) bool {
	return t == TypeString || t == TypeInteger || t == TypeNumber || t == TypeBoolean
}

func (c *checker) checkListType(s *Schema, p *meta.Path) {
	lp := p.Child("x-kubernetes-list-type")
	if len(s.XListMapKeys) > 0 && s.XListType != ListTypeMap {
		c.add(meta.Invalid(lp, s.XListType, "must be map if x-kubernetes-list-map-keys is non-empty"))
	}
	if s.XListType == "" {
		return
	}
	if s.Type != TypeArray {
		c.add(meta.Invalid(lp, s.XListType, "may only be set on arrays"))
		return
	}
	switch s.XListType {
	case ListTypeAtomic:
	case ListTypeSet:
		if it := s.Items; it != nil && !isScalarType(it.Type) && !it.XIntOrString &&
			!(it.Type == TypeObject && it.XMapType == MapTypeAtomic) &&
			!(it.Type == TypeArray && it.XListType == ListTypeAtomic) {
			c.add(meta.Invalid(p.Child("items").Child("x-kubernetes-map-type"), it.XMapType,
				"must be atomic as item of a list with x-kubernetes-list-type=set"))
		}
	case ListTypeMap:
		kp := p.Child("x-kubernetes-list-map-keys")
		if len(s.XListMapKeys) == 0 {
			c.add(meta.Required(kp, "must not be empty if x-kubernetes-list-type is map"))
		}
		it := s.Items
		if it == nil {
			return
		}
		if it.Type != TypeObject {
			c.add(meta.Invalid(p.Child("items").Child("type"), it.Type, "must be object if parent array's x-kubernetes-list-type is map"))
			return
		}
		required := map[string]bool{}
		for _, r := range it.Required {
			required[r] = true
		}
		seen := map[string]bool{}
		for i, k := range s.XListMapKeys {
			if seen[k] {
				c.add(meta.Duplicate(kp.Index(i), k))
				continue
			}
			seen[k] = true
			ks := it.Properties[k]
			switch {
			case ks == nil:
				c.add(meta.Invalid(kp.Index(i), k, "entries must all be names of item properties"))
			case !isScalarType(ks.Type) && !ks.XIntOrString:
				c.add(meta.Invalid(kp.Index(i), k, "must be a scalar property of the items"))
			case !required[k] && ks.Default == nil:
				c.add(meta.Required(p.Child("items").Child("properties").Key(k), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
			}
		}
	default:
		c.add(meta.NotSupported(lp, s.XListType, []string{ListTypeAtomic, ListTypeSet, ListTypeMap}))
	}
}

// checkValues checks enum values and the default against the schema.
func (c *checker) checkValues(s *Schema, p *meta.Path) {
	if len(s.Enum) > 0 {
		noEnum := s.Clone()
		noEnum.Enum = nil
		for i, e := range s.Enum {
			for _, err := range Validate(e, noEnum) {
				c.add(meta.Invalid(p.Child("enum").Index(i), e, nestedMessage(err)))
			}
		}
	}
	if s.Default != nil {
		for _, err := range Validate(s.Default, s) {
			c.add(meta.Invalid(p.Child("default"), s.Default, nestedMessage(err)))
		}
		cp := meta.DeepCopy(s.Default)
		var pr pruner
		pr.prune(cp, s, false)
		for _, f := range pr.dropped {
			c.add(meta.Invalid(p.Child("default"), s.Default, fmt.Sprintf("must not have unknown fields, found %q", f)))
		}
	}
}

// nestedMessage renders an error found inside an enum value or a default.
func nestedMessage(e *meta.FieldError) string {
	if e.Detail != "" && (e.Type == meta.CauseTypeFieldValueInvalid || e.Type == meta.CauseTypeTypeInvalid) {
		return e.Detail
	}
	if e.Field == "" {
		return e.ErrorBody()
	}
	return e.Error()
}
