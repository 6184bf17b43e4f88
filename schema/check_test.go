package schema

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		errs   []string // substrings, one per expected error
	}{
		{"widget CRD", widgetCRD, nil},
		{"int-or-string", `{"type":"object","properties":{"p":{"x-kubernetes-int-or-string":true}}}`, nil},
		{"preserve without type", `{"type":"object","properties":{"p":{"x-kubernetes-preserve-unknown-fields":true}}}`, nil},
		{"missing type", `{"type":"object","properties":{"p":{"minLength":1}}}`,
			[]string{"properties[p].type: Required value: must not be empty for specified fields"}},
		{"unknown type", `{"type":"map"}`, []string{`type: Unsupported value: "map"`}},
		{"int-or-string with type", `{"type":"string","x-kubernetes-int-or-string":true}`,
			[]string{"type: Invalid value: \"string\": must be empty if x-kubernetes-int-or-string is true"}},
		{"array without items", `{"type":"array"}`, []string{"items: Required value"}},
		{"items on a string", `{"type":"string","items":{"type":"string"}}`, []string{"items: Forbidden"}},
		{"properties on an array", `{"type":"array","items":{"type":"string"},"properties":{"a":{"type":"string"}}}`, []string{"properties: Forbidden"}},
		{"properties and additionalProperties", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
			[]string{"additionalProperties: Forbidden: additionalProperties and properties are mutually exclusive"}},
		{"embedded resource not object", `{"type":"string","x-kubernetes-embedded-resource":true}`, []string{"must be object if x-kubernetes-embedded-resource is true"}},
		{"negative bounds", `{"type":"string","minLength":-1,"maxLength":-2}`, []string{"minLength: Invalid value: -1", "maxLength: Invalid value: -2"}},
		{"multipleOf", `{"type":"number","multipleOf":0}`, []string{"multipleOf: Invalid value: 0: must be greater than 0"}},
		{"bad pattern", `{"type":"string","pattern":"("}`, []string{`pattern: Invalid value: "(": invalid pattern`}},
		{"bad list type", `{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"bag"}`, []string{`x-kubernetes-list-type: Unsupported value: "bag"`}},
		{"list type on object", `{"type":"object","x-kubernetes-list-type":"set"}`, []string{"may only be set on arrays"}},
		{"map keys without map", `{"type":"array","items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"}}},"x-kubernetes-list-map-keys":["k"]}`,
			[]string{"must be map if x-kubernetes-list-map-keys is non-empty"}},
		{"map list without keys", `{"type":"array","items":{"type":"object"},"x-kubernetes-list-type":"map"}`,
			[]string{"x-kubernetes-list-map-keys: Required value"}},
		{"map list of strings", `{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"]}`,
			[]string{"items.type: Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map"}},
		{"map list key problems", `{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["a","b","c","d","a"],
			"items":{"type":"object","required":["a","c"],"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"object"},"d":{"type":"string","default":"x"}}}}`,
			[]string{"items.properties[b]: Required value: this property is in x-kubernetes-list-map-keys",
				`x-kubernetes-list-map-keys[2]: Invalid value: "c": must be a scalar property of the items`,
				`x-kubernetes-list-map-keys[4]: Duplicate value: "a"`}},
		{"map list unknown key", `{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["z"],"items":{"type":"object","properties":{"a":{"type":"string"}}}}`,
			[]string{`x-kubernetes-list-map-keys[0]: Invalid value: "z": entries must all be names of item properties`}},
		{"set of objects", `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"object"}}`,
			[]string{"must be atomic as item of a list with x-kubernetes-list-type=set"}},
		{"set of atomic objects", `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"object","x-kubernetes-map-type":"atomic"}}`, nil},
		{"bad map type", `{"type":"object","x-kubernetes-map-type":"x"}`, []string{`x-kubernetes-map-type: Unsupported value: "x"`}},
		{"map type on string", `{"type":"string","x-kubernetes-map-type":"atomic"}`, []string{"may only be set on objects"}},
		{"bad enum", `{"type":"integer","enum":[1,"two"]}`, []string{`enum[1]: Invalid value: "two": <root> in body must be of type integer: "string"`}},
		{"bad default", `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"default":0}}}`,
			[]string{"properties[n].default: Invalid value: 0: <root> in body should be greater than or equal to 1"}},
		{"default missing required", `{"type":"object","properties":{"o":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}},"default":{}}}}`,
			[]string{"properties[o].default: Invalid value: {}: a: Required value"}},
		{"default with unknown fields", `{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"}},"default":{"a":"x","b":"y"}}}}`,
			[]string{`properties[o].default: Invalid value: {"a":"x","b":"y"}: must not have unknown fields, found "b"`}},
		{"nested errors are all reported", `{"type":"object","properties":{"a":{"type":"array"},"b":{"type":"bogus"}}}`,
			[]string{"properties[a].items: Required value", `properties[b].type: Unsupported value: "bogus"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(mustParse(t, tt.schema))
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed, want %q", tt.errs)
			}
			msg := err.Error()
			for _, want := range tt.errs {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q\ndoes not contain %q", msg, want)
				}
			}
			if n := strings.Count(msg, ": ") - 1; len(tt.errs) == 1 && strings.HasPrefix(msg, "schema: invalid structural schema: [") {
				t.Errorf("want one error, got several (%d separators): %s", n, msg)
			}
		})
	}
	if Check(nil) == nil {
		t.Error("Check(nil) should fail")
	}
}
