package schema

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// fuzzSchema exercises every keyword Validate, Prune and Default handle.
const fuzzSchema = `{
  "type": "object",
  "required": ["spec"],
  "properties": {
    "spec": {
      "type": "object",
      "required": ["size"],
      "properties": {
        "size": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
        "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "multipleOf": 0.25},
        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 1, "maxLength": 8, "nullable": true},
        "when": {"type": "string", "format": "date-time"},
        "port": {"x-kubernetes-int-or-string": true},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 4, "items": {"type": "string", "default": "t"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "proto"], "minItems": 1,
          "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "proto": {"type": "string", "default": "TCP"}, "n": {"type": "integer"}}}},
        "labels": {"type": "object", "maxProperties": 3, "additionalProperties": {"type": "string", "default": "v"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {"a": {"type": "boolean"}}}}},
        "any": {"type": "object", "additionalProperties": true},
        "tpl": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
        "nested": {"type": "array", "items": {"type": "array", "items": {"type": "object", "default": {}, "properties": {"d": {"type": "string", "default": "D"}}}}}
      }
    },
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
  }
}`

func FuzzValidatePrune(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"spec":{"size":3}}`,
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"a","bogus":1,"ownerReferences":[{"x":1}]},"spec":{"size":-1,"bogus":{}}}`,
		`{"spec":{"size":"x","ratio":0.3,"color":"pink","name":"ABC","when":"now","port":1.5,"tags":["a","a",1],"ports":[{"name":"a"},{"name":"a","proto":"TCP"},"x"]}}`,
		`{"spec":{"labels":{"a":null,"b":1},"free":{"x":[{"y":1}],"known":{"a":true,"b":2}},"any":{"k":[1,2]},"tpl":{"apiVersion":1,"kind":"K","metadata":{"junk":1},"spec":{"x":"y","z":1},"w":1}}}`,
		`{"spec":{"nested":[[null,{}],[],null],"size":null,"name":null},"status":[]}`,
		`{"spec":[],"status":{"phase":{"a":1}}}`,
		`{"spec":{"size":1e400}}`,
		`{"spec":{"size":12345678901234567890123}}`,
		`{"spec":{"size":1e2,"port":8.0e1,"ratio":1.5e1,"ports":[{"name":"a","n":-0},{"name":"b","n":2.50E1}],"free":{"x":1e2}}}`,
		`{"spec":{"size":1e18,"port":"8e1","ports":[{"name":"a","n":1.5}]}}`,
		`[1,2,3]`, `"str"`, `null`, `7`,
	} {
		f.Add([]byte(seed))
	}
	s := mustParse(f, fuzzSchema)
	if err := Check(s); err != nil {
		f.Fatalf("fuzz schema: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var obj any
		if err := d.Decode(&obj); err != nil {
			return
		}
		before := len(Validate(obj, s))

		norm := Normalize(obj, s)
		for _, r := range norm.Integers {
			if !meta.DeepEqual(r.Written, lookup(t, obj, r.Path)) {
				t.Fatalf("rewrite %s of %s changed the value to %v", r.Path, r.Written, lookup(t, obj, r.Path))
			}
		}
		pruned := meta.DeepCopy(obj)
		if again := Normalize(obj, s); again.Unknown != nil || again.Integers != nil {
			t.Fatalf("second Normalize dropped %q, rewrote %v", again.Unknown, again.Integers)
		}
		if !meta.DeepEqual(obj, pruned) {
			t.Fatalf("second Normalize changed the object")
		}
		if len(norm.Unknown) == 0 && len(Validate(obj, s)) != before {
			t.Fatalf("rewriting integers %v changed validation", norm.Integers)
		}

		Default(obj, s)
		defaulted := meta.DeepCopy(obj)
		Default(obj, s)
		if !meta.DeepEqual(obj, defaulted) {
			t.Fatalf("second Default changed the object")
		}
		for _, e := range Validate(obj, s) {
			_ = e.Error()
		}
		if _, err := json.Marshal(obj); err != nil {
			t.Fatalf("object no longer encodes: %v", err)
		}
	})
}

// lookup returns the value at a rendered path ("spec.ports[0].n"), which
// must be a plain integer literal.
func lookup(t *testing.T, obj any, path string) any {
	t.Helper()
	cur := obj
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			cur = cur.(map[string]any)[name]
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if err != nil {
				t.Fatalf("path %s: %v", path, err)
			}
			cur = cur.([]any)[i]
			rest = strings.TrimPrefix(after, "[")
		}
	}
	n, ok := cur.(json.Number)
	if _, err := strconv.ParseInt(string(n), 10, 64); !ok || err != nil || n == "-0" {
		t.Fatalf("%s = %#v, not a plain integer", path, cur)
	}
	return cur
}
