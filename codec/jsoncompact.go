package codec

import (
	"bytes"
	"encoding/json"
)

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
