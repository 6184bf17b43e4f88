package codec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// AppendJSON appends the JSON encoding of v, a generic decoded object
// (maps, slices, strings, json.Number, bools, nil), to dst with exactly the
// bytes encoding/json.Marshal produces: sorted keys, HTML-safe escapes,
// invalid UTF-8 replaced. Other Go values (from hooks that put typed values
// into objects) go through encoding/json. It is the stored-object encoder's
// fast path: no reflection and no intermediate buffers.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendJSONString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		if v == "" {
			return append(dst, '0'), nil
		}
		if !IsJSONNumber(string(v)) {
			return dst, fmt.Errorf("json: invalid number literal %q", string(v))
		}
		return append(dst, v...), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst, _, err := AppendJSONFields(append(dst, '{'), v, nil)
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		var err error
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = AppendJSON(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case json.RawMessage:
		// The field manager records a create's fieldsV1 as compact JSON
		// text: as it is, when it is what encoding/json would write.
		if IsFieldsJSON(v) {
			return append(dst, v...), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// AppendJSONFields appends the fields of m but those skip names ("key":value,
// comma-separated, keys sorted as encoding/json sorts them), without braces,
// and reports how many it wrote.
func AppendJSONFields(dst []byte, m map[string]any, skip func(key string) bool) ([]byte, int, error) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		if skip == nil || !skip(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		if dst, err = AppendJSON(dst, m[k]); err != nil {
			return dst, i, fmt.Errorf("field %s: %w", k, err)
		}
	}
	return dst, len(keys), nil
}
