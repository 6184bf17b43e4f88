package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/meta"
)

// For returns the schema of T; see FromGoType.
func For[T any]() (*Schema, error) {
	return FromGoType(reflect.TypeFor[T]())
}

// FromGoType derives a structural schema from a Go type by reflection,
// following encoding/json's rules so that the schema describes what the
// type encodes to:
//
//   - field names come from json tags (or the Go name); "-" skips a field;
//     anonymous struct fields without a tag name (e.g. `json:",inline"`) are
//     inlined; among fields with the same name the shallowest (then the
//     tagged) one wins, and ties drop the name, as in encoding/json;
//   - bool → boolean; int8..int32, uint8, uint16 → integer/int32; int, int64,
//     uint, uint32, uint64 → integer/int64; float32 → number/float; float64 →
//     number/double; string → string; []byte → string/byte; slices and
//     arrays → array; maps with string (or integer, or text-marshalling) keys
//     → object with additionalProperties; structs → object with properties;
//     pointers are unwrapped; a ",string" option makes a number or bool a
//     string;
//   - time.Time and meta.Time → string/date-time; time.Duration → integer;
//     meta.ObjectMeta and meta.ListMeta → a plain object (the server
//     validates metadata itself, as Kubernetes does for custom resources);
//     interfaces, json.RawMessage and other types with their own
//     MarshalJSON → x-kubernetes-preserve-unknown-fields (any value);
//     other encoding.TextMarshaler types → string;
//   - the `doc:"..."` tag is the description, and the `kapi:"..."` tag holds
//     comma-separated markers (see below).
//
// A field is required only when marked so (not because it lacks omitempty,
// following Kubernetes' convention). Nothing is nullable unless marked: a
// nil slice, map or pointer without omitempty encodes as null, which Default
// removes (as Kubernetes does), so run Default before Validate. Markers, in the kapi tag:
//
//	required, optional, nullable,
//	enum=a|b|c, default=<value>, format=<f>, type=<t>,
//	min=<n>, max=<n>, exclusiveMin, exclusiveMax, multipleOf=<n>,
//	minLength=<n>, maxLength=<n>, pattern=<re>,
//	minItems=<n>, maxItems=<n>, minProperties=<n>, maxProperties=<n>,
//	listType=atomic|set|map, listMapKeys=k1|k2, mapType=granular|atomic,
//	patchStrategy=<s>, patchMergeKey=<k>, definition=<OpenAPI name>,
//	preserveUnknownFields, embeddedResource, intOrString,
//	rule=<CEL>, message=<text>, messageExpression=<CEL>, reason=<r>,
//	fieldPath=<path>, optionalOldSelf
//
// rule adds an x-kubernetes-validations rule to the field (self is the
// field's value); message, messageExpression, reason, fieldPath and
// optionalOldSelf apply to the rule before them. A type's own rules come
// from its ValidationRules method (Ruler).
//
// A marker prefixed with "items." applies to the items of an array field
// (e.g. items.maxLength=63). Values of enum and default are read according to
// the field's type (JSON for numbers, booleans, objects and arrays; plain or
// JSON-quoted text for strings); a value may contain commas as long as the
// text after a comma does not look like a marker. Defaults must validate
// against the field's schema. Types that refer to themselves are an error
// (structural schemas cannot be recursive), as are channels, functions,
// complex numbers and maps with other key types. The result passes Check.
func FromGoType(t reflect.Type) (*Schema, error) {
	if t == nil {
		return nil, fmt.Errorf("schema: nil type")
	}
	b := &goBuilder{}
	s, err := b.build(t, t.String())
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if err := Check(s); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return s, nil
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	metaTimeType    = reflect.TypeFor[meta.Time]()
	durationType    = reflect.TypeFor[time.Duration]()
	objectMetaType  = reflect.TypeFor[meta.ObjectMeta]()
	listMetaType    = reflect.TypeFor[meta.ListMeta]()
	typeMetaType    = reflect.TypeFor[meta.TypeMeta]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	jsonNumberType  = reflect.TypeFor[json.Number]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Descriptions Kubernetes gives the standard top-level fields.
const (
	apiVersionDescription = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
	kindDescription       = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
	metadataDescription   = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

type goBuilder struct {
	// stack holds the struct types being built, to detect cycles.
	stack []reflect.Type
}

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// Ruler is implemented by Go types that carry validation rules at their
// own level (x-kubernetes-validations, with self the type's value), as
// kubebuilder's type-level XValidation markers do. FromGoType calls
// ValidationRules on the zero value.
type Ruler interface {
	ValidationRules() []ValidationRule
}

var rulerType = reflect.TypeFor[Ruler]()

// build returns the schema of t with the rules t declares (Ruler); where
// names the type or field for errors.
func (b *goBuilder) build(t reflect.Type, where string) (*Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := b.buildType(t, where)
	if err != nil || !implements(t, rulerType) {
		return s, err
	}
	r, ok := reflect.New(t).Interface().(Ruler)
	if !ok {
		r = reflect.New(t).Elem().Interface().(Ruler)
	}
	s.XValidations = append(s.XValidations, r.ValidationRules()...)
	return s, nil
}

// buildType returns the schema of t, a type that is not a pointer.
func (b *goBuilder) buildType(t reflect.Type, where string) (*Schema, error) {
	switch t {
	case timeType, metaTimeType:
		return &Schema{Type: TypeString, Format: "date-time"}, nil
	case durationType:
		return &Schema{Type: TypeInteger, Format: "int64"}, nil
	case objectMetaType, listMetaType:
		if len(b.stack) > 0 {
			return &Schema{Type: TypeObject}, nil
		}
	case rawMessageType:
		return &Schema{XPreserveUnknownFields: true}, nil
	case jsonNumberType:
		return &Schema{Type: TypeNumber}, nil
	}
	if implements(t, jsonMarshaler) {
		return &Schema{XPreserveUnknownFields: true}, nil
	}
	if implements(t, textMarshaler) {
		return &Schema{Type: TypeString}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &Schema{Type: TypeBoolean}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return &Schema{Type: TypeInteger, Format: "int32"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &Schema{Type: TypeInteger, Format: "int64"}, nil
	case reflect.Float32:
		return &Schema{Type: TypeNumber, Format: "float"}, nil
	case reflect.Float64:
		return &Schema{Type: TypeNumber, Format: "double"}, nil
	case reflect.String:
		return &Schema{Type: TypeString}, nil
	case reflect.Interface:
		return &Schema{XPreserveUnknownFields: true}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !implements(t.Elem(), jsonMarshaler) && !implements(t.Elem(), textMarshaler) {
			return &Schema{Type: TypeString, Format: "byte"}, nil
		}
		items, err := b.build(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeArray, Items: items}, nil
	case reflect.Map:
		switch k := t.Key(); {
		case k.Kind() == reflect.String, implements(k, textUnmarshaler),
			k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
		default:
			return nil, fmt.Errorf("%s: unsupported map key type %s", where, k)
		}
		vs, err := b.build(t.Elem(), where+"[key]")
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeObject, AdditionalProperties: &SchemaOrBool{Allows: true, Schema: vs}}, nil
	case reflect.Struct:
		return b.buildStruct(t, where)
	}
	return nil, fmt.Errorf("%s: unsupported type %s", where, t)
}

// goField is one JSON field of a struct, possibly from an inlined struct.
type goField struct {
	name   string
	tagged bool
	depth  int
	field  reflect.StructField
	quoted bool // the ",string" option
}

// collectFields lists the JSON fields of struct t the way encoding/json
// does, including those of inlined anonymous structs.
func collectFields(t reflect.Type, depth int, inlining map[reflect.Type]bool, out *[]goField) {
	inlining[t] = true
	defer delete(inlining, t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous {
			if !f.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
		} else if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validJSONName(name) {
			name = ""
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			if !inlining[ft] {
				collectFields(ft, depth+1, inlining, out)
			}
			continue
		}
		quoted := false
		for _, o := range strings.Split(opts, ",") {
			if o == "string" {
				quoted = true
			}
		}
		gf := goField{name: name, tagged: name != "", depth: depth, field: f, quoted: quoted}
		if gf.name == "" {
			gf.name = f.Name
		}
		*out = append(*out, gf)
	}
}

// validJSONName mirrors encoding/json's check of tag names.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c > 127):
			return false
		}
	}
	return true
}

// dominantFields applies encoding/json's rules for duplicate names.
func dominantFields(fields []goField) []goField {
	byName := map[string][]goField{}
	var order []string
	for _, f := range fields {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []goField
	for _, name := range order {
		fs := byName[name]
		minDepth := fs[0].depth
		for _, f := range fs {
			minDepth = min(minDepth, f.depth)
		}
		var top []goField
		for _, f := range fs {
			if f.depth == minDepth {
				top = append(top, f)
			}
		}
		if len(top) > 1 {
			var tagged []goField
			for _, f := range top {
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
			top = tagged
		}
		if len(top) == 1 {
			out = append(out, top[0])
		}
	}
	return out
}

func (b *goBuilder) buildStruct(t reflect.Type, where string) (*Schema, error) {
	for _, s := range b.stack {
		if s == t {
			var chain []string
			for _, c := range b.stack {
				chain = append(chain, c.String())
			}
			return nil, fmt.Errorf("%s: recursive type %s (%s -> %s) cannot have a structural schema",
				where, t, strings.Join(chain, " -> "), t)
		}
	}
	b.stack = append(b.stack, t)
	defer func() { b.stack = b.stack[:len(b.stack)-1] }()

	var raw []goField
	collectFields(t, 0, map[reflect.Type]bool{}, &raw)
	fields := dominantFields(raw)

	s := &Schema{Type: TypeObject}
	embedsTypeMeta := false
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Anonymous && f.Type == typeMetaType {
			embedsTypeMeta = true
		}
	}
	for _, f := range fields {
		fwhere := where + "." + f.field.Name
		fs, err := b.build(f.field.Type, fwhere)
		if err != nil {
			return nil, err
		}
		if f.quoted {
			switch fs.Type {
			case TypeInteger, TypeNumber, TypeBoolean:
				fs = &Schema{Type: TypeString}
			}
		}
		if d := f.field.Tag.Get("doc"); d != "" {
			fs.Description = d
		}
		if embedsTypeMeta && fs.Description == "" {
			switch {
			case f.name == "apiVersion" && f.field.Type.Kind() == reflect.String:
				fs.Description = apiVersionDescription
			case f.name == "kind" && f.field.Type.Kind() == reflect.String:
				fs.Description = kindDescription
			case f.name == "metadata" && f.field.Type == objectMetaType:
				fs.Description = metadataDescription
			}
		}
		required, err := applyMarkers(fs, f.field.Tag.Get("kapi"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fwhere, err)
		}
		if required {
			s.Required = append(s.Required, f.name)
		}
		if s.Properties == nil {
			s.Properties = map[string]*Schema{}
		}
		s.Properties[f.name] = fs
	}
	return s, nil
}
