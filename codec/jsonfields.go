package codec

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
