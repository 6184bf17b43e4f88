package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/kapi-dev/kapi/codec"
)

// appendJSON appends the JSON encoding of v, a generic decoded object
// (maps, slices, strings, json.Number, bools, nil), to dst with exactly the
// bytes encoding/json.Marshal produces: sorted keys, HTML-safe escapes,
// invalid UTF-8 replaced. Other Go values (from hooks that put typed values
// into objects) go through encoding/json. It is the stored-object encoder's
// fast path: no reflection and no intermediate buffers.
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return codec.AppendJSONString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		if v == "" {
			return append(dst, '0'), nil
		}
		if !isJSONNumber(string(v)) {
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
		dst, _, err := appendFields(append(dst, '{'), v, nil)
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
			if dst, err = appendJSON(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case json.RawMessage:
		// The field manager records a create's fieldsV1 as compact JSON
		// text: as it is, when it is what encoding/json would write.
		if codec.IsFieldsJSON(v) {
			return append(dst, v...), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendFields appends the fields of m but those skip names ("key":value,
// comma-separated, keys sorted as encoding/json sorts them), without braces,
// and reports how many it wrote.
func appendFields(dst []byte, m map[string]any, skip func(key string) bool) ([]byte, int, error) {
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
		dst = codec.AppendJSONString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendJSON(dst, m[k]); err != nil {
			return dst, i, fmt.Errorf("field %s: %w", k, err)
		}
	}
	return dst, len(keys), nil
}

// isJSONNumber reports whether s is a valid JSON number literal.
func isJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
