package codec

import (
	"strconv"
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
	return s.finishString(append(dst, s.data[start:s.pos]...), mark)
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
