package codec

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// lexer is a position in JSON text and the tokens that the decoder
// (DecodeJSON) and the scanner read alike: whitespace, literals, numbers
// and \u escapes, with one error format.
type lexer struct {
	data []byte
	pos  int
	// spaced is set when skipSpace skips something (the scanner's callers
	// reset it).
	spaced bool
	// checkRange refuses numbers beyond float64's range (DecodeJSON's
	// request bodies); stored bytes are read whatever they hold.
	checkRange bool
}

func (l *lexer) errorf(format string, args ...any) error {
	return fmt.Errorf("json: "+format+" (at offset %d)", append(args, l.pos)...)
}

func (l *lexer) skipSpace() {
	start := l.pos
	for l.pos < len(l.data) {
		switch l.data[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
			continue
		}
		break
	}
	if l.pos != start {
		l.spaced = true
	}
}

func (l *lexer) literal(lit string) error {
	if len(l.data)-l.pos < len(lit) || string(l.data[l.pos:l.pos+len(lit)]) != lit {
		return l.errorf("invalid literal, expected %s", lit)
	}
	l.pos += len(lit)
	return nil
}

// hex4 reads the four hex digits of a \u escape.
func (l *lexer) hex4() (rune, bool) {
	if len(l.data)-l.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range l.data[l.pos : l.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	l.pos += 4
	return r, true
}

// number consumes the number at the position and returns its text. With
// checkRange, a number beyond float64's range ("1e400") is an error, as in
// Kubernetes' decoding: no client could read it back.
func (l *lexer) number() ([]byte, error) {
	end, problem := numberEnd(l.data, l.pos)
	if problem != "" {
		l.pos = end
		return nil, l.errorf("%s", problem)
	}
	text := l.data[l.pos:end]
	if l.checkRange && mayOverflow(text) {
		if _, err := strconv.ParseFloat(string(text), 64); err != nil {
			return nil, l.errorf("cannot unmarshal number %s into Go value of type float64: out of range", text)
		}
	}
	l.pos = end
	return text, nil
}

// mayOverflow reports whether a number literal can be beyond float64's
// range: only one with an exponent or more than 308 digits can.
func mayOverflow(text []byte) bool {
	if len(text) > 308 {
		return true
	}
	for _, c := range text {
		if c == 'e' || c == 'E' {
			return true
		}
	}
	return false
}

// numberEnd returns where the JSON number that starts at data[i] ends, or
// where it stops being one and why: the one number grammar of the decoder,
// the scanner and the encoder's check of json.Number values.
func numberEnd[T string | []byte](data T, i int) (end int, problem string) {
	digits := func() int {
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(data) && data[i] == '-' {
		i++
	}
	intStart := i
	if digits() == 0 {
		return i, "invalid number"
	}
	if data[intStart] == '0' && i-intStart > 1 {
		return i, "invalid number: leading zero"
	}
	if i < len(data) && data[i] == '.' {
		i++
		if digits() == 0 {
			return i, "invalid number: no digits after decimal point"
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, "invalid number: no digits in exponent"
		}
	}
	return i, ""
}

// IsJSONNumber reports whether s is exactly one JSON number literal.
func IsJSONNumber(s string) bool {
	end, problem := numberEnd(s, 0)
	return problem == "" && end == len(s)
}

// finishString appends the rest of the string at the position (after the
// part a fast path copied to dst[mark:]) up to its closing quote, escapes
// unescaped, and makes dst[mark:] valid UTF-8 (invalid bytes become U+FFFD,
// as with encoding/json).
func (l *lexer) finishString(dst []byte, mark int) ([]byte, error) {
	for {
		if l.pos >= len(l.data) {
			return dst, l.errorf("unexpected end of JSON input in string")
		}
		c := l.data[l.pos]
		switch {
		case c == '"':
			l.pos++
			if !utf8.Valid(dst[mark:]) {
				fixed := fixUTF8(dst[mark:])
				dst = append(dst[:mark], fixed...)
			}
			return dst, nil
		case c < 0x20:
			return dst, l.errorf("invalid control character in string")
		case c != '\\':
			dst = append(dst, c)
			l.pos++
			continue
		}
		l.pos++
		var err error
		if dst, err = l.appendEscape(dst); err != nil {
			return dst, err
		}
	}
}

// appendEscape appends the character of the escape that follows a
// backslash at the current position. A \u escape of half a surrogate pair
// takes the next \u escape with it when the two make a pair, and is U+FFFD
// otherwise.
func (l *lexer) appendEscape(dst []byte) ([]byte, error) {
	if l.pos >= len(l.data) {
		return dst, l.errorf("unexpected end of JSON input in string escape")
	}
	e := l.data[l.pos]
	l.pos++
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
		r, ok := l.hex4()
		if !ok {
			return dst, l.errorf("invalid \\u escape")
		}
		if utf16.IsSurrogate(r) {
			if l.pos+1 < len(l.data) && l.data[l.pos] == '\\' && l.data[l.pos+1] == 'u' {
				save := l.pos
				l.pos += 2
				if r2, ok := l.hex4(); ok {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						return utf8.AppendRune(dst, dec), nil
					}
				}
				l.pos = save
			}
			r = utf8.RuneError
		}
		dst = utf8.AppendRune(dst, r)
	default:
		return dst, l.errorf("invalid escape character %q in string", e)
	}
	return dst, nil
}
