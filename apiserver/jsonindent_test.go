package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzIndentWriter: any valid JSON written to an indentWriter in any pieces
// comes out as json.Indent(src, "", "  ") makes it (but for the source's
// trailing whitespace, which json.Indent copies and lists never have).
func FuzzIndentWriter(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[]}`, `{"a":{},"b":[1,2,{"c":null}]}`,
		`{"kind":"List","items":[{"s":"a \"quoted\" \\ string: {with} [brackets], commas"}]}`,
		` { "spaced" : [ 1 , 2 ] } `, `"just a string"`, `12.5e3`, `[true,false,null]`,
		`{"u":"\u00e9\u2713","e":"\n\t"}`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, src []byte, step uint8) {
		if !json.Valid(src) {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, src, "", "  "); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		iw := &indentWriter{w: &got}
		n := int(step)%7 + 1
		for p := src; len(p) > 0; {
			k := min(n, len(p))
			if _, err := iw.Write(p[:k]); err != nil {
				t.Fatal(err)
			}
			p = p[k:]
		}
		if !bytes.Equal(got.Bytes(), bytes.TrimSpace(want.Bytes())) && !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("indented %q:\n got %q\nwant %q", src, got.Bytes(), want.Bytes())
		}
	})
}
