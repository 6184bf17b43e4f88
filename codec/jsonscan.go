package codec

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads JSON text token by token without building values, for the
// transcoders (JSON to protobuf) and the raw field lookups. It validates
// what it reads; skipped values are validated too, without recursion.
type scanner struct {
	lexer
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return s.data[s.pos]
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// openObject consumes '{' and reports whether the object is empty (its '}'
// consumed too). Then read each member with key, its value, and next.
func (s *scanner) openObject() (empty bool, err error) {
	if err := s.expect('{'); err != nil {
		return false, err
	}
	if s.peek() == '}' {
		s.pos++
		return true, nil
	}
	return false, nil
}

// key reads a member's key and its colon. Keys without escapes are
// returned without copying; others are unescaped into buf.
func (s *scanner) key(buf []byte) ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errorf("expected string for object key")
	}
	start := s.pos + 1
	i := start
	var hi byte
	for i < len(s.data) && s.data[i] != '"' && s.data[i] != '\\' && s.data[i] >= 0x20 {
		hi |= s.data[i]
		i++
	}
	var k []byte
	if i < len(s.data) && s.data[i] == '"' && (hi < utf8.RuneSelf || utf8.Valid(s.data[start:i])) {
		k = s.data[start:i]
		s.pos = i + 1
	} else {
		var err error
		if k, err = s.appendString(buf[:0]); err != nil {
			return nil, err
		}
	}
	if s.peek() != ':' {
		return nil, s.errorf("expected ':' after object key")
	}
	s.pos++
	s.skipSpace()
	return k, nil
}

// next reads what follows a member's value: true for another member,
// false at the end of the object.
func (s *scanner) next() (bool, error) {
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case '}':
		s.pos++
		return false, nil
	case 0:
		return false, s.errorf("unexpected end of JSON input")
	}
	return false, s.errorf("invalid character %q after object key:value pair", s.data[s.pos])
}

// openArray consumes '[' and reports whether the array is empty (its ']'
// consumed too). Then read each element and call nextElem.
func (s *scanner) openArray() (empty bool, err error) {
	if err := s.expect('['); err != nil {
		return false, err
	}
	if s.peek() == ']' {
		s.pos++
		return true, nil
	}
	s.skipSpace()
	return false, nil
}

// nextElem reads what follows an element: true for another element, false
// at the end of the array.
func (s *scanner) nextElem() (bool, error) {
	switch s.peek() {
	case ',':
		s.pos++
		s.skipSpace()
		return true, nil
	case ']':
		s.pos++
		return false, nil
	case 0:
		return false, s.errorf("unexpected end of JSON input")
	}
	return false, s.errorf("invalid character %q after array element", s.data[s.pos])
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end of JSON input, expected %q", c)
		}
		return s.errorf("invalid character %q, expected %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// null consumes a null and reports whether there was one.
func (s *scanner) null() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

func (s *scanner) boolean() (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, s.errorf("expected a boolean")
}

// number returns the text of the number at the current position.
func (s *scanner) number() ([]byte, error) {
	s.skipSpace()
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, s.errorf("expected a number")
	}
	return s.lexer.number()
}

// integer reads a number that must be an integer within [min, max]. Like
// Kubernetes' decoders it accepts an exponent form of an integer (1e3).
func (s *scanner) integer(min, max int64) (int64, error) {
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(text), 10, 64); err == nil {
		if n < min || n > max {
			return 0, s.errorf("number %s out of range", text)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || f != float64(int64(f)) || f < float64(min) || f > float64(max) {
		return 0, s.errorf("number %s is not an integer in range", text)
	}
	return int64(f), nil
}

// appendString appends the unescaped string at the current position to dst.
// Invalid UTF-8 becomes U+FFFD, as with encoding/json.
func (s *scanner) appendString(dst []byte) ([]byte, error) {
	if s.peek() != '"' {
		return dst, s.errorf("expected a string")
	}
	s.pos++
	start := s.pos
	var hi byte
	for s.pos < len(s.data) && s.data[s.pos] != '"' && s.data[s.pos] != '\\' && s.data[s.pos] >= 0x20 {
		hi |= s.data[s.pos]
		s.pos++
	}
	if s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == '"':
			raw := s.data[start:s.pos]
			s.pos++
			if hi < utf8.RuneSelf || utf8.Valid(raw) {
				return append(dst, raw...), nil
			}
			return append(dst, fixUTF8(raw)...), nil
		case c < 0x20:
			return dst, s.errorf("invalid control character in string")
		}
	}
	mark := len(dst)
	dst = append(dst, s.data[start:s.pos]...)
	for {
		if s.pos >= len(s.data) {
			return dst, s.errorf("unexpected end of JSON input in string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !utf8.Valid(dst[mark:]) {
				fixed := fixUTF8(dst[mark:])
				dst = append(dst[:mark], fixed...)
			}
			return dst, nil
		case c < 0x20:
			return dst, s.errorf("invalid control character in string")
		case c != '\\':
			dst = append(dst, c)
			s.pos++
			continue
		}
		s.pos++
		if s.pos >= len(s.data) {
			return dst, s.errorf("unexpected end of JSON input in string escape")
		}
		e := s.data[s.pos]
		s.pos++
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return dst, s.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					if r2, ok := s.hex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					s.pos = save
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, s.errorf("invalid escape character %q in string", e)
		}
	}
}

// skipValue skips one value and returns its text. It validates the value
// iteratively (bounded by MaxDepth), so hostile nesting cannot exhaust the
// stack.
func (s *scanner) skipValue() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	// stack of open containers: '{' or '['; state per level tracked by
	// expectKey.
	var stack []byte
	expectValue := true
	for {
		s.skipSpace()
		if s.pos >= len(s.data) {
			return nil, s.errorf("unexpected end of JSON input")
		}
		c := s.data[s.pos]
		if expectValue {
			switch {
			case c == '{':
				if len(stack) >= MaxDepth {
					return nil, s.errorf("exceeded max depth of %d", MaxDepth)
				}
				s.pos++
				if s.peek() == '}' {
					s.pos++
					break
				}
				stack = append(stack, '{')
				if err := s.skipKey(); err != nil {
					return nil, err
				}
				continue
			case c == '[':
				if len(stack) >= MaxDepth {
					return nil, s.errorf("exceeded max depth of %d", MaxDepth)
				}
				s.pos++
				if s.peek() == ']' {
					s.pos++
					break
				}
				stack = append(stack, '[')
				continue
			case c == '"':
				if err := s.skipString(); err != nil {
					return nil, err
				}
			case c == 't':
				if err := s.literal("true"); err != nil {
					return nil, err
				}
			case c == 'f':
				if err := s.literal("false"); err != nil {
					return nil, err
				}
			case c == 'n':
				if err := s.literal("null"); err != nil {
					return nil, err
				}
			case c == '-' || (c >= '0' && c <= '9'):
				if _, err := s.number(); err != nil {
					return nil, err
				}
			default:
				return nil, s.errorf("invalid character %q looking for beginning of value", c)
			}
			expectValue = false
		}
		// After a value: close containers until the next element.
		for !expectValue {
			if len(stack) == 0 {
				return s.data[start:s.pos], nil
			}
			top := stack[len(stack)-1]
			switch s.peek() {
			case ',':
				s.pos++
				if top == '{' {
					if err := s.skipKey(); err != nil {
						return nil, err
					}
				}
				expectValue = true
			case '}':
				if top != '{' {
					return nil, s.errorf("invalid character '}' in array")
				}
				s.pos++
				stack = stack[:len(stack)-1]
			case ']':
				if top != '[' {
					return nil, s.errorf("invalid character ']' in object")
				}
				s.pos++
				stack = stack[:len(stack)-1]
			case 0:
				return nil, s.errorf("unexpected end of JSON input")
			default:
				return nil, s.errorf("invalid character %q after value", s.data[s.pos])
			}
		}
	}
}

// skipKey skips `"key":` inside an object.
func (s *scanner) skipKey() error {
	if s.peek() != '"' {
		return s.errorf("expected string for object key")
	}
	if err := s.skipString(); err != nil {
		return err
	}
	return s.expect(':')
}

func (s *scanner) skipString() error {
	s.pos++ // opening quote
	for s.pos < len(s.data) {
		for s.pos < len(s.data) && s.data[s.pos] != '"' && s.data[s.pos] != '\\' && s.data[s.pos] >= 0x20 {
			s.pos++
		}
		if s.pos >= len(s.data) {
			break
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return s.errorf("unexpected end of JSON input in string escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				if _, ok := s.hex4(); !ok {
					return s.errorf("invalid \\u escape")
				}
			default:
				return s.errorf("invalid escape character %q in string", s.data[s.pos])
			}
		case c < 0x20:
			return s.errorf("invalid control character in string")
		default:
			s.pos++
		}
	}
	return s.errorf("unexpected end of JSON input in string")
}

// end checks that only space follows.
func (s *scanner) end() error {
	s.skipSpace()
	if s.pos < len(s.data) {
		return s.errorf("invalid character %q after top-level value", s.data[s.pos])
	}
	return nil
}

// TopLevelFields returns the raw JSON of the given top-level fields of a JSON
// object (nil for a field that is absent), without decoding the object.
func TopLevelFields(data []byte, keys ...string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	s := scanner{lexer{data: data}}
	empty, err := s.openObject()
	if err != nil {
		return nil, err
	}
	for more := !empty; more; {
		key, err := s.key(nil)
		if err != nil {
			return nil, err
		}
		v, err := s.skipValue()
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			if string(key) == k {
				out[i] = v
			}
		}
		if more, err = s.next(); err != nil {
			return nil, err
		}
	}
	return out, s.end()
}

// TopLevelField returns the raw JSON of one top-level field of a JSON
// object (nil when absent), without decoding the object.
func TopLevelField(data []byte, key string) ([]byte, error) {
	s := scanner{lexer{data: data}}
	empty, err := s.openObject()
	if err != nil {
		return nil, err
	}
	var out []byte
	for more := !empty; more; {
		k, err := s.key(nil)
		if err != nil {
			return nil, err
		}
		v, err := s.skipValue()
		if err != nil {
			return nil, err
		}
		if string(k) == key {
			out = v
		}
		if more, err = s.next(); err != nil {
			return nil, err
		}
	}
	return out, s.end()
}

// TypeMeta returns the kind and apiVersion of a JSON object, reading only as
// far as it must (they usually come first). Absent or non-string values are
// "".
func TypeMeta(data []byte) (kind, apiVersion string, err error) {
	s := scanner{lexer{data: data}}
	empty, err := s.openObject()
	if err != nil {
		return "", "", err
	}
	found := 0
	for more := !empty; more && found < 2; {
		key, err := s.key(nil)
		if err != nil {
			return "", "", err
		}
		if k := string(key); (k == "kind" || k == "apiVersion") && s.peek() == '"' {
			v, err := s.appendString(nil)
			if err != nil {
				return "", "", err
			}
			if k == "kind" {
				kind = string(v)
			} else {
				apiVersion = string(v)
			}
			found++
		} else if _, err := s.skipValue(); err != nil {
			return "", "", err
		}
		if more, err = s.next(); err != nil {
			return "", "", err
		}
	}
	return kind, apiVersion, nil
}

// isCompact reports whether JSON text has no whitespace outside strings.
func isCompact(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

// appendCompact appends raw JSON text to dst without insignificant space.
func appendCompact(dst, raw []byte) []byte {
	if isCompact(raw) {
		return append(dst, raw...)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(dst, raw...)
	}
	return append(dst, b.Bytes()...)
}

// DecodeObjectWithout decodes a JSON object like DecodeJSON, leaving out the
// nested fields at the given paths (e.g. {"metadata", "managedFields"}),
// which are skipped without being decoded. Duplicate keys are not reported.
func DecodeObjectWithout(data []byte, paths ...[]string) (map[string]any, error) {
	s := scanner{lexer{data: data}}
	out, err := s.objectWithout(paths, 0)
	if err != nil {
		return nil, err
	}
	return out, s.end()
}

func (s *scanner) objectWithout(paths [][]string, depth int) (map[string]any, error) {
	if s.peek() != '{' {
		return nil, s.errorf("expected an object")
	}
	empty, err := s.openObject()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for more := !empty; more; {
		key, err := s.key(nil)
		if err != nil {
			return nil, err
		}
		var sub [][]string
		drop := false
		for _, p := range paths {
			if len(p) > depth && p[depth] == string(key) {
				if len(p) == depth+1 {
					drop = true
				} else {
					sub = append(sub, p)
				}
			}
		}
		switch {
		case drop:
			if _, err := s.skipValue(); err != nil {
				return nil, err
			}
		case sub != nil && s.peek() == '{':
			v, err := s.objectWithout(sub, depth+1)
			if err != nil {
				return nil, err
			}
			out[string(key)] = v
		default:
			// Decode in place with DecodeJSON's decoder.
			d := decoder{lexer: lexer{data: s.data, pos: s.pos}}
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			s.pos = d.pos
			out[string(key)] = v
		}
		if more, err = s.next(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
