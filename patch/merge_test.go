package patch

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/kapi-dev/kapi/codec"
)

// mergeCases are merge patches with the results the json-patch library
// gives them (kube-apiserver's merge patch).
var mergeCases = []struct{ doc, patch, want string }{
	{`{"a":1,"b":2}`, `{"a":null}`, `{"b":2}`},
	{`{"a":1}`, `{"b":null}`, `{"a":1}`},
	{`{"a":{"x":1,"y":2}}`, `{"a":{"x":null,"z":3}}`, `{"a":{"y":2,"z":3}}`},
	// Arrays and scalars replace.
	{`{"a":[1,2],"b":{"c":1}}`, `{"a":[3],"b":"s"}`, `{"a":[3],"b":"s"}`},
	// A new key, or one holding null or a non-object, takes the patch's
	// value with its nulls dropped, in the objects of its arrays too.
	{`{}`, `{"a":{"b":null,"c":{"d":null,"e":1}}}`, `{"a":{"c":{"e":1}}}`},
	{`{"a":null}`, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
	{`{"a":[1]}`, `{"a":{"b":null}}`, `{"a":{}}`},
	{`{"a":1}`, `{"a":[{"b":null,"c":[{"d":null}]},null]}`, `{"a":[{"c":[{}]},null]}`},
	// Onto an object, a non-object is taken as it is.
	{`{"a":{"b":1}}`, `{"a":[{"c":null}]}`, `{"a":[{"c":null}]}`},
	{`{"n":1.50,"m":1e3}`, `{"n":2.0}`, `{"n":2.0,"m":1e3}`},
}

func decodeOrFail(t *testing.T, s string) any {
	t.Helper()
	v, _, err := codec.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestMerge(t *testing.T) {
	for _, tc := range mergeCases {
		cur := decodeOrFail(t, tc.doc).(map[string]any)
		before := toJSON(t, cur)
		got, _, err := Merge(cur, []byte(tc.patch))
		if err != nil {
			t.Fatalf("%s + %s: %v", tc.doc, tc.patch, err)
		}
		if !reflect.DeepEqual(any(got), decodeOrFail(t, tc.want)) {
			t.Errorf("%s + %s = %s, want %s", tc.doc, tc.patch, toJSON(t, got), tc.want)
		}
		if toJSON(t, cur) != before {
			t.Errorf("%s + %s modified the object", tc.doc, tc.patch)
		}
		lib, err := jsonpatch.MergePatch([]byte(tc.doc), []byte(tc.patch))
		if err != nil || !reflect.DeepEqual(decodeOrFail(t, string(lib)), decodeOrFail(t, tc.want)) {
			t.Errorf("%s + %s: the library gives %s (%v), want %s", tc.doc, tc.patch, lib, err, tc.want)
		}
	}
}

// Merge reads typed values (a strategy hook's) as their JSON.
func TestMergeTypedValues(t *testing.T) {
	cur := map[string]any{"a": map[string]string{"x": "1"}, "n": int64(3), "l": []string{"p"}, "z": map[string]any(nil)}
	got, _, err := Merge(cur, []byte(`{"a":{"y":"2"},"z":{"k":null,"v":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := decodeOrFail(t, `{"a":{"x":"1","y":"2"},"n":3,"l":["p"],"z":{"v":1}}`)
	if !reflect.DeepEqual(any(got), want) {
		t.Fatalf("got %s", toJSON(t, got))
	}
	if _, _, err := Merge(map[string]any{"f": func() {}}, []byte(`{}`)); err == nil {
		t.Fatal("a value that is not JSON merged")
	}
}

func TestMergeErrors(t *testing.T) {
	for _, p := range []string{`[1]`, `null`, `"s"`, `{`, `{"a":1}x`} {
		_, _, err := Merge(map[string]any{}, []byte(p))
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != 400 {
			t.Errorf("patch %s: %v, want a 400", p, err)
		}
	}
	_, problems, err := Merge(map[string]any{}, []byte(`{"a":{"b":1,"b":2}}`))
	if err != nil || !reflect.DeepEqual(problems, []string{`duplicate field "a.b"`}) {
		t.Fatalf("duplicates: %q %v", problems, err)
	}
	for _, doc := range []string{`null`, `{`} {
		_, _, err := MergePatch([]byte(doc), []byte(`{}`))
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != 422 {
			t.Errorf("document %s: %v, want a 422", doc, err)
		}
	}
}

// FuzzMergeMatchesLibrary holds Merge and MergePatch to the json-patch
// library's MergePatch, on objects without duplicate keys (where the
// library's result depends on its key list).
func FuzzMergeMatchesLibrary(f *testing.F) {
	for _, tc := range mergeCases {
		f.Add([]byte(tc.doc), []byte(tc.patch))
	}
	f.Add([]byte(fuzzDoc), []byte(`{"spec":{"ports":[{"name":"x","port":null}],"labels":{"k":null,"n":{"m":null}},"extra":{"n":{"m":{"o":null}}}},"status":null}`))
	f.Fuzz(func(t *testing.T, doc, p []byte) {
		dv, ddups, err := codec.DecodeJSON(doc)
		if err != nil || len(ddups) > 0 {
			return
		}
		pv, pdups, err := codec.DecodeJSON(p)
		if err != nil || len(pdups) > 0 {
			return
		}
		dm, ok := dv.(map[string]any)
		if _, pok := pv.(map[string]any); !ok || !pok {
			return
		}
		lib, err := jsonpatch.MergePatch(doc, p)
		if err != nil {
			return // beyond the library's parser (depth)
		}
		want, _, err := codec.DecodeJSON(lib)
		if err != nil {
			t.Fatalf("library result %q: %v", lib, err)
		}
		got, _, err := Merge(dm, p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(any(got), want) {
			t.Fatalf("Merge gives %s, the library %s", toJSON(t, got), lib)
		}
		out, _, err := MergePatch(doc, p)
		if err != nil {
			t.Fatal(err)
		}
		if v, _, err := codec.DecodeJSON(out); err != nil || !reflect.DeepEqual(v, want) {
			t.Fatalf("MergePatch gives %s, the library %s", out, lib)
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %q", out)
		}
	})
}
