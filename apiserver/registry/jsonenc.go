package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
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
		return appendJSONString(dst, v), nil
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
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendJSON(dst, m[k]); err != nil {
			return dst, i, fmt.Errorf("field %s: %w", k, err)
		}
	}
	return dst, len(keys), nil
}

const hexDigits = "0123456789abcdef"

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

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping on.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look.
		i = skipSafeWords(s, i)
		if i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// SWAR constants: a one and a top bit in every byte of a word.
const (
	swarOnes = 0x0101010101010101
	swarTops = 0x8080808080808080
)

// load8 reads the eight bytes of w as a little-endian word. w is sliced to
// exactly eight bytes by the caller, so the compiler proves every index in
// bounds and makes this one load (with the indexes into a longer string it
// checked each byte's bounds and loaded them one by one).
func load8(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// skipSafeWords returns the index, from i on, of the first eight bytes of
// s that may need escaping, or of the tail shorter than eight. A loop of its
// own keeps the word test's constants and index in registers.
func skipSafeWords(s string, i int) int {
	for i+8 <= len(s) && !mayNeedEscape(load8(s[i:i+8])) {
		i += 8
	}
	return i
}

// mayNeedEscape reports whether one of the eight bytes of x may need
// appendJSONString's attention: a control character, '"', '\\', '<', '>',
// '&' or a byte of a multi-byte character. It has no false negatives (false
// positives only send the bytes through the exact loop).
//
// Each zero-byte test (v-1)&^v finds the bytes equal to one value; setting
// bit 1 maps '<' (0x3c) and only it onto '>' (0x3e), and setting bit 2 maps
// '"' (0x22) and only it onto '&' (0x26), so three tests cover the five
// characters, and the function is small enough to be inlined.
func mayNeedEscape(x uint64) bool {
	lt := x | swarOnes*0x02 ^ swarOnes*'>'
	qa := x | swarOnes*0x04 ^ swarOnes*'&'
	bs := x ^ swarOnes*'\\'
	t := x | (x-swarOnes*0x20)&^x | (lt-swarOnes)&^lt | (qa-swarOnes)&^qa | (bs-swarOnes)&^bs
	return t&swarTops != 0
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
