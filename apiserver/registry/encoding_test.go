package registry

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
)

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

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
