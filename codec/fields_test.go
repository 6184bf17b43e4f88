package codec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzIsFieldsJSON holds IsFieldsJSON to encoding/json: what it accepts
// must be valid JSON that encoding/json writes as it is.
func FuzzIsFieldsJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"f:data":{".":{},"f:v":{}}}`, `{"a":{"b":{}},"c":{}}`, `{"a":{}`, `{"<":{}}`, `{"a" :{}}`,
		`{"k:{\"name\":\"a\"}":{".":{}}}`, `{"\u00e9":{}}`, "{\"\xc3\xa9\":{}}", "{\"\xff\":{}}", "{\"a\u2028\":{}}", `{"a":{"b":{"c":{"d":{}}}}}`,
		`{"a":{},"a":{}}`, `{"a":{}}}`, `{"\x7f":{}}`, `{"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !IsFieldsJSON(raw) {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("IsFieldsJSON(%q) but it is not valid JSON", raw)
		}
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil || !bytes.Equal(want, raw) {
			t.Fatalf("IsFieldsJSON(%q) but encoding/json writes %q, %v", raw, want, err)
		}
	})
}
