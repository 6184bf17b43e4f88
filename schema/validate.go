package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/kapi-dev/kapi/meta"
)

// Validate checks a generic JSON value against s and returns every problem
// found, with field paths ("spec.ports[0].port") and messages worded as
// Kubernetes words custom resource validation errors:
//
//	spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0
//	spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"
//	spec.size: Required value
//	spec.color: Unsupported value: "pink": supported values: "red", "blue"
//
// As in Kubernetes, the value of a type error is the JSON type of the bad
// value, not the value itself. Unknown fields are not errors (Prune handles
// them). Embedded resources (x-kubernetes-embedded-resource, below the root)
// must have a string apiVersion and kind. A nil schema accepts anything.
func Validate(obj any, s *Schema) meta.ErrorList {
	v := validator{}
	v.validate(obj, prev{}, s, nil)
	return v.errs
}

// ValidateUpdate is Validate of an update of old to obj with ratcheting, as
// Kubernetes validates custom resources: a value equal to its correlated
// old value (the same field or map key; in a map list the element with the
// same keys; elements of sets and atomic lists have none) is not checked,
// so an object stored before its schema tightened can still be updated
// where it is not changed.
func ValidateUpdate(obj, old any, s *Schema) meta.ErrorList {
	v := validator{}
	v.validate(obj, prev{v: old, ok: true}, s, nil)
	return v.errs
}

// prev is the old value correlated with the value being validated, if any.
type prev struct {
	v  any
	ok bool
}

// member is the old value of an object's property or a map's key k.
func (o prev) member(k string) prev {
	m, _ := o.v.(map[string]any)
	v, ok := m[k]
	return prev{v: v, ok: o.ok && ok}
}

// ListCorrelation finds the old element of each element of a list of
// schema s whose old value is old, as Kubernetes correlates them for
// ratcheting and transition rules: in a map list the element with the same
// key fields (through one index, so a list costs linear time); elements of
// sets and atomic lists have none.
type ListCorrelation struct {
	s     *Schema
	byKey map[string]any
}

// CorrelateList indexes old, the previous value of a list of schema s.
func CorrelateList(s *Schema, old []any) ListCorrelation {
	c := ListCorrelation{s: s}
	if s.ListType() != ListTypeMap || len(old) == 0 {
		return c
	}
	c.byKey = make(map[string]any, len(old))
	for _, o := range old {
		if m, ok := o.(map[string]any); ok {
			c.byKey[listMapKey(s, m)] = o
		}
	}
	return c
}

// Old returns the old element of item, if it has one.
func (c ListCorrelation) Old(item any) (any, bool) {
	m, ok := item.(map[string]any)
	if c.byKey == nil || !ok {
		return nil, false
	}
	o, ok := c.byKey[listMapKey(c.s, m)]
	return o, ok
}

// listMapKey is the canonical form of the key fields of an element of a map
// list (absent keys read as their defaults).
func listMapKey(s *Schema, m map[string]any) string {
	key := make([]any, len(s.XListMapKeys))
	for j, k := range s.XListMapKeys {
		val, ok := m[k]
		if !ok {
			if ks := s.Items.Lookup(k); ks != nil && ks.Default != nil {
				val = ks.Default
			} else {
				val = unspecified{}
			}
		}
		key[j] = val
	}
	return meta.CanonicalKey(key)
}

type validator struct {
	errs meta.ErrorList
}

func (v *validator) add(e *meta.FieldError) { v.errs = append(v.errs, e) }

// pathName renders a path for the "<path> in body ..." messages.
func pathName(p *meta.Path) string {
	if s := p.String(); s != "" {
		return s
	}
	return "<root>"
}

// jsonType returns the OpenAPI type name of a generic value: "null",
// "boolean", "string", "object", "array", "integer" (integral
// representations) or "number". ok is false for values that are not JSON.
func jsonType(x any) (string, bool) {
	switch t := x.(type) {
	case nil:
		return "null", true
	case bool:
		return TypeBoolean, true
	case string:
		return TypeString, true
	case map[string]any:
		return TypeObject, true
	case []any:
		return TypeArray, true
	case json.Number:
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return TypeInteger, true
		}
		if _, err := strconv.ParseFloat(string(t), 64); err == nil {
			return TypeNumber, true
		}
		return "", false
	case float64, float32:
		return TypeNumber, true
	}
	if _, ok := meta.AsInt64(x); ok {
		return TypeInteger, true
	}
	if meta.IsNumber(x) {
		return TypeInteger, true // uint64 beyond int64
	}
	return "", false
}

// isInteger reports whether a number value is integral, the way Kubernetes
// accepts it for type integer: an integer representation, or a float that
// is integral and within ±2^53.
func isInteger(x any) bool {
	if t, _ := jsonType(x); t == TypeInteger {
		return true
	}
	_, ok := meta.AsInt64(x)
	return ok
}

func (v *validator) typeError(x any, p *meta.Path, want string) {
	got, ok := jsonType(x)
	if !ok {
		got = fmt.Sprintf("%T", x)
	}
	v.add(meta.TypeInvalid(p, got, fmt.Sprintf("%s in body must be of type %s: %q", pathName(p), want, got)))
}

// checkType reports whether x has the schema's type, reporting an error
// when it does not.
func (v *validator) checkType(x any, s *Schema, p *meta.Path) bool {
	got, ok := jsonType(x)
	if !ok {
		v.typeError(x, p, typeDescription(s))
		return false
	}
	if s.XIntOrString {
		if got == TypeString || (meta.IsNumber(x) && isInteger(x)) {
			return true
		}
		v.typeError(x, p, "integer or string")
		return false
	}
	switch s.Type {
	case "":
		return true
	case TypeInteger:
		if meta.IsNumber(x) && isInteger(x) {
			return true
		}
	case TypeNumber:
		if meta.IsNumber(x) {
			return true
		}
	default:
		if got == s.Type {
			return true
		}
	}
	v.typeError(x, p, s.Type)
	return false
}

func typeDescription(s *Schema) string {
	if s.XIntOrString {
		return "integer or string"
	}
	if s.Type == "" {
		return "JSON value"
	}
	return s.Type
}

func (v *validator) validate(x any, o prev, s *Schema, p *meta.Path) {
	if s == nil || o.ok && meta.DeepEqual(x, o.v) {
		return // nothing to check, or unchanged: ratcheted
	}
	if x == nil {
		if s.Nullable || (s.Type == "" && !s.XIntOrString) {
			return
		}
		v.add(meta.TypeInvalid(p, "null", fmt.Sprintf("%s in body must be of type %s: %q", pathName(p), typeDescription(s), "null")))
		return
	}
	if !v.checkType(x, s, p) {
		return
	}
	if len(s.Enum) > 0 {
		v.checkEnum(x, s, p)
	}
	switch t := x.(type) {
	case string:
		v.validateString(t, s, p)
	case map[string]any:
		v.validateObject(t, o, s, p)
	case []any:
		v.validateArray(t, o, s, p)
	case bool:
	default:
		v.validateNumber(x, s, p)
	}
}

func (v *validator) checkEnum(x any, s *Schema, p *meta.Path) {
	for _, e := range s.Enum {
		if meta.DeepEqual(x, e) {
			return
		}
	}
	values := make([]string, len(s.Enum))
	for i, e := range s.Enum {
		if str, ok := e.(string); ok {
			values[i] = str
		} else {
			b, _ := json.Marshal(e)
			values[i] = string(b)
		}
	}
	v.add(meta.NotSupported(p, x, values))
}

func (v *validator) validateNumber(x any, s *Schema, p *meta.Path) {
	f, _ := meta.AsFloat64(x)
	if s.Maximum != nil {
		if s.ExclusiveMaximum && f >= *s.Maximum {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be less than %v", pathName(p), *s.Maximum)))
		} else if !s.ExclusiveMaximum && f > *s.Maximum {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be less than or equal to %v", pathName(p), *s.Maximum)))
		}
	}
	if s.Minimum != nil {
		if s.ExclusiveMinimum && f <= *s.Minimum {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be greater than %v", pathName(p), *s.Minimum)))
		} else if !s.ExclusiveMinimum && f < *s.Minimum {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be greater than or equal to %v", pathName(p), *s.Minimum)))
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		q := f / *s.MultipleOf
		if math.IsInf(q, 0) || math.IsNaN(q) || q != math.Trunc(q) {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be a multiple of %v", pathName(p), *s.MultipleOf)))
		}
	}
}

func (v *validator) validateString(x string, s *Schema, p *meta.Path) {
	var n int64 // counted only for a bound: it is a pass over the string
	if s.MaxLength != nil || s.MinLength != nil {
		n = int64(utf8.RuneCountInString(x))
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		v.add(meta.TooLong(p, x, int(*s.MaxLength)))
	}
	if s.MinLength != nil && n < *s.MinLength {
		v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should be at least %d chars long", pathName(p), *s.MinLength)))
	}
	if s.Pattern != "" {
		re, err := s.regexp()
		if err != nil {
			v.add(meta.Internal(p, err))
		} else if !re.MatchString(x) {
			v.add(meta.Invalid(p, x, fmt.Sprintf("%s in body should match '%s'", pathName(p), s.Pattern)))
		}
	}
	if s.Format != "" && (s.Type == TypeString || s.Type == "") {
		if !checkFormat(s.Format, x) {
			v.add(meta.TypeInvalid(p, x, fmt.Sprintf("%s in body must be of type %s: %q", pathName(p), s.Format, x)))
		}
	}
}

func (v *validator) validateObject(x map[string]any, o prev, s *Schema, p *meta.Path) {
	for _, r := range s.Required {
		if _, ok := x[r]; !ok {
			v.add(meta.Required(p.Child(r), ""))
		}
	}
	n := int64(len(x))
	if s.MaxProperties != nil && n > *s.MaxProperties {
		v.add(meta.TooMany(p, len(x), int(*s.MaxProperties)))
	}
	if s.MinProperties != nil && n < *s.MinProperties {
		v.add(meta.Invalid(p, n, fmt.Sprintf("%s in body should have at least %d properties", pathName(p), *s.MinProperties)))
	}
	if s.XEmbeddedResource && p != nil {
		v.validateEmbedded(x, p)
	}
	keys := meta.SortedKeys(x)
	for _, k := range keys {
		if ps, ok := s.Properties[k]; ok {
			v.validate(x[k], o.member(k), ps, p.Child(k))
			continue
		}
		ap := s.AdditionalProperties
		switch {
		case ap == nil:
		case ap.Schema != nil:
			v.validate(x[k], o.member(k), ap.Schema, p.Key(k))
		case !ap.Allows:
			if s.XEmbeddedResource && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			v.add(meta.Forbidden(p.Child(k), fmt.Sprintf("%s.%s in body is a forbidden property", pathName(p), k)))
		}
	}
}

// validateEmbedded checks apiVersion and kind of an embedded resource, as
// Kubernetes does.
func (v *validator) validateEmbedded(x map[string]any, p *meta.Path) {
	for _, k := range []string{"apiVersion", "kind"} {
		val, ok := x[k]
		if !ok {
			v.add(meta.Required(p.Child(k), "must not be empty"))
			continue
		}
		str, ok := val.(string)
		switch {
		case !ok:
			v.add(meta.Invalid(p.Child(k), val, "must be a string"))
		case str == "":
			v.add(meta.Invalid(p.Child(k), str, "must not be empty"))
		case k == "apiVersion":
			if _, ok := meta.ParseGroupVersion(str); !ok {
				v.add(meta.Invalid(p.Child(k), str, fmt.Sprintf("unexpected GroupVersion string: %s", str)))
			}
		}
	}
	if md, ok := x["metadata"]; ok && md != nil {
		if _, isMap := md.(map[string]any); !isMap {
			v.typeError(md, p.Child("metadata"), TypeObject)
		}
	}
}

func (v *validator) validateArray(x []any, o prev, s *Schema, p *meta.Path) {
	n := int64(len(x))
	if s.MaxItems != nil && n > *s.MaxItems {
		v.add(meta.TooMany(p, len(x), int(*s.MaxItems)))
	}
	if s.MinItems != nil && n < *s.MinItems {
		v.add(meta.Invalid(p, n, fmt.Sprintf("%s in body should have at least %d items", pathName(p), *s.MinItems)))
	}
	var corr ListCorrelation
	if o.ok {
		ol, _ := o.v.([]any)
		corr = CorrelateList(s, ol)
	}
	for i, e := range x {
		var eo prev
		eo.v, eo.ok = corr.Old(e)
		v.validate(e, eo, s.Items, p.Index(i))
	}
	switch s.XListType {
	case ListTypeSet:
		v.validateSet(x, p)
	case ListTypeMap:
		v.validateListMap(x, s, p)
	}
}

// validateSet reports the second occurrence of every duplicated element.
func (v *validator) validateSet(x []any, p *meta.Path) {
	if len(x) < 2 {
		return
	}
	seen := make(map[string]int, len(x))
	for i, e := range x {
		k := meta.CanonicalKey(e)
		seen[k]++
		if seen[k] == 2 {
			v.add(meta.Duplicate(p.Index(i), e))
		}
	}
}

// validateListMap checks that elements are objects and that their keys
// (the list map keys, defaulted from the item schema when absent) are
// unique, reporting the second occurrence of every duplicated key.
func (v *validator) validateListMap(x []any, s *Schema, p *meta.Path) {
	for i, e := range x {
		if _, ok := e.(map[string]any); e != nil && !ok {
			v.add(meta.Invalid(p.Index(i), e, "must be an object for an array of list-type map"))
			return
		}
	}
	if len(x) < 2 {
		return
	}
	seen := make(map[string]int, len(x))
	for i, e := range x {
		m, _ := e.(map[string]any)
		k := listMapKey(s, m)
		seen[k]++
		if seen[k] == 2 {
			v.add(meta.Duplicate(p.Index(i), e))
		}
	}
}

// unspecified stands for an absent list map key.
type unspecified struct{}
