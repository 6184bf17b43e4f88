package meta

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
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
