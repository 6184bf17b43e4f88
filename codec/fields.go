package codec

import "unicode/utf8"

// IsFieldsJSON reports whether v is JSON text of the shape of FieldsV1 as
// kapi's field manager writes it: an object whose members are objects of
// the same shape, keys of printable ASCII without a quote, backslash, <, >
// or &, and no whitespace. It looks at each byte once. Such text is valid
// JSON, and encoding/json writes it as it is (json.Marshal of a
// json.RawMessage holding it returns it unchanged), so callers may copy it
// instead of validating or encoding it; for anything else it answers false.
func IsFieldsJSON(v []byte) bool {
	end, ok := fieldsObject(v, 0, 0)
	return ok && end == len(v)
}

// fieldsObject reads the object at v[i:] (see IsFieldsJSON) and returns the
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
