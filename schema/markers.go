package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// markerNames are the markers that take a value (name=value) and the flags.
var (
	valueMarkers = map[string]bool{
		"enum": true, "default": true, "format": true, "type": true,
		"min": true, "max": true, "multipleOf": true,
		"minLength": true, "maxLength": true, "pattern": true,
		"minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
		"listType": true, "listMapKeys": true, "mapType": true,
		"patchStrategy": true, "patchMergeKey": true, "definition": true,
		"rule": true, "message": true, "messageExpression": true, "reason": true, "fieldPath": true,
	}
	flagMarkers = map[string]bool{
		"required": true, "optional": true, "nullable": true,
		"exclusiveMin": true, "exclusiveMax": true,
		"preserveUnknownFields": true, "embeddedResource": true, "intOrString": true,
		"optionalOldSelf": true,
	}
)

type marker struct {
	items int // number of "items." prefixes
	name  string
	value string
	flag  bool
}

// isMarkerStart reports whether s begins a marker (so that a comma before
// it separates markers rather than belonging to a value).
func isMarkerStart(s string) bool {
	for strings.HasPrefix(s, "items.") {
		s = s[len("items."):]
	}
	name, _, hasValue := strings.Cut(s, "=")
	if hasValue {
		return valueMarkers[name]
	}
	return flagMarkers[name]
}

// parseMarkers splits a kapi tag into markers.
func parseMarkers(tag string) ([]marker, error) {
	if strings.TrimSpace(tag) == "" {
		return nil, nil
	}
	var parts []string
	for _, p := range strings.Split(tag, ",") {
		if len(parts) > 0 && !isMarkerStart(strings.TrimSpace(p)) {
			parts[len(parts)-1] += "," + p
			continue
		}
		parts = append(parts, p)
	}
	var ms []marker
	for _, p := range parts {
		p = strings.TrimSpace(p)
		var m marker
		for strings.HasPrefix(p, "items.") {
			m.items++
			p = p[len("items."):]
		}
		name, value, hasValue := strings.Cut(p, "=")
		m.name, m.value = name, value
		switch {
		case hasValue && valueMarkers[name]:
		case !hasValue && flagMarkers[name]:
			m.flag = true
		case valueMarkers[name]:
			return nil, fmt.Errorf("kapi tag: marker %q needs a value (%s=...)", name, name)
		case flagMarkers[name]:
			return nil, fmt.Errorf("kapi tag: marker %q takes no value", name)
		default:
			return nil, fmt.Errorf("kapi tag: unknown marker %q", p)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// applyMarkers applies the markers of a kapi tag to a field's schema and
// reports whether the field is required.
func applyMarkers(s *Schema, tag string) (required bool, err error) {
	ms, err := parseMarkers(tag)
	if err != nil {
		return false, err
	}
	// Markers that change the type come first, values that depend on it
	// (enum, default) last.
	rank := func(m marker) int {
		switch m.name {
		case "type", "intOrString", "preserveUnknownFields", "format":
			return 0
		case "enum":
			return 2
		case "default":
			return 3
		}
		return 1
	}
	for r := 0; r <= 3; r++ {
		for _, m := range ms {
			if rank(m) != r {
				continue
			}
			target := s
			for i := 0; i < m.items; i++ {
				if target.Type != TypeArray || target.Items == nil {
					return false, fmt.Errorf("kapi tag: marker items.%s on a field that is not an array", m.name)
				}
				target = target.Items
			}
			if m.name == "required" && m.items == 0 {
				required = true
				continue
			}
			if err := applyMarker(target, m); err != nil {
				return false, fmt.Errorf("kapi tag: %s: %w", m.name, err)
			}
		}
	}
	return required, nil
}

func parseFloat(v string) (*float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not a number", v)
	}
	return &f, nil
}

func parseCount(v string) (*int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return &n, nil
}

// applyMarker applies one marker to s.
func applyMarker(s *Schema, m marker) error {
	var err error
	switch m.name {
	case "required":
		return fmt.Errorf("cannot apply to array items")
	case "optional":
	case "nullable":
		s.Nullable = true
	case "type":
		return applyType(s, m.value)
	case "format":
		s.Format = m.value
	case "intOrString":
		*s = Schema{XIntOrString: true, Description: s.Description}
	case "preserveUnknownFields":
		s.XPreserveUnknownFields = true
	case "embeddedResource":
		if s.Type != TypeObject {
			return fmt.Errorf("only objects can be embedded resources")
		}
		s.XEmbeddedResource = true
	case "exclusiveMin":
		s.ExclusiveMinimum = true
	case "exclusiveMax":
		s.ExclusiveMaximum = true
	case "min":
		s.Minimum, err = parseFloat(m.value)
	case "max":
		s.Maximum, err = parseFloat(m.value)
	case "multipleOf":
		s.MultipleOf, err = parseFloat(m.value)
		if err == nil && *s.MultipleOf <= 0 {
			err = fmt.Errorf("%q must be positive", m.value)
		}
	case "minLength":
		s.MinLength, err = parseCount(m.value)
	case "maxLength":
		s.MaxLength, err = parseCount(m.value)
	case "minItems":
		s.MinItems, err = parseCount(m.value)
	case "maxItems":
		s.MaxItems, err = parseCount(m.value)
	case "minProperties":
		s.MinProperties, err = parseCount(m.value)
	case "maxProperties":
		s.MaxProperties, err = parseCount(m.value)
	case "pattern":
		s.Pattern = m.value
		s.pattern.Store(nil)
		_, err = s.regexp()
	case "listType":
		if s.Type != TypeArray {
			return fmt.Errorf("only arrays have a list type")
		}
		switch m.value {
		case ListTypeAtomic, ListTypeSet, ListTypeMap:
		default:
			return fmt.Errorf("unknown list type %q (want atomic, set or map)", m.value)
		}
		s.XListType = m.value
	case "listMapKeys":
		s.XListMapKeys = strings.Split(m.value, "|")
	case "mapType":
		switch m.value {
		case MapTypeGranular, MapTypeAtomic:
		default:
			return fmt.Errorf("unknown map type %q (want granular or atomic)", m.value)
		}
		s.XMapType = m.value
	case "rule":
		s.XValidations = append(s.XValidations, ValidationRule{Rule: m.value})
	case "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf":
		return applyRuleMarker(s, m)
	case "patchStrategy":
		s.XPatchStrategy = m.value
	case "patchMergeKey":
		s.XPatchMergeKey = m.value
	case "definition":
		b, _ := json.Marshal(m.value)
		if s.extra == nil {
			s.extra = map[string]json.RawMessage{}
		}
		s.extra[DefinitionKey] = b
	case "enum":
		return applyEnum(s, m.value)
	case "default":
		return applyDefault(s, m.value)
	}
	return err
}

// applyType sets s's type (marker type=), dropping the format and what
// only another type has.
func applyType(s *Schema, typ string) error {
	switch typ {
	case TypeObject, TypeArray, TypeString, TypeInteger, TypeNumber, TypeBoolean:
	default:
		return fmt.Errorf("unknown type %q", typ)
	}
	s.Type, s.Format = typ, ""
	if typ != TypeObject {
		s.Properties, s.AdditionalProperties, s.Required = nil, nil, nil
	}
	if typ != TypeArray {
		s.Items = nil
	}
	return nil
}

// applyEnum sets s's enum (marker enum=a|b), each value valid for s.
func applyEnum(s *Schema, value string) error {
	for _, v := range splitAlternatives(value) {
		x, err := parseValue(s, v)
		if err != nil {
			return err
		}
		s.Enum = append(s.Enum, x)
	}
	for _, e := range s.Enum {
		if errs := Validate(e, withoutEnum(s)); len(errs) > 0 {
			return fmt.Errorf("value %s is not valid: %v", formatJSON(e), errs.ToAggregate())
		}
	}
	return nil
}

// applyDefault sets s's default (marker default=), which must be valid for s.
func applyDefault(s *Schema, value string) error {
	x, err := parseValue(s, value)
	if err != nil {
		return err
	}
	if errs := Validate(x, s); len(errs) > 0 {
		return fmt.Errorf("default %s is not valid: %v", formatJSON(x), errs.ToAggregate())
	}
	s.Default = x
	return nil
}

// splitAlternatives splits an enum marker value on "|" outside JSON string
// literals, so that "a|b"|c is two values.
func splitAlternatives(v string) []string {
	var out []string
	start, inQuote, escaped := 0, false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case escaped:
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"' && (inQuote || i == start):
			inQuote = !inQuote
		case c == '|' && !inQuote:
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

func withoutEnum(s *Schema) *Schema {
	c := s.Clone()
	c.Enum = nil
	return c
}

func formatJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// parseValue reads an enum or default value for a schema: text for
// strings (or a JSON string literal), JSON otherwise (with numbers as
// json.Number); for int-or-string and untyped schemas, JSON if it parses,
// else text.
func parseValue(s *Schema, v string) (any, error) {
	if s.Type == TypeString && !strings.HasPrefix(v, `"`) {
		return v, nil
	}
	d := json.NewDecoder(bytes.NewReader([]byte(v)))
	d.UseNumber()
	var x any
	err := d.Decode(&x)
	if err == nil && d.More() {
		err = fmt.Errorf("trailing data")
	}
	if err != nil {
		if s.Type == "" {
			return v, nil
		}
		return nil, fmt.Errorf("cannot read %q as a %s value: %v", v, s.Type, err)
	}
	return x, nil
}

// applyRuleMarker sets a detail of the rule the last rule marker added.
func applyRuleMarker(s *Schema, m marker) error {
	if len(s.XValidations) == 0 {
		return fmt.Errorf("%s must follow a rule marker", m.name)
	}
	r := &s.XValidations[len(s.XValidations)-1]
	switch m.name {
	case "message":
		r.Message = m.value
	case "messageExpression":
		r.MessageExpression = m.value
	case "reason":
		r.Reason = m.value
	case "fieldPath":
		r.FieldPath = m.value
	case "optionalOldSelf":
		t := true
		r.OptionalOldSelf = &t
	}
	return nil
}
