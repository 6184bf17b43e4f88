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

// The metadata getters below return the zero value when the field is absent
// or has the wrong type (validation reports wrong types); the setters remove
// the field when given the zero value, mirroring omitempty, and replace a
// metadata value that is not an object.

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

// SortedKeys returns the keys of m in order, in one allocation (the
// validators and patch engines iterate objects in key order for stable
// output).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
