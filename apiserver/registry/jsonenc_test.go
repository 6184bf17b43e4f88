package registry

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/kapi-dev/kapi/codec"
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
		got, gerr := appendJSON(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%#v) = %s, %v; encoding/json: %s, %v", v, got, gerr, want, werr)
		}
	}
	for _, bad := range []json.Number{"1.", "01", "+1", "1e", "abc", "-"} {
		if _, err := appendJSON(nil, bad); err == nil {
			t.Errorf("appendJSON(json.Number(%q)) accepted an invalid number", string(bad))
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
		got, gerr := appendJSON(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("appendJSON = %s, %v; encoding/json: %s, %v", got, gerr, want, werr)
		}
		// Raw strings too, invalid UTF-8 included.
		if got, want := codec.AppendJSONString(nil, doc), mustMarshal(t, doc); !bytes.Equal(got, want) {
			t.Fatalf("codec.AppendJSONString(%q) = %s, want %s", doc, got, want)
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

func FuzzConfigMapKey(f *testing.F) {
	re := regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	for _, s := range []string{"", "a", "key.name", "KEY_NAME", "key-name", "a/b", "é", "a b", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isConfigMapKey(s), re.MatchString(s); got != want {
			t.Errorf("isConfigMapKey(%q) = %v, the regular expression says %v", s, got, want)
		}
	})
}

// encodeStored lays an object out as parseStored and appendJSON read it:
// type fields, metadata without resourceVersion, the rest in key order,
// each value as encoding/json encodes it; the object is left as it was.
func TestEncodeStoredLayout(t *testing.T) {
	for _, tc := range []struct {
		obj  Object
		want string
	}{
		{Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "resourceVersion": "7", "uid": "u<"},
			"data": map[string]any{"b": "2", "a": "1"}, "binaryData": nil},
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u\u003c"},"binaryData":null,"data":{"a":"1","b":"2"}}`},
		{Object{"metadata": map[string]any{"name": "a"}},
			`{"metadata":{"name":"a"}}`},
		{Object{"kind": "X", "metadata": map[string]any{"name": "a"}, "spec": []any{json.Number("1")}},
			`{"kind":"X","metadata":{"name":"a"},"spec":[1]}`},
	} {
		before := mustMarshal(t, tc.obj)
		enc, err := encodeStored(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		so, err := parseStored(enc)
		if err != nil {
			t.Fatal(err)
		}
		if string(so.json) != tc.want {
			t.Errorf("stored %s, want %s", so.json, tc.want)
		}
		if got := string(so.objectJSON(42)); !bytes.Contains([]byte(got), []byte(`"metadata":{"resourceVersion":"42",`)) {
			t.Errorf("read back %s: the resourceVersion is not spliced into metadata", got)
		}
		if after := mustMarshal(t, tc.obj); !bytes.Equal(before, after) {
			t.Errorf("encodeStored changed the object: %s -> %s", before, after)
		}
	}
	for _, bad := range []Object{{"kind": "X"}, {"metadata": map[string]any{}}, {"metadata": map[string]any{"resourceVersion": "1"}}} {
		if _, err := encodeStored(bad); err == nil {
			t.Errorf("encodeStored(%v) accepted an object without metadata", bad)
		}
	}
}
