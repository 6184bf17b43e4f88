package meta

import (
	"fmt"
	"strings"
)

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
