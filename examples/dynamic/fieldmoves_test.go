package main

import (
	"encoding/json"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

func TestMoveFields(t *testing.T) {
	moves := func(pairs ...string) []fieldMove {
		var out []fieldMove
		for i := 0; i+1 < len(pairs); i += 2 {
			p, _ := splitPath(pairs[i])
			h, _ := splitPath(pairs[i+1])
			out = append(out, fieldMove{path: p, hubPath: h})
		}
		return out
	}
	for _, c := range []struct {
		name      string
		moves     []fieldMove
		toHub     bool
		in, want  string
		wantError string
	}{
		{"to the hub, emptied objects removed", moves("spec.paint.color", "spec.color"), true,
			`{"spec":{"size":1,"paint":{"color":"red"}}}`, `{"spec":{"color":"red","size":1}}`, ""},
		{"to the hub, other fields stay", moves("spec.paint.color", "spec.color"), true,
			`{"spec":{"paint":{"color":"red","finish":"matte"}}}`, `{"spec":{"color":"red","paint":{"finish":"matte"}}}`, ""},
		{"from the hub, objects added", moves("spec.paint.color", "spec.color"), false,
			`{"spec":{"color":"red"}}`, `{"spec":{"paint":{"color":"red"}}}`, ""},
		{"an absent field is not moved", moves("spec.paint.color", "spec.color"), false,
			`{"spec":{"size":1}}`, `{"spec":{"size":1}}`, ""},
		{"a null is moved", moves("spec.paint.color", "spec.color"), true,
			`{"spec":{"paint":{"color":null}}}`, `{"spec":{"color":null}}`, ""},
		{"a null on the way is replaced", moves("spec.paint.color", "spec.color"), false,
			`{"spec":{"color":"red","paint":null}}`, `{"spec":{"paint":{"color":"red"}}}`, ""},
		{"a scalar on the way from: nothing moved", moves("spec.paint.color", "spec.color"), true,
			`{"spec":{"paint":"red"}}`, `{"spec":{"paint":"red"}}`, ""},
		{"a swap", moves("spec.a", "spec.b", "spec.b", "spec.a"), true,
			`{"spec":{"a":1,"b":2}}`, `{"spec":{"a":2,"b":1}}`, ""},
		{"a whole object", moves("spec.paint", "style"), true,
			`{"spec":{"paint":{"color":"red"}}}`, `{"style":{"color":"red"}}`, ""},
		{"a scalar on the way to", moves("spec.paint.color", "spec.color"), false,
			`{"spec":{"color":"red","paint":"glossy"}}`, "",
			"cannot move a field to spec.paint.color: spec.paint is not an object"},
	} {
		var obj registry.Object
		if err := json.Unmarshal([]byte(c.in), &obj); err != nil {
			t.Fatal(err)
		}
		out, err := moveFields(obj, c.moves, c.toHub)
		if c.wantError != "" {
			if err == nil || err.Error() != c.wantError {
				t.Errorf("%s: error %v, want %q", c.name, err, c.wantError)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got, _ := json.Marshal(out); string(got) != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
