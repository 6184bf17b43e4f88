package patch

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/kapi-dev/kapi/meta"
)

// toSMD returns a deep copy of a generic JSON value in the form
// structured-merge-diff reads: maps are map[string]any, lists []any, numbers
// int64 (when integral and in range) or float64. Other Go types (typed maps
// and slices a strategy hook may have stored) go through JSON.
func toSMD(v any) (any, error) {
	switch t := v.(type) {
	case nil, string, bool, int64, float64:
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := toSMD(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := toSMD(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s is out of range", t)
		}
		return f, nil
	}
	if i, ok := meta.AsInt64(v); ok {
		return i, nil
	}
	if f, ok := meta.AsFloat64(v); ok {
		return f, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value of type %T cannot be encoded as JSON: %v", v, err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return toSMD(g)
}

// fromSMD converts numbers that structured-merge-diff produced back to
// kapi's canonical json.Number, in place, and returns v.
func fromSMD(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = fromSMD(e)
		}
	case []any:
		for i, e := range t {
			t[i] = fromSMD(e)
		}
	case int64:
		return json.Number(strconv.FormatInt(t, 10))
	case float64:
		return json.Number(strconv.FormatFloat(t, 'g', -1, 64))
	case int:
		return json.Number(strconv.Itoa(t))
	}
	return v
}
