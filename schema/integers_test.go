package schema

import (
	"encoding/json"
	"testing"

	"github.com/kapi-dev/kapi/codec"
)

// Normalize rewrites integral integers written as floats in integer and
// int-or-string fields, wherever they are, and nothing else.
func TestNormalizeIntegers(t *testing.T) {
	s := mustParse(t, fuzzSchema)
	obj, _, err := codec.DecodeJSON([]byte(`{"metadata":{"generation":2.0},"spec":{"size":1e2,"port":8.0e1,"ratio":1.5e1,"color":"1e2",
		"ports":[{"name":"a","n":-0},{"name":"b","n":2.50E1},{"name":"c","n":7},{"name":"d","n":1.5},{"name":"e","n":1e18}],
		"free":{"x":1e2,"known":{"a":true}},"any":{"k":2.0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	norm := Normalize(obj, s)
	want := []struct{ path, written string }{
		{"metadata.generation", "2.0"}, {"spec.port", "8.0e1"}, {"spec.ports[0].n", "-0"}, {"spec.ports[1].n", "2.50E1"}, {"spec.size", "1e2"},
	}
	if len(norm.Integers) != len(want) {
		t.Fatalf("rewrites %+v, want %v", norm.Integers, want)
	}
	for i, w := range want {
		if r := norm.Integers[i]; r.Path != w.path || string(r.Written) != w.written || r.Float() != (w.written != "-0") {
			t.Errorf("rewrite %d = %+v, want %v", i, r, w)
		}
	}
	got, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	const stored = `{"metadata":{"generation":2},"spec":{"any":{"k":2.0},"color":"1e2","free":{"known":{"a":true},"x":1e2},"port":80,` +
		`"ports":[{"n":0,"name":"a"},{"n":25,"name":"b"},{"n":7,"name":"c"},{"n":1.5,"name":"d"},{"n":1e18,"name":"e"}],"ratio":1.5e1,"size":100}}`
	if string(got) != stored {
		t.Errorf("normalized\n got %s\nwant %s", got, stored)
	}
	// Prune alone leaves numbers as they are.
	obj, _, _ = codec.DecodeJSON([]byte(`{"spec":{"size":1e2}}`))
	if Prune(obj, s); obj.(map[string]any)["spec"].(map[string]any)["size"] != json.Number("1e2") {
		t.Errorf("Prune rewrote an integer: %v", obj)
	}
}
