package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

func errorStrings(l meta.ErrorList) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateWidget(t *testing.T) {
	s := mustParse(t, widgetCRD)
	tests := []struct {
		name string
		obj  string
		want []string
	}{
		{"valid", `{"spec":{"size":3,"color":"red","tags":["a","b"],"ports":[{"name":"http","port":80},{"name":"https","port":443}]},"status":{"replicas":1}}`, nil},
		{"minimal", `{"spec":{"size":0}}`, nil},
		{"unknown fields are not errors", `{"spec":{"size":0,"bogus":1},"bogus":{}}`, nil},
		{"missing spec", `{}`, []string{"spec: Required value"}},
		{"missing size", `{"spec":{}}`, []string{"spec.size: Required value"}},
		{"negative size", `{"spec":{"size":-1}}`,
			[]string{"spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0"}},
		{"string size", `{"spec":{"size":"string"}}`,
			[]string{`spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`}},
		{"string size with another value", `{"spec":{"size":"ten"}}`,
			[]string{`spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`}},
		{"fractional size", `{"spec":{"size":1.5}}`,
			[]string{`spec.size: Invalid value: "number": spec.size in body must be of type integer: "number"`}},
		{"integral float size", `{"spec":{"size":2.0}}`, nil},
		{"exponent size", `{"spec":{"size":1e3}}`, nil},
		{"huge integer size", `{"spec":{"size":123456789012345678901234567890}}`,
			[]string{`spec.size: Invalid value: "number": spec.size in body must be of type integer: "number"`}},
		{"boolean size", `{"spec":{"size":true}}`,
			[]string{`spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean"`}},
		{"null size", `{"spec":{"size":null}}`,
			[]string{`spec.size: Invalid value: "null": spec.size in body must be of type integer: "null"`}},
		{"object spec", `{"spec":[]}`,
			[]string{`spec: Invalid value: "array": spec in body must be of type object: "array"`}},
		{"bad color", `{"spec":{"size":1,"color":"pink"}}`,
			[]string{`spec.color: Unsupported value: "pink": supported values: "red", "blue"`}},
		{"duplicate tag", `{"spec":{"size":1,"tags":["a","b","a","a","b"]}}`,
			[]string{`spec.tags[2]: Duplicate value: "a"`, `spec.tags[4]: Duplicate value: "b"`}},
		{"tag type", `{"spec":{"size":1,"tags":["a",1]}}`,
			[]string{`spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"`}},
		{"duplicate port", `{"spec":{"size":1,"ports":[{"name":"a","port":1},{"name":"b","port":2},{"name":"a","port":3}]}}`,
			[]string{`spec.ports[2]: Duplicate value: {"name":"a","port":3}`}},
		{"port item errors", `{"spec":{"size":1,"ports":[{"port":"x"}]}}`,
			[]string{"spec.ports[0].name: Required value",
				`spec.ports[0].port: Invalid value: "string": spec.ports[0].port in body must be of type integer: "string"`}},
		{"port not an object", `{"spec":{"size":1,"ports":["a"]}}`,
			[]string{`spec.ports[0]: Invalid value: "string": spec.ports[0] in body must be of type object: "string"`,
				`spec.ports[0]: Invalid value: "a": must be an object for an array of list-type map`}},
		{"several errors", `{"spec":{"size":-5,"color":"green","replicas":"x"},"status":{"phase":1}}`,
			[]string{
				`spec.color: Unsupported value: "green": supported values: "red", "blue"`,
				`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
				"spec.size: Invalid value: -5: spec.size in body should be greater than or equal to 0",
				`status.phase: Invalid value: "integer": status.phase in body must be of type string: "integer"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorStrings(Validate(decodeJSON(t, tt.obj), s))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestValidateKeywords(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  any
		want   []string
	}{
		{"max ok", `{"type":"integer","maximum":10}`, json.Number("10"), nil},
		{"max", `{"type":"integer","maximum":10}`, json.Number("11"),
			[]string{": Invalid value: 11: <root> in body should be less than or equal to 10"}},
		{"exclusive max", `{"type":"number","maximum":10,"exclusiveMaximum":true}`, 10.0,
			[]string{": Invalid value: 10: <root> in body should be less than 10"}},
		{"exclusive min", `{"type":"number","minimum":0.5,"exclusiveMinimum":true}`, int64(0),
			[]string{": Invalid value: 0: <root> in body should be greater than 0.5"}},
		{"multipleOf", `{"type":"integer","multipleOf":3}`, int64(7),
			[]string{": Invalid value: 7: <root> in body should be a multiple of 3"}},
		{"multipleOf ok", `{"type":"number","multipleOf":0.5}`, 2.5, nil},
		{"number accepts integers", `{"type":"number"}`, int64(3), nil},
		{"number accepts go ints", `{"type":"number"}`, 3, nil},
		{"integer accepts go ints", `{"type":"integer"}`, uint16(3), nil},
		{"maxLength", `{"type":"string","maxLength":3}`, "abcd",
			[]string{": Too long: may not be more than 3 bytes"}},
		{"maxLength counts runes", `{"type":"string","maxLength":3}`, "äöü", nil},
		{"minLength", `{"type":"string","minLength":2}`, "a",
			[]string{`: Invalid value: "a": <root> in body should be at least 2 chars long`}},
		{"pattern", `{"type":"string","pattern":"^[a-z]+$"}`, "A1",
			[]string{`: Invalid value: "A1": <root> in body should match '^[a-z]+$'`}},
		{"enum numbers", `{"type":"integer","enum":[1,2]}`, 2.0, nil},
		{"enum numbers bad", `{"type":"integer","enum":[1,2]}`, json.Number("3"),
			[]string{`: Unsupported value: 3: supported values: "1", "2"`}},
		{"maxItems", `{"type":"array","items":{"type":"string"},"maxItems":1}`, []any{"a", "b"},
			[]string{": Too many: 2: must have at most 1 item"}},
		{"minItems", `{"type":"array","items":{"type":"string"},"minItems":1}`, []any{},
			[]string{": Invalid value: 0: <root> in body should have at least 1 items"}},
		{"maxProperties", `{"type":"object","additionalProperties":{"type":"string"},"maxProperties":1}`, map[string]any{"a": "x", "b": "y"},
			[]string{": Too many: 2: must have at most 1 item"}},
		{"minProperties", `{"type":"object","minProperties":1}`, map[string]any{},
			[]string{": Invalid value: 0: <root> in body should have at least 1 properties"}},
		{"additionalProperties", `{"type":"object","additionalProperties":{"type":"integer"}}`, map[string]any{"b": "x", "a": int64(1)},
			[]string{`[b]: Invalid value: "string": [b] in body must be of type integer: "string"`}},
		{"additionalProperties false", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, map[string]any{"a": "x", "b": "y"},
			[]string{"b: Forbidden: <root>.b in body is a forbidden property"}},
		{"nullable", `{"type":"string","nullable":true}`, nil, nil},
		{"untyped accepts null", `{"x-kubernetes-preserve-unknown-fields":true}`, nil, nil},
		{"int-or-string int", `{"x-kubernetes-int-or-string":true}`, json.Number("80"), nil},
		{"int-or-string string", `{"x-kubernetes-int-or-string":true}`, "http", nil},
		{"int-or-string float", `{"x-kubernetes-int-or-string":true}`, 1.5,
			[]string{`: Invalid value: "number": <root> in body must be of type integer or string: "number"`}},
		{"int-or-string null", `{"x-kubernetes-int-or-string":true}`, nil,
			[]string{`: Invalid value: "null": <root> in body must be of type integer or string: "null"`}},
		{"int-or-string pattern", `{"x-kubernetes-int-or-string":true,"pattern":"^[0-9]+%$"}`, "5", // strings get string checks
			[]string{`: Invalid value: "5": <root> in body should match '^[0-9]+%$'`}},
		{"preserve unknown any value", `{"x-kubernetes-preserve-unknown-fields":true}`, []any{map[string]any{"x": true}}, nil},
		{"not JSON", `{"type":"string"}`, struct{}{},
			[]string{`: Invalid value: "struct {}": <root> in body must be of type string: "struct {}"`}},
		{"date-time", `{"type":"string","format":"date-time"}`, "2024-01-02T03:04:05Z", nil},
		{"date-time nano", `{"type":"string","format":"date-time"}`, "2024-01-02T03:04:05.123+02:00", nil},
		{"date-time bad", `{"type":"string","format":"date-time"}`, "yesterday",
			[]string{`: Invalid value: "yesterday": <root> in body must be of type date-time: "yesterday"`}},
		{"date", `{"type":"string","format":"date"}`, "2024-02-30",
			[]string{`: Invalid value: "2024-02-30": <root> in body must be of type date: "2024-02-30"`}},
		{"byte", `{"type":"string","format":"byte"}`, "aGVsbG8=", nil},
		{"byte bad", `{"type":"string","format":"byte"}`, "!!",
			[]string{`: Invalid value: "!!": <root> in body must be of type byte: "!!"`}},
		{"uuid", `{"type":"string","format":"uuid"}`, "123e4567-e89b-12d3-a456-426614174000", nil},
		{"uuid bad", `{"type":"string","format":"uuid"}`, "123", []string{`: Invalid value: "123": <root> in body must be of type uuid: "123"`}},
		{"ipv4", `{"type":"string","format":"ipv4"}`, "10.0.0.1", nil},
		{"ipv4 bad", `{"type":"string","format":"ipv4"}`, "::1", []string{`: Invalid value: "::1": <root> in body must be of type ipv4: "::1"`}},
		{"ipv6", `{"type":"string","format":"ipv6"}`, "::1", nil},
		{"cidr", `{"type":"string","format":"cidr"}`, "10.0.0.0/8", nil},
		{"hostname", `{"type":"string","format":"hostname"}`, "a.example.com", nil},
		{"hostname bad", `{"type":"string","format":"hostname"}`, "-a", []string{`: Invalid value: "-a": <root> in body must be of type hostname: "-a"`}},
		{"duration", `{"type":"string","format":"duration"}`, "1h30m", nil},
		{"unknown format", `{"type":"string","format":"whatever"}`, "x", nil},
		{"int32 format on integer", `{"type":"integer","format":"int32"}`, json.Number("5"), nil},
		{"set of objects", `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"object","x-kubernetes-map-type":"atomic","x-kubernetes-preserve-unknown-fields":true}}`,
			[]any{map[string]any{"a": json.Number("1")}, map[string]any{"a": 1.0}},
			[]string{`[1]: Duplicate value: {"a":1}`}},
		{"set of numbers", `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"number"}}`,
			[]any{json.Number("1"), json.Number("1.0"), json.Number("2")},
			[]string{`[1]: Duplicate value: 1.0`}},
		{"map list multiple keys", `{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["port","protocol"],"items":{"type":"object","required":["port"],"properties":{"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}}`,
			[]any{
				map[string]any{"port": json.Number("80")},
				map[string]any{"port": json.Number("80"), "protocol": "UDP"},
				map[string]any{"port": json.Number("80"), "protocol": "TCP"},
			},
			[]string{`[2]: Duplicate value: {"port":80,"protocol":"TCP"}`}},
		{"map list null item", `{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"items":{"type":"object","nullable":true,"properties":{"k":{"type":"string"}}}}`,
			[]any{nil, map[string]any{"k": "a"}}, nil},
		{"embedded resource", `{"type":"object","properties":{"tpl":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}}}`,
			map[string]any{"tpl": map[string]any{"kind": 1, "apiVersion": "a/b/c", "metadata": "x"}},
			[]string{
				`tpl.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`,
				"tpl.kind: Invalid value: 1: must be a string",
				`tpl.metadata: Invalid value: "string": tpl.metadata in body must be of type object: "string"`,
			}},
		{"embedded resource missing", `{"type":"object","properties":{"tpl":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}}}`,
			map[string]any{"tpl": map[string]any{"kind": ""}},
			[]string{"tpl.apiVersion: Required value: must not be empty", `tpl.kind: Invalid value: "": must not be empty`}},
		{"root embedded resource is not checked", `{"type":"object","x-kubernetes-embedded-resource":true}`, map[string]any{}, nil},
		{"nil schema", `null`, "anything", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *Schema
			if tt.schema != "null" {
				s = mustParse(t, tt.schema)
			}
			got := errorStrings(Validate(tt.value, s))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestValidateCauseTypes(t *testing.T) {
	s := mustParse(t, widgetCRD)
	errs := Validate(decodeJSON(t, `{"spec":{"size":"x","color":"pink","tags":["a","a"]}}`), s)
	want := map[string]meta.CauseType{
		"spec.size":    meta.CauseTypeTypeInvalid,
		"spec.color":   meta.CauseTypeFieldValueNotSupported,
		"spec.tags[1]": meta.CauseTypeFieldValueDuplicate,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors: %v", errs)
	}
	for _, e := range errs {
		if want[e.Field] != e.Type {
			t.Errorf("%s: type %s, want %s", e.Field, e.Type, want[e.Field])
		}
	}
	if errs := Validate(decodeJSON(t, `{}`), s); len(errs) != 1 || errs[0].Type != meta.CauseTypeFieldValueRequired {
		t.Errorf("required: %v", errs)
	}
}

// TestValidateUpdateRatchets: an update is not refused for what it leaves
// unchanged, down to the correlated elements of set and map lists, and is
// for what it changes.
func TestValidateUpdateRatchets(t *testing.T) {
	s := mustParse(t, `{"type":"object","required":["size"],"properties":{
		"name":{"type":"string","maxLength":3},
		"color":{"type":"string","enum":["red","blue"]},
		"size":{"type":"integer"},
		"ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
			"items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer","maximum":100}}}},
		"tags":{"type":"array","items":{"type":"string","maxLength":2}},
		"labels":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string","maxLength":2}}}}`)
	old := decodeJSON(t, `{"size":1,"name":"toolong","color":"red","ports":[{"name":"a","port":500},{"name":"b","port":1}],"tags":["abc"],"labels":["abc"]}`)
	for _, tc := range []struct{ obj, want string }{
		{`{"size":1,"name":"toolong","color":"blue","ports":[{"name":"b","port":2},{"name":"a","port":500}],"tags":["abc"],"labels":["abc"]}`, ``},
		// Set elements are not correlated (as in Kubernetes): a changed set
		// is checked whole.
		{`{"size":1,"name":"toolong","color":"red","ports":[{"name":"a","port":500},{"name":"b","port":1}],"tags":["abc"],"labels":["abc","x"]}`,
			`labels[0]: Too long: may not be more than 2 bytes`},
		{`{"size":1,"name":"toolong!","color":"blue","ports":[{"name":"a","port":500}],"tags":["abc"]}`,
			`name: Too long: may not be more than 3 bytes`},
		{`{"name":"toolong","color":"green","ports":[{"name":"a","port":501}],"tags":["abc","x"]}`,
			`size: Required value; color: Unsupported value: "green": supported values: "red", "blue"; ports[0].port: Invalid value: 501: ports[0].port in body should be less than or equal to 100; tags[0]: Too long: may not be more than 2 bytes`},
	} {
		got := strings.Join(errorStrings(ValidateUpdate(decodeJSON(t, tc.obj), old, s)), "; ")
		if got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.obj, got, tc.want)
		}
	}
}
