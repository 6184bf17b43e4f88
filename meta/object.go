package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// maxExactFloat is 2^53, the largest magnitude below which every integer is
// exactly representable as a float64.
const maxExactFloat = 1 << 53

// AsInt64 returns v as an int64 if it is an integral number that fits:
// a json.Number holding an integer (or an integral float such as "1.0" or
// "1e3" within ±2^53), any Go integer kind, or an integral float within ±2^53.
func AsInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, true
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, false
		}
		return floatToInt64(f)
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint8:
		return int64(n), true
	case float64:
		return floatToInt64(n)
	case float32:
		return floatToInt64(float64(n))
	}
	return 0, false
}

func floatToInt64(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < -maxExactFloat || f > maxExactFloat {
		return 0, false
	}
	return int64(f), true
}

// AsFloat64 returns v as a float64 if it is a number of any representation
// (json.Number, Go integer or float kinds). Large integers may lose precision.
func AsFloat64(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	if reflect.TypeOf(v) == nil {
		return 0, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	}
	return 0, false
}

// IsNumber reports whether v is a number in any accepted representation.
func IsNumber(v any) bool {
	_, ok := AsFloat64(v)
	return ok
}

// DeepCopy returns a deep copy of a generic JSON value. Maps and slices
// (map[string]any, []any, and also map[string]string and []string) are
// copied recursively; scalars are immutable and returned as they are, as are
// values of any other type.
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return DeepCopyMap(t)
	case []any:
		if t == nil {
			return t
		}
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = DeepCopy(e)
		}
		return c
	case map[string]string:
		if t == nil {
			return t
		}
		c := make(map[string]string, len(t))
		for k, e := range t {
			c[k] = e
		}
		return c
	case []string:
		if t == nil {
			return t
		}
		return append([]string(nil), t...)
	default:
		return v
	}
}

// DeepCopyMap returns a deep copy of a generic JSON object (nil for nil).
func DeepCopyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, e := range m {
		c[k] = DeepCopy(e)
	}
	return c
}

// DeepEqual reports whether two generic JSON values are equal, comparing
// numbers by value whatever their representation (json.Number("1"),
// int64(1) and float64(1) are equal). Values of other types are compared
// with reflect.DeepEqual.
func DeepEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !DeepEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !DeepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	if IsNumber(a) {
		if !IsNumber(b) {
			return false
		}
		ai, aok := AsInt64(a)
		bi, bok := AsInt64(b)
		if aok && bok {
			return ai == bi
		}
		if aok != bok {
			// One is an exact int64, the other is not integral or beyond
			// int64: equal only if both are the same float.
			af, _ := AsFloat64(a)
			bf, _ := AsFloat64(b)
			return af == bf && math.Abs(af) > maxExactFloat
		}
		af, _ := AsFloat64(a)
		bf, _ := AsFloat64(b)
		return af == bf
	}
	return reflect.DeepEqual(a, b)
}

// ToMap converts a Go value (typically a struct with json tags) to the
// generic form by encoding it as JSON and decoding it with UseNumber.
func ToMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("meta: encoding %T: %w", v, err)
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("meta: decoding %T as an object: %w", v, err)
	}
	return m, nil
}

// FromMap converts a generic object to a Go value (a pointer, typically to a
// struct with json tags) by encoding it as JSON and decoding it into out.
func FromMap(m map[string]any, out any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("meta: encoding object: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("meta: decoding object into %T: %w", out, err)
	}
	return nil
}

// NestedField returns the value at the path of fields in obj, without
// copying it. found is false when a field on the path is absent; err is set
// when an intermediate value is not an object.
func NestedField(obj map[string]any, fields ...string) (value any, found bool, err error) {
	var v any = obj
	for i, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("%s accessor error: %v is of the type %s, expected map[string]any",
				jsonPath(fields[:i+1]), truncValue(v), typeName(v))
		}
		v, found = m[f]
		if !found {
			return nil, false, nil
		}
	}
	return v, true, nil
}

func jsonPath(fields []string) string { return "." + strings.Join(fields, ".") }

func typeName(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func truncValue(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return s
}

func nestedTyped[T any](obj map[string]any, want string, fields []string) (T, bool, error) {
	var zero T
	v, found, err := NestedField(obj, fields...)
	if !found || err != nil {
		return zero, found, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, false, fmt.Errorf("%s accessor error: %v is of the type %s, expected %s",
			jsonPath(fields), truncValue(v), typeName(v), want)
	}
	return t, true, nil
}

// NestedString returns the string at the path of fields. found is false when
// the value is absent; err is set when it (or an intermediate) has the wrong
// type.
func NestedString(obj map[string]any, fields ...string) (string, bool, error) {
	return nestedTyped[string](obj, "string", fields)
}

// NestedBool returns the boolean at the path of fields.
func NestedBool(obj map[string]any, fields ...string) (bool, bool, error) {
	return nestedTyped[bool](obj, "bool", fields)
}

// NestedInt64 returns the integer at the path of fields; any number
// representation holding an integral value is accepted (see AsInt64).
func NestedInt64(obj map[string]any, fields ...string) (int64, bool, error) {
	v, found, err := NestedField(obj, fields...)
	if !found || err != nil {
		return 0, found, err
	}
	i, ok := AsInt64(v)
	if !ok {
		return 0, false, fmt.Errorf("%s accessor error: %v is of the type %s, expected int64",
			jsonPath(fields), truncValue(v), typeName(v))
	}
	return i, true, nil
}

// NestedFloat64 returns the number at the path of fields as a float64.
func NestedFloat64(obj map[string]any, fields ...string) (float64, bool, error) {
	v, found, err := NestedField(obj, fields...)
	if !found || err != nil {
		return 0, found, err
	}
	f, ok := AsFloat64(v)
	if !ok {
		return 0, false, fmt.Errorf("%s accessor error: %v is of the type %s, expected float64",
			jsonPath(fields), truncValue(v), typeName(v))
	}
	return f, true, nil
}

// NestedMap returns the object at the path of fields. The map is the one
// stored in obj, not a copy: DeepCopyMap it before changing it if obj is
// shared.
func NestedMap(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	return nestedTyped[map[string]any](obj, "map[string]any", fields)
}

// NestedSlice returns the array at the path of fields. The slice is the one
// stored in obj, not a copy.
func NestedSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	return nestedTyped[[]any](obj, "[]any", fields)
}

// NestedStringSlice returns a copy of the array of strings at the path of
// fields; err is set if an element is not a string.
func NestedStringSlice(obj map[string]any, fields ...string) ([]string, bool, error) {
	s, found, err := NestedSlice(obj, fields...)
	if !found || err != nil {
		return nil, found, err
	}
	out := make([]string, 0, len(s))
	for i, e := range s {
		str, ok := e.(string)
		if !ok {
			return nil, false, fmt.Errorf("%s[%d] accessor error: %v is of the type %s, expected string",
				jsonPath(fields), i, truncValue(e), typeName(e))
		}
		out = append(out, str)
	}
	return out, true, nil
}

// NestedStringMap returns a copy of the object of strings at the path of
// fields; err is set if a value is not a string.
func NestedStringMap(obj map[string]any, fields ...string) (map[string]string, bool, error) {
	m, found, err := NestedMap(obj, fields...)
	if !found || err != nil {
		return nil, found, err
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		str, ok := e.(string)
		if !ok {
			return nil, false, fmt.Errorf("%s[%s] accessor error: %v is of the type %s, expected string",
				jsonPath(fields), k, truncValue(e), typeName(e))
		}
		out[k] = str
	}
	return out, true, nil
}

// SetNested stores value at the path of fields, creating intermediate
// objects as needed. It fails, changing nothing, if an intermediate value
// exists and is not an object. The value is stored as given (not copied).
func SetNested(obj map[string]any, value any, fields ...string) error {
	if len(fields) == 0 {
		return fmt.Errorf("meta: SetNested needs at least one field")
	}
	if obj == nil {
		return fmt.Errorf("meta: SetNested %s on a nil object", jsonPath(fields))
	}
	m := obj
	// Check first so that a failure leaves obj unchanged.
	for i, f := range fields[:len(fields)-1] {
		v, ok := m[f]
		if !ok || v == nil {
			break
		}
		next, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s accessor error: %v is of the type %s, expected map[string]any",
				jsonPath(fields[:i+1]), truncValue(v), typeName(v))
		}
		m = next
	}
	m = obj
	for _, f := range fields[:len(fields)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[fields[len(fields)-1]] = value
	return nil
}

// RemoveNested deletes the value at the path of fields; it does nothing if
// the path does not exist.
func RemoveNested(obj map[string]any, fields ...string) {
	if len(fields) == 0 {
		return
	}
	m := obj
	for _, f := range fields[:len(fields)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, fields[len(fields)-1])
}

// metadata returns obj["metadata"] if it is an object.
func metadata(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

// metadataForWrite returns obj["metadata"], replacing an absent or non-object
// value with a new empty object.
func metadataForWrite(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func metaString(obj map[string]any, key string) string {
	s, _ := metadata(obj)[key].(string)
	return s
}

// setMeta stores v under metadata[key], or removes the key when remove is
// true (the setters treat zero values as absent, like omitempty).
func setMeta(obj map[string]any, key string, v any, remove bool) {
	if remove {
		if m := metadata(obj); m != nil {
			delete(m, key)
		}
		return
	}
	metadataForWrite(obj)[key] = v
}

// The metadata getters below return the zero value when the field is absent
// or has the wrong type (validation reports wrong types); the setters remove
// the field when given the zero value, mirroring omitempty, and replace a
// metadata value that is not an object.

// GetAPIVersion returns obj's apiVersion.
func GetAPIVersion(obj map[string]any) string { s, _ := obj["apiVersion"].(string); return s }

// SetAPIVersion sets obj's apiVersion.
func SetAPIVersion(obj map[string]any, v string) { obj["apiVersion"] = v }

// GetKind returns obj's kind.
func GetKind(obj map[string]any) string { s, _ := obj["kind"].(string); return s }

// SetKind sets obj's kind.
func SetKind(obj map[string]any, v string) { obj["kind"] = v }

// GetName returns metadata.name.
func GetName(obj map[string]any) string { return metaString(obj, "name") }

// SetName sets metadata.name.
func SetName(obj map[string]any, v string) { setMeta(obj, "name", v, v == "") }

// GetGenerateName returns metadata.generateName.
func GetGenerateName(obj map[string]any) string { return metaString(obj, "generateName") }

// SetGenerateName sets metadata.generateName.
func SetGenerateName(obj map[string]any, v string) { setMeta(obj, "generateName", v, v == "") }

// GetNamespace returns metadata.namespace.
func GetNamespace(obj map[string]any) string { return metaString(obj, "namespace") }

// SetNamespace sets metadata.namespace.
func SetNamespace(obj map[string]any, v string) { setMeta(obj, "namespace", v, v == "") }

// GetUID returns metadata.uid.
func GetUID(obj map[string]any) string { return metaString(obj, "uid") }

// SetUID sets metadata.uid.
func SetUID(obj map[string]any, v string) { setMeta(obj, "uid", v, v == "") }

// GetResourceVersion returns metadata.resourceVersion.
func GetResourceVersion(obj map[string]any) string { return metaString(obj, "resourceVersion") }

// SetResourceVersion sets metadata.resourceVersion.
func SetResourceVersion(obj map[string]any, v string) {
	setMeta(obj, "resourceVersion", v, v == "")
}

// GetGeneration returns metadata.generation (0 when absent).
func GetGeneration(obj map[string]any) int64 {
	i, _ := AsInt64(metadata(obj)["generation"])
	return i
}

// SetGeneration sets metadata.generation, stored as a json.Number.
func SetGeneration(obj map[string]any, v int64) {
	setMeta(obj, "generation", json.Number(strconv.FormatInt(v, 10)), v == 0)
}

// GetLabels returns a copy of metadata.labels (nil when absent); entries
// whose value is not a string are skipped.
func GetLabels(obj map[string]any) map[string]string { return metaStringMap(obj, "labels") }

// SetLabels sets metadata.labels (removing the field for an empty map).
func SetLabels(obj map[string]any, labels map[string]string) {
	setMetaStringMap(obj, "labels", labels)
}

// GetAnnotations returns a copy of metadata.annotations (nil when absent).
func GetAnnotations(obj map[string]any) map[string]string {
	return metaStringMap(obj, "annotations")
}

// SetAnnotations sets metadata.annotations (removing the field for an empty
// map).
func SetAnnotations(obj map[string]any, annotations map[string]string) {
	setMetaStringMap(obj, "annotations", annotations)
}

func metaStringMap(obj map[string]any, key string) map[string]string {
	m, ok := metadata(obj)[key].(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func setMetaStringMap(obj map[string]any, key string, v map[string]string) {
	if len(v) == 0 {
		setMeta(obj, key, nil, true)
		return
	}
	m := make(map[string]any, len(v))
	for k, s := range v {
		m[k] = s
	}
	setMeta(obj, key, m, false)
}

// GetFinalizers returns a copy of metadata.finalizers (nil when absent);
// elements that are not strings are skipped.
func GetFinalizers(obj map[string]any) []string {
	s, ok := metadata(obj)["finalizers"].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(s))
	for _, e := range s {
		if str, ok := e.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// SetFinalizers sets metadata.finalizers (removing the field when empty).
func SetFinalizers(obj map[string]any, finalizers []string) {
	if len(finalizers) == 0 {
		setMeta(obj, "finalizers", nil, true)
		return
	}
	s := make([]any, len(finalizers))
	for i, f := range finalizers {
		s[i] = f
	}
	setMeta(obj, "finalizers", s, false)
}

func metaTime(obj map[string]any, key string) *Time {
	s, ok := metadata(obj)[key].(string)
	if !ok {
		return nil
	}
	var t Time
	if err := t.UnmarshalJSON([]byte(strconv.Quote(s))); err != nil || t.IsZero() {
		return nil
	}
	return &t
}

func setMetaTime(obj map[string]any, key string, t *Time) {
	if t == nil || t.IsZero() {
		setMeta(obj, key, nil, true)
		return
	}
	setMeta(obj, key, t.UTC().Format(TimeFormat), false)
}

// GetCreationTimestamp returns metadata.creationTimestamp (nil when absent
// or unparsable).
func GetCreationTimestamp(obj map[string]any) *Time { return metaTime(obj, "creationTimestamp") }

// SetCreationTimestamp sets metadata.creationTimestamp (nil removes it).
func SetCreationTimestamp(obj map[string]any, t *Time) { setMetaTime(obj, "creationTimestamp", t) }

// GetDeletionTimestamp returns metadata.deletionTimestamp (nil when absent
// or unparsable).
func GetDeletionTimestamp(obj map[string]any) *Time { return metaTime(obj, "deletionTimestamp") }

// SetDeletionTimestamp sets metadata.deletionTimestamp (nil removes it).
func SetDeletionTimestamp(obj map[string]any, t *Time) { setMetaTime(obj, "deletionTimestamp", t) }

// GetDeletionGracePeriodSeconds returns metadata.deletionGracePeriodSeconds
// (nil when absent).
func GetDeletionGracePeriodSeconds(obj map[string]any) *int64 {
	i, ok := AsInt64(metadata(obj)["deletionGracePeriodSeconds"])
	if !ok {
		return nil
	}
	return &i
}

// SetDeletionGracePeriodSeconds sets metadata.deletionGracePeriodSeconds
// (nil removes it).
func SetDeletionGracePeriodSeconds(obj map[string]any, v *int64) {
	if v == nil {
		setMeta(obj, "deletionGracePeriodSeconds", nil, true)
		return
	}
	setMeta(obj, "deletionGracePeriodSeconds", json.Number(strconv.FormatInt(*v, 10)), false)
}

// GetOwnerReferences returns metadata.ownerReferences decoded (nil when
// absent or malformed).
func GetOwnerReferences(obj map[string]any) []OwnerReference {
	var refs []OwnerReference
	if !decodeMeta(obj, "ownerReferences", &refs) {
		return nil
	}
	return refs
}

// SetOwnerReferences sets metadata.ownerReferences (removing the field when
// empty).
func SetOwnerReferences(obj map[string]any, refs []OwnerReference) {
	encodeMeta(obj, "ownerReferences", refs, len(refs) == 0)
}

// GetManagedFields returns metadata.managedFields decoded (nil when absent
// or malformed).
func GetManagedFields(obj map[string]any) []ManagedFields {
	var mf []ManagedFields
	if !decodeMeta(obj, "managedFields", &mf) {
		return nil
	}
	return mf
}

// SetManagedFields sets metadata.managedFields (removing the field when
// empty).
func SetManagedFields(obj map[string]any, mf []ManagedFields) {
	encodeMeta(obj, "managedFields", mf, len(mf) == 0)
}

func decodeMeta(obj map[string]any, key string, out any) bool {
	v, ok := metadata(obj)[key]
	if !ok {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, out) == nil
}

func encodeMeta(obj map[string]any, key string, v any, remove bool) {
	if remove {
		setMeta(obj, key, nil, true)
		return
	}
	g, err := toGeneric(v)
	if err != nil {
		// The meta types always encode; keep the typed value rather than lose it.
		g = v
	}
	setMeta(obj, key, g, false)
}

// toGeneric converts any JSON-encodable Go value to the generic form.
func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var g any
	if err := d.Decode(&g); err != nil {
		return nil, err
	}
	return g, nil
}

// GetObjectMeta decodes obj's metadata into an ObjectMeta. An absent
// metadata gives an empty ObjectMeta; metadata of the wrong shape is an
// error.
func GetObjectMeta(obj map[string]any) (*ObjectMeta, error) {
	v, ok := obj["metadata"]
	if !ok || v == nil {
		return &ObjectMeta{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("meta: metadata is of the type %s, expected an object", typeName(v))
	}
	var om ObjectMeta
	if err := FromMap(m, &om); err != nil {
		return nil, err
	}
	return &om, nil
}

// SetObjectMeta replaces obj's metadata with the generic form of om.
func SetObjectMeta(obj map[string]any, om *ObjectMeta) error {
	if om == nil {
		delete(obj, "metadata")
		return nil
	}
	m, err := ToMap(om)
	if err != nil {
		return err
	}
	obj["metadata"] = m
	return nil
}

// CanonicalKey renders a generic value so that equal values give equal keys:
// numbers compare by value whatever their representation, maps by their
// sorted keys. Values of other types render with their Go type, so they never
// collide with JSON values. It keys sets and merge lists.
func CanonicalKey(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		b.WriteString(strconv.Quote(t))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeCanonical(b, t[k])
		}
		b.WriteByte('}')
	default:
		if i, ok := AsInt64(v); ok {
			b.WriteString(strconv.FormatInt(i, 10))
		} else if f, ok := AsFloat64(v); ok {
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			fmt.Fprintf(b, "%T:%v", v, v)
		}
	}
}
