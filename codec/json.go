package codec

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of decoded JSON, so that hostile input cannot
// exhaust the stack.
const MaxDepth = 10000

// DecodeJSON decodes one JSON value into generic form: map[string]any,
// []any, string, json.Number (numbers stay exact), bool and nil. Unlike
// encoding/json it reports duplicate object keys, by field path
// ("spec.ports[1].name"), as Kubernetes' field validation does; the last
// occurrence wins. Trailing non-space data is an error, and so is a number
// beyond float64's range (no client could read it back).
func DecodeJSON(data []byte) (any, []string, error) {
	return decodeJSON(data, true)
}

// DecodeStoredJSON decodes like DecodeJSON but takes numbers beyond
// float64's range, for bytes the server stored itself (before requests were
// refused them, or from a hook's object) and documents made from them (a
// patched object, a Table's cells): they must stay readable, writable and
// deletable.
func DecodeStoredJSON(data []byte) (any, []string, error) {
	return decodeJSON(data, false)
}

func decodeJSON(data []byte, checkRange bool) (any, []string, error) {
	d := decoder{lexer: lexer{data: data, checkRange: checkRange}, path: make([]pathElem, 0, 16)}
	d.skipSpace()
	v, err := d.value(0)
	if err != nil {
		return nil, nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, nil, d.errorf("invalid character %q after top-level value", d.data[d.pos])
	}
	return v, d.dups, nil
}

type decoder struct {
	lexer
	dups []string
	path []pathElem // of the value being decoded: pushed and popped as it goes
}

type pathElem struct {
	key   string
	index int // -1 for object keys
}

func (d *decoder) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, d.errorf("exceeded max depth of %d", MaxDepth)
	}
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of JSON input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str(false)
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		text, err := d.number()
		if err != nil {
			return nil, err
		}
		return json.Number(text), nil
	default:
		return nil, d.errorf("invalid character %q looking for beginning of value", c)
	}
}

func (d *decoder) object(depth int) (any, error) {
	d.pos++ // '{'
	obj := map[string]any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return obj, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("expected string for object key")
		}
		k, err := d.str(true)
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		d.path = append(d.path, pathElem{key: k, index: -1})
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, dup := obj[k]; dup {
			d.dups = append(d.dups, renderPath(d.path))
		}
		d.path = d.path[:len(d.path)-1]
		obj[k] = v
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of JSON input")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return obj, nil
		default:
			return nil, d.errorf("invalid character %q after object key:value pair", d.data[d.pos])
		}
	}
}

func (d *decoder) array(depth int) (any, error) {
	d.pos++ // '['
	arr := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return arr, nil
	}
	for i := 0; ; i++ {
		d.skipSpace()
		d.path = append(d.path, pathElem{index: i})
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.path = d.path[:len(d.path)-1]
		arr = append(arr, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of JSON input")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return arr, nil
		default:
			return nil, d.errorf("invalid character %q after array element", d.data[d.pos])
		}
	}
}

// mayEndString reports whether one of the eight bytes of x may be a quote,
// a backslash or a control character. It has no false negatives.
func mayEndString(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - ones) &^ v }
	return ((x-ones*0x20)&^x|hasZero(x^(ones*'"'))|hasZero(x^(ones*'\\')))&tops != 0
}

// str decodes a string; key says it is an object key, which may be one of
// the common keys decoded without a copy.
func (d *decoder) str(key bool) (string, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes, valid UTF-8. high gathers the bytes passed
	// over: with no top bit set they are ASCII, valid without a second look.
	var high uint64
	for d.pos < len(d.data) {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character.
		for d.pos+8 <= len(d.data) {
			w := binary.LittleEndian.Uint64(d.data[d.pos : d.pos+8])
			if mayEndString(w) {
				break
			}
			high |= w
			d.pos += 8
		}
		if d.pos == len(d.data) {
			break
		}
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if high&0x8080808080808080 == 0 || utf8.Valid(s) {
				if key {
					if k, ok := commonKey(s); ok {
						return k, nil
					}
				}
				return string(s), nil
			}
			return fixUTF8(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errorf("invalid control character in string")
		}
		high |= uint64(c)
		d.pos++
	}
	b, err := d.finishString(append([]byte(nil), d.data[start:d.pos]...), 0)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func renderPath(path []pathElem) string {
	var b strings.Builder
	for i, p := range path {
		if p.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	}
	return b.String()
}

// fixUTF8 replaces each byte of an invalid UTF-8 sequence with U+FFFD, as
// encoding/json does.
func fixUTF8(s []byte) string {
	if utf8.Valid(s) {
		return string(s)
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// commonKey returns the string of a key found in most Kubernetes objects
// without allocating one (the switch compares without converting).
func commonKey(b []byte) (string, bool) {
	switch string(b) {
	case "apiVersion":
		return "apiVersion", true
	case "kind":
		return "kind", true
	case "metadata":
		return "metadata", true
	case "name":
		return "name", true
	case "namespace":
		return "namespace", true
	case "labels":
		return "labels", true
	case "annotations":
		return "annotations", true
	case "uid":
		return "uid", true
	case "resourceVersion":
		return "resourceVersion", true
	case "generation":
		return "generation", true
	case "creationTimestamp":
		return "creationTimestamp", true
	case "deletionTimestamp":
		return "deletionTimestamp", true
	case "generateName":
		return "generateName", true
	case "finalizers":
		return "finalizers", true
	case "ownerReferences":
		return "ownerReferences", true
	case "managedFields":
		return "managedFields", true
	case "manager":
		return "manager", true
	case "operation":
		return "operation", true
	case "time":
		return "time", true
	case "fieldsType":
		return "fieldsType", true
	case "fieldsV1":
		return "fieldsV1", true
	case "spec":
		return "spec", true
	case "status":
		return "status", true
	case "data":
		return "data", true
	case "items":
		return "items", true
	case "type":
		return "type", true
	}
	return "", false
}
