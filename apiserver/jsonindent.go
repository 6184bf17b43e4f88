package apiserver

import "io"

// indentWriter indents the JSON written to it as it comes, byte for byte as
// json.Indent(dst, src, "", "  ") indents the whole document, so that a
// pretty-printed list is streamed instead of built in memory. It assumes
// valid JSON (what the list sinks write); whitespace outside strings is
// dropped and re-made, as json.Indent does.
type indentWriter struct {
	w          io.Writer
	buf        []byte
	depth      int
	inString   bool
	escaped    bool // the previous byte in the string was a backslash
	needIndent bool // after '{' or '[': indent unless it closes at once
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	b := iw.buf[:0]
	for i := 0; i < len(p); i++ {
		c := p[i]
		if iw.inString {
			// Copy the run of plain string bytes at once.
			j := i
			for j < len(p) && !iw.escaped && p[j] != '"' && p[j] != '\\' {
				j++
			}
			if j > i {
				b = append(b, p[i:j]...)
				i = j - 1
				continue
			}
			b = append(b, c)
			switch {
			case iw.escaped:
				iw.escaped = false
			case c == '\\':
				iw.escaped = true
			case c == '"':
				iw.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if iw.needIndent && c != '}' && c != ']' {
			iw.needIndent = false
			iw.depth++
			b = appendIndentLine(b, iw.depth)
		}
		switch c {
		case '"':
			iw.inString = true
			b = append(b, c)
		case '{', '[':
			iw.needIndent = true
			b = append(b, c)
		case ',':
			b = appendIndentLine(append(b, c), iw.depth)
		case ':':
			b = append(b, c, ' ')
		case '}', ']':
			if iw.needIndent {
				iw.needIndent = false // an empty object or array stays {} or []
			} else {
				iw.depth--
				b = appendIndentLine(b, iw.depth)
			}
			b = append(b, c)
		default:
			b = append(b, c)
		}
	}
	iw.buf = b
	if len(b) == 0 {
		return len(p), nil
	}
	if _, err := iw.w.Write(b); err != nil {
		return 0, err
	}
	if cap(iw.buf) > 256<<10 {
		iw.buf = nil // give back the memory of a huge item
	}
	return len(p), nil
}

func appendIndentLine(b []byte, depth int) []byte {
	b = append(b, '\n')
	for range depth {
		b = append(b, ' ', ' ')
	}
	return b
}
