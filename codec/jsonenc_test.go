package codec

import (
	"bytes"
	"encoding/json"
	"testing"
)

var jsonEncCorpus = []any{
	nil, true, false, "", "plain", "quote\" back\\slash", "<tag> & amp", "\x00\x01\x1f\b\f\n\r\t\x7f",
	"bad utf8 \xff\xfe end", "line\u2028sep\u2029", "ünïcødé ✓ 😀", json.Number("12"), json.Number("-0.5e+10"),
	json.Number(""), int64(-42), 7, 1.5, []string{"typed"}, map[string]string{"b": "2", "a": "1"},
	map[string]any{}, []any{}, map[string]any(nil), []any(nil),
	map[string]any{"z": 1, "a": []any{"x", map[string]any{"k": nil, "<": "&"}}, "m": map[string]any{"b": true, "a": json.Number("3")}},
	// Raw JSON (a create's fieldsV1): as it is when encoding/json would
	// write it so, through encoding/json when not.
	json.RawMessage(`{"f:data":{".":{},"f:v":{}}}`), json.RawMessage(`{"a": [1, 2]}`), json.RawMessage(`{"<":"&"}`),
	json.RawMessage(`"line sep"`), json.RawMessage(`{"a":`), json.RawMessage(``), json.RawMessage(nil),
	map[string]any{"fieldsV1": json.RawMessage(`{"f:x":{}}`)},
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, v := range jsonEncCorpus {
		want, werr := json.Marshal(v)
		got, gerr := AppendJSON(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Errorf("AppendJSON(%#v) = %s, %v; encoding/json: %s, %v", v, got, gerr, want, werr)
		}
	}
	for _, bad := range []json.Number{"1.", "01", "+1", "1e", "abc", "-"} {
		if _, err := AppendJSON(nil, bad); err == nil {
			t.Errorf("AppendJSON(json.Number(%q)) accepted an invalid number", string(bad))
		}
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("encoding/json accepted json.Number(%q): the test's idea of invalid is wrong", string(bad))
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add(`{"a":"b","c":[1,2.5,"x",null,true,{"<":"\u2028"}]}`)
	f.Add(`"\ud800"`)
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return
		}
		want, werr := json.Marshal(v)
		got, gerr := AppendJSON(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON = %s, %v; encoding/json: %s, %v", got, gerr, want, werr)
		}
		// Raw strings too, invalid UTF-8 included.
		if got, want := AppendJSONString(nil, doc), mustMarshal(t, doc); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", doc, got, want)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
