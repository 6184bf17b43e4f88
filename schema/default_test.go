package schema

import (
	"encoding/json"
	"testing"
)

func TestDefault(t *testing.T) {
	s := mustParse(t, `{
	  "type": "object",
	  "properties": {
	    "spec": {
	      "type": "object",
	      "properties": {
	        "size": {"type": "integer", "default": 3},
	        "color": {"type": "string", "default": "red"},
	        "opt": {"type": "string", "nullable": true, "default": "x"},
	        "plain": {"type": "string"},
	        "nested": {"type": "object", "default": {}, "properties": {"a": {"type": "string", "default": "A"}}},
	        "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
	        "list": {"type": "array", "items": {"type": "string", "default": "item"}},
	        "nlist": {"type": "array", "items": {"type": "string", "nullable": true, "default": "item"}},
	        "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer", "default": 1}}}},
	        "dmap": {"type": "object", "additionalProperties": {"type": "string", "default": "d"}},
	        "shared": {"type": "object", "default": {"k": ["v"]}, "x-kubernetes-preserve-unknown-fields": true}
	      }
	    },
	    "status": {"type": "object", "properties": {"phase": {"type": "string", "default": "Pending"}}}
	  }
	}`)
	tests := []struct {
		name string
		obj  string
		want string
	}{
		{"absent fields get defaults; absent parents are not created",
			`{"spec":{}}`,
			`{"spec":{"size":3,"color":"red","opt":"x","nested":{"a":"A"},"shared":{"k":["v"]}}}`},
		{"present values are kept",
			`{"spec":{"size":5,"color":"","opt":"y","nested":{"a":"z"},"shared":{}}}`,
			`{"spec":{"size":5,"color":"","opt":"y","nested":{"a":"z"},"shared":{}}}`},
		{"nulls: defaulted when not nullable, kept when nullable, dropped without default",
			`{"spec":{"size":null,"opt":null,"plain":null,"nested":null,"shared":{}}}`,
			`{"spec":{"size":3,"color":"red","opt":null,"nested":{"a":"A"},"shared":{}}}`},
		{"array items and additionalProperties",
			`{"spec":{"ports":[{},{"protocol":"UDP"}],"list":["a",null],"nlist":[null],"labels":{"x":{},"y":{"v":2}},"dmap":{"a":null,"b":"b"},"shared":{}},"status":{}}`,
			`{"spec":{"size":3,"color":"red","opt":"x","nested":{"a":"A"},"ports":[{"protocol":"TCP"},{"protocol":"UDP"}],"list":["a","item"],"nlist":[null],"labels":{"x":{"v":1},"y":{"v":2}},"dmap":{"a":"d","b":"b"},"shared":{}},"status":{"phase":"Pending"}}`},
		{"null map value without default is dropped",
			`{"spec":{"labels":{"x":null},"shared":{}}}`,
			`{"spec":{"size":3,"color":"red","opt":"x","nested":{"a":"A"},"labels":{},"shared":{}}}`},
		{"type mismatch is left alone",
			`{"spec":"x"}`,
			`{"spec":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := decodeJSON(t, tt.obj)
			Default(obj, s)
			got, _ := json.Marshal(obj)
			if want := canonical(t, []byte(tt.want)); string(got) != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}

	// Defaults are deep-copied: changing a defaulted value leaves the schema
	// and other objects alone.
	a, b := decodeJSON(t, `{"spec":{}}`), decodeJSON(t, `{"spec":{}}`)
	Default(a, s)
	Default(b, s)
	a.(map[string]any)["spec"].(map[string]any)["shared"].(map[string]any)["k"].([]any)[0] = "changed"
	if b.(map[string]any)["spec"].(map[string]any)["shared"].(map[string]any)["k"].([]any)[0] != "v" {
		t.Error("defaults are shared between objects")
	}
	if s.Lookup("spec", "shared").Default.(map[string]any)["k"].([]any)[0] != "v" {
		t.Error("defaulting changed the schema")
	}
	// Numbers from a JSON schema stay json.Number.
	if got := b.(map[string]any)["spec"].(map[string]any)["size"]; got != json.Number("3") {
		t.Errorf("defaulted size = %#v", got)
	}
	Default(map[string]any{}, nil) // nil schema: no panic
}
