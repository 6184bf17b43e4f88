// Package schema holds kapi's structural OpenAPI v3 schemas: the subset of
// OpenAPI that Kubernetes CustomResourceDefinitions use, with the
// x-kubernetes-* extensions. A schema is the source of truth for a resource
// type: Validate checks an object against it, Prune drops unknown fields,
// Default applies defaults, and the merge-rule lookups (ListType, MapType,
// ...) drive patch and server-side apply.
//
// A schema comes either from OpenAPI JSON (json.Unmarshal into a Schema) or
// from a Go type (FromGoType, For).
//
// Objects are generic decoded JSON values (see package meta): numbers may be
// json.Number (kapi's canonical form), any Go integer kind, float32 or
// float64. Schema values decoded from JSON keep numbers in default, enum and
// example as json.Number.
//
// Processing order for a request body is Prune, Default, Validate, as
// Kubernetes does for custom resources.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync/atomic"

	"github.com/kapi-dev/kapi/meta"
)

// OpenAPI types.
const (
	TypeObject  = "object"
	TypeArray   = "array"
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
)

// ValidationRule is one x-kubernetes-validations rule: a CEL expression
// over self (the value at the rule's level) and, in a transition rule,
// oldSelf (its previous value on an update), as in a CRD.
type ValidationRule struct {
	// Rule is the CEL expression; it must evaluate to true.
	Rule string `json:"rule"`
	// Message is shown when the rule fails (default: "failed rule: " and
	// the rule).
	Message string `json:"message,omitempty"`
	// MessageExpression, when set, is a CEL expression of type string whose
	// value is shown instead of Message.
	MessageExpression string `json:"messageExpression,omitempty"`
	// Reason is the cause type of the failure: FieldValueInvalid (the
	// default), FieldValueForbidden, FieldValueRequired or
	// FieldValueDuplicate.
	Reason string `json:"reason,omitempty"`
	// FieldPath, when set, is the path below this level the failure is
	// reported at (".spec.replicas", "['key']").
	FieldPath string `json:"fieldPath,omitempty"`
	// OptionalOldSelf makes a transition rule run on creates too, with
	// oldSelf an optional value that is absent.
	OptionalOldSelf *bool `json:"optionalOldSelf,omitempty"`
}

// Values of x-kubernetes-list-type, x-kubernetes-map-type and
// x-kubernetes-patch-strategy.
const (
	ListTypeAtomic = "atomic"
	ListTypeSet    = "set"
	ListTypeMap    = "map"

	MapTypeGranular = "granular"
	MapTypeAtomic   = "atomic"

	PatchStrategyMerge   = "merge"
	PatchStrategyReplace = "replace"
)

// DefinitionKey, on a subschema, names the OpenAPI definition (component)
// the subschema is published as, with a reference in its place, as
// kube-apiserver publishes the nested structs of its built-in types
// (io.k8s.api.core.v1.ObjectReference): kubectl explain shows the name's
// last part as the field's type. The marker definition= sets it. It is
// not enforced.
const DefinitionKey = "x-kapi-definition"

// Schema is a structural OpenAPI v3 schema. It marshals to and from OpenAPI
// JSON; keywords outside the fields below (allOf, anyOf, oneOf, not, ...) are
// kept and written back when the schema is marshalled, but are not enforced.
//
// A Schema is safe for concurrent use by Validate, Prune and Default once
// built; it caches its compiled pattern, so it must not be copied by value
// after first use: use Clone.
type Schema struct {
	Type        string `json:"type,omitempty"`
	Format      string `json:"format,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`

	// Properties are the known fields of an object.
	Properties map[string]*Schema `json:"properties,omitempty"`
	// AdditionalProperties is the schema of the values of a map (an object
	// whose keys are not fixed).
	AdditionalProperties *SchemaOrBool `json:"additionalProperties,omitempty"`
	// Items is the schema of every element of an array.
	Items    *Schema  `json:"items,omitempty"`
	Required []string `json:"required,omitempty"`

	Enum    []any `json:"enum,omitempty"`
	Default any   `json:"default,omitempty"`
	Example any   `json:"example,omitempty"`

	Maximum          *float64 `json:"maximum,omitempty"`
	ExclusiveMaximum bool     `json:"exclusiveMaximum,omitempty"`
	Minimum          *float64 `json:"minimum,omitempty"`
	ExclusiveMinimum bool     `json:"exclusiveMinimum,omitempty"`
	MultipleOf       *float64 `json:"multipleOf,omitempty"`

	MaxLength     *int64 `json:"maxLength,omitempty"`
	MinLength     *int64 `json:"minLength,omitempty"`
	Pattern       string `json:"pattern,omitempty"`
	MaxItems      *int64 `json:"maxItems,omitempty"`
	MinItems      *int64 `json:"minItems,omitempty"`
	MaxProperties *int64 `json:"maxProperties,omitempty"`
	MinProperties *int64 `json:"minProperties,omitempty"`

	// Nullable allows null as a value (null is otherwise dropped by Default
	// or rejected by Validate).
	Nullable bool `json:"nullable,omitempty"`

	// XPreserveUnknownFields keeps fields not described by Properties (at
	// this level and below, until a nested schema sets it again) from pruning.
	XPreserveUnknownFields bool `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	// XIntOrString allows an integer or a string (the schema has no type).
	XIntOrString bool `json:"x-kubernetes-int-or-string,omitempty"`
	// XEmbeddedResource marks an object that is a full Kubernetes object
	// with apiVersion, kind and metadata.
	XEmbeddedResource bool `json:"x-kubernetes-embedded-resource,omitempty"`
	// XListType is atomic, set or map; see ListType.
	XListType string `json:"x-kubernetes-list-type,omitempty"`
	// XListMapKeys are the fields that identify an element of a map list.
	XListMapKeys []string `json:"x-kubernetes-list-map-keys,omitempty"`
	// XMapType is granular or atomic; see MapType.
	XMapType string `json:"x-kubernetes-map-type,omitempty"`
	// XPatchStrategy is the strategic-merge-patch strategy ("merge",
	// "replace", or comma-separated combinations such as "merge,retainKeys").
	XPatchStrategy string `json:"x-kubernetes-patch-strategy,omitempty"`
	// XPatchMergeKey is the strategic-merge-patch key of list elements.
	XPatchMergeKey string `json:"x-kubernetes-patch-merge-key,omitempty"`
	// XValidations are CEL validation rules on the value at this level
	// (package schema/rules compiles and enforces them).
	XValidations []ValidationRule `json:"x-kubernetes-validations,omitempty"`

	// extra holds keywords this type does not model, for round-tripping.
	extra map[string]json.RawMessage
	// pattern caches the compiled Pattern.
	pattern atomic.Pointer[compiledPattern]
}

// SchemaOrBool is the value of additionalProperties: a schema, or a boolean
// (true allows values of any shape, false allows none).
type SchemaOrBool struct {
	Allows bool
	Schema *Schema
}

// MarshalJSON encodes the schema when set, else the boolean.
func (sb SchemaOrBool) MarshalJSON() ([]byte, error) {
	if sb.Schema != nil {
		return json.Marshal(sb.Schema)
	}
	if sb.Allows {
		return []byte("true"), nil
	}
	return []byte("false"), nil
}

// UnmarshalJSON decodes a boolean or a schema.
func (sb *SchemaOrBool) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true":
		*sb = SchemaOrBool{Allows: true}
		return nil
	case "false":
		*sb = SchemaOrBool{}
		return nil
	}
	var s Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*sb = SchemaOrBool{Allows: true, Schema: &s}
	return nil
}

type compiledPattern struct {
	src string
	re  *regexp.Regexp
	err error
}

// regexp returns the compiled Pattern, compiling it at most once per
// distinct pattern value.
func (s *Schema) regexp() (*regexp.Regexp, error) {
	if c := s.pattern.Load(); c != nil && c.src == s.Pattern {
		return c.re, c.err
	}
	re, err := regexp.Compile(s.Pattern)
	if err != nil {
		err = fmt.Errorf("invalid pattern %q: %w", s.Pattern, err)
	}
	s.pattern.Store(&compiledPattern{src: s.Pattern, re: re, err: err})
	return re, err
}

// schemaFields is Schema without its methods, for the default JSON codec.
type schemaFields Schema

// knownKeys are the JSON keys Schema models.
var knownKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true,
	"properties": true, "additionalProperties": true, "items": true, "required": true,
	"enum": true, "default": true, "example": true,
	"maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true, "multipleOf": true,
	"maxLength": true, "minLength": true, "pattern": true, "maxItems": true, "minItems": true,
	"maxProperties": true, "minProperties": true, "nullable": true,
	"x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-int-or-string": true,
	"x-kubernetes-embedded-resource": true, "x-kubernetes-list-type": true,
	"x-kubernetes-list-map-keys": true, "x-kubernetes-map-type": true,
	"x-kubernetes-patch-strategy": true, "x-kubernetes-patch-merge-key": true,
	"x-kubernetes-validations": true,
}

// UnmarshalJSON decodes an OpenAPI v3 schema. Numbers in default, enum and
// example are decoded as json.Number.
func (s *Schema) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var f schemaFields
	if err := d.Decode((*schemaFields)(&f)); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	var extra map[string]json.RawMessage
	for k, v := range all {
		if !knownKeys[k] {
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[k] = v
		}
	}
	s.setFields(&f)
	s.extra = extra
	return nil
}

// setFields copies the exported fields of f into s and resets the caches.
func (s *Schema) setFields(f *schemaFields) {
	s.Type, s.Format, s.Title, s.Description = f.Type, f.Format, f.Title, f.Description
	s.Properties, s.AdditionalProperties, s.Items, s.Required = f.Properties, f.AdditionalProperties, f.Items, f.Required
	s.Enum, s.Default, s.Example = f.Enum, f.Default, f.Example
	s.Maximum, s.ExclusiveMaximum, s.Minimum, s.ExclusiveMinimum, s.MultipleOf = f.Maximum, f.ExclusiveMaximum, f.Minimum, f.ExclusiveMinimum, f.MultipleOf
	s.MaxLength, s.MinLength, s.Pattern = f.MaxLength, f.MinLength, f.Pattern
	s.MaxItems, s.MinItems, s.MaxProperties, s.MinProperties = f.MaxItems, f.MinItems, f.MaxProperties, f.MinProperties
	s.Nullable = f.Nullable
	s.XPreserveUnknownFields, s.XIntOrString, s.XEmbeddedResource = f.XPreserveUnknownFields, f.XIntOrString, f.XEmbeddedResource
	s.XListType, s.XListMapKeys, s.XMapType = f.XListType, f.XListMapKeys, f.XMapType
	s.XPatchStrategy, s.XPatchMergeKey = f.XPatchStrategy, f.XPatchMergeKey
	s.XValidations = f.XValidations
	s.extra = f.extra
	s.pattern.Store(nil)
}

// MarshalJSON encodes the schema as OpenAPI v3 JSON, including keywords it
// does not model that were decoded with it.
func (s *Schema) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal((*schemaFields)(s))
	if err != nil || len(s.extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range s.extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Clone returns a deep copy of s (nil for nil). Default, enum and example
// values are deep-copied as generic JSON.
func (s *Schema) Clone() *Schema {
	if s == nil {
		return nil
	}
	c := &Schema{}
	c.setFields((*schemaFields)(s))
	if s.Properties != nil {
		c.Properties = make(map[string]*Schema, len(s.Properties))
		for k, p := range s.Properties {
			c.Properties[k] = p.Clone()
		}
	}
	if s.AdditionalProperties != nil {
		c.AdditionalProperties = &SchemaOrBool{Allows: s.AdditionalProperties.Allows, Schema: s.AdditionalProperties.Schema.Clone()}
	}
	c.Items = s.Items.Clone()
	c.Required = slices.Clone(s.Required)
	if s.Enum != nil {
		c.Enum = make([]any, len(s.Enum))
		for i, e := range s.Enum {
			c.Enum[i] = meta.DeepCopy(e)
		}
	}
	c.Default = meta.DeepCopy(s.Default)
	c.Example = meta.DeepCopy(s.Example)
	c.Maximum, c.Minimum, c.MultipleOf = clonePtr(s.Maximum), clonePtr(s.Minimum), clonePtr(s.MultipleOf)
	c.MaxLength, c.MinLength = clonePtr(s.MaxLength), clonePtr(s.MinLength)
	c.MaxItems, c.MinItems = clonePtr(s.MaxItems), clonePtr(s.MinItems)
	c.MaxProperties, c.MinProperties = clonePtr(s.MaxProperties), clonePtr(s.MinProperties)
	c.XListMapKeys = slices.Clone(s.XListMapKeys)
	c.XValidations = slices.Clone(s.XValidations)
	for i, r := range c.XValidations {
		c.XValidations[i].OptionalOldSelf = clonePtr(r.OptionalOldSelf)
	}
	c.extra = maps.Clone(s.extra)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// additional returns the schema of additionalProperties, or nil.
func (s *Schema) additional() *Schema {
	if s == nil || s.AdditionalProperties == nil {
		return nil
	}
	return s.AdditionalProperties.Schema
}

// Lookup returns the schema at a path below s, or nil if the path leaves
// the schema. Each element names a property of an object (or, for a map, a
// key under additionalProperties); for an array, an element (its index, or
// any placeholder such as "*") steps into the items schema.
func (s *Schema) Lookup(path ...string) *Schema {
	cur := s
	for _, p := range path {
		if cur == nil {
			return nil
		}
		switch {
		case cur.Type == TypeArray:
			cur = cur.Items
		case cur.Properties[p] != nil:
			cur = cur.Properties[p]
		default:
			cur = cur.additional()
		}
	}
	return cur
}

// ListType returns the list type of an array schema: the
// x-kubernetes-list-type, or "atomic" when unset (the Kubernetes default for
// custom resources). It returns "" for schemas that are not arrays.
func (s *Schema) ListType() string {
	if s == nil {
		return ""
	}
	if s.XListType != "" {
		return s.XListType
	}
	if s.Type == TypeArray {
		return ListTypeAtomic
	}
	return ""
}

// ListMapKeys returns the keys identifying elements of a map list (nil
// unless ListType is "map").
func (s *Schema) ListMapKeys() []string {
	if s == nil || s.ListType() != ListTypeMap {
		return nil
	}
	return s.XListMapKeys
}

// MapType returns the map type of an object schema: the
// x-kubernetes-map-type, or "granular" when unset. It returns "" for schemas
// that are not objects.
func (s *Schema) MapType() string {
	if s == nil {
		return ""
	}
	if s.XMapType != "" {
		return s.XMapType
	}
	if s.Type == TypeObject {
		return MapTypeGranular
	}
	return ""
}

// PatchStrategy returns the x-kubernetes-patch-strategy ("" when unset).
func (s *Schema) PatchStrategy() string {
	if s == nil {
		return ""
	}
	return s.XPatchStrategy
}

// PatchMergeKey returns the x-kubernetes-patch-merge-key ("" when unset).
func (s *Schema) PatchMergeKey() string {
	if s == nil {
		return ""
	}
	return s.XPatchMergeKey
}
