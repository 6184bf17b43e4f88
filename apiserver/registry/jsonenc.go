package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

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
		if rawVerbatim(v) {
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

// rawVerbatim reports whether encoding/json writes the raw JSON text v as
// it is. It answers yes only for the shape of FieldsV1 the field manager
// writes (an object whose members are objects of the same shape, keys of
// printable ASCII without a quote, backslash, <, > or &, no whitespace) and
// no for anything else, in one pass: what it turns away is encoded by
// encoding/json, which validates it.
func rawVerbatim(v json.RawMessage) bool {
	end, ok := fieldsObject(v, 0, 0)
	return ok && end == len(v)
}

// fieldsObject reads the object at v[i:] (see rawVerbatim) and returns the
// offset after it.
func fieldsObject(v []byte, i, depth int) (int, bool) {
	if depth > 1000 || i >= len(v) || v[i] != '{' {
		return 0, false
	}
	i++
	if i < len(v) && v[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return 0, false
		}
		for i++; i < len(v) && v[i] != '"'; i++ {
			if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '\\' || c == '<' || c == '>' || c == '&' {
				return 0, false
			}
		}
		if i+1 >= len(v) || v[i+1] != ':' {
			return 0, false
		}
		var ok bool
		if i, ok = fieldsObject(v, i+2, depth+1); !ok || i >= len(v) {
			return 0, false
		}
		switch v[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
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
