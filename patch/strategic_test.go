package patch

import (
	"errors"
	"testing"
)

// smpSchema is a type that declares strategic merge metadata.
const smpSchema = `{"type":"object","properties":{
 "spec":{"type":"object","properties":{
  "size":{"type":"integer"},
  "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
  "args":{"type":"array","items":{"type":"string"}},
  "mergeArgs":{"type":"array","x-kubernetes-patch-strategy":"merge","items":{"type":"string"}},
  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string"}}}},
  "containers":{"type":"array","x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name","items":{"type":"object","properties":{
    "name":{"type":"string"},"image":{"type":"string"},
    "env":{"type":"array","x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name","items":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"string"}}}}}}},
  "replaced":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"x-kubernetes-patch-strategy":"replace","items":{"type":"object","properties":{"name":{"type":"string"}}}},
  "source":{"type":"object","x-kubernetes-patch-strategy":"retainKeys","properties":{"type":{"type":"string"},"git":{"type":"string"},"http":{"type":"string"}}},
  "config":{"type":"object","x-kubernetes-patch-strategy":"replace","properties":{"a":{"type":"string"},"b":{"type":"string"}}},
  "matrix":{"type":"array","x-kubernetes-patch-strategy":"merge","items":{"type":"array","items":{"type":"string"}}}}}}}`

func TestStrategic(t *testing.T) {
	s := mustSchema(t, smpSchema)
	base := `{"apiVersion":"v1","kind":"K","metadata":{"name":"a","labels":{"x":"1","y":"2"},"finalizers":["f1","f2"],
	  "ownerReferences":[{"apiVersion":"v1","kind":"O","name":"o1","uid":"u1"},{"apiVersion":"v1","kind":"O","name":"o2","uid":"u2"}]},
	  "spec":{"size":1,"tags":["a","b"],"args":["x","y"],"mergeArgs":["m1","m2"],
	   "ports":[{"name":"http","port":80},{"name":"https","port":443}],
	   "containers":[{"name":"c1","image":"i1","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},{"name":"c2","image":"i2"}],
	   "replaced":[{"name":"r1"}],
	   "source":{"type":"git","git":"repo"},
	   "config":{"a":"1","b":"2"}}}`
	cases := []struct {
		name, patch, want string // want: the expected spec (or metadata when the patch sets only metadata)
		field             string
	}{
		{"scalar", `{"spec":{"size":2}}`, `2`, "spec.size"},
		{"null deletes", `{"spec":{"config":null}}`, ``, "-spec.config"},
		{"set list merges", `{"spec":{"tags":["c","a"]}}`, `["c","a","b"]`, "spec.tags"},
		{"atomic list replaces", `{"spec":{"args":["z"]}}`, `["z"]`, "spec.args"},
		{"merge strategy on scalars", `{"spec":{"mergeArgs":["m3"]}}`, `["m3","m1","m2"]`, "spec.mergeArgs"},
		{"$deleteFromPrimitiveList", `{"spec":{"$deleteFromPrimitiveList/mergeArgs":["m1"]}}`, `["m2"]`, "spec.mergeArgs"},
		{"$deleteFromPrimitiveList on a set", `{"spec":{"$deleteFromPrimitiveList/tags":["b"],"tags":["c"]}}`, `["c","a"]`, "spec.tags"},
		{"map list merges by key", `{"spec":{"ports":[{"name":"https","port":8443},{"name":"admin","port":9000}]}}`,
			`[{"name":"http","port":80},{"name":"https","port":8443},{"name":"admin","port":9000}]`, "spec.ports"},
		{"map list element delete", `{"spec":{"ports":[{"name":"http","$patch":"delete"}]}}`, `[{"name":"https","port":443}]`, "spec.ports"},
		{"map list replace", `{"spec":{"ports":[{"name":"x","port":1},{"$patch":"replace"}]}}`, `[{"name":"x","port":1}]`, "spec.ports"},
		{"merge key nested", `{"spec":{"containers":[{"name":"c1","env":[{"name":"B","value":"3"},{"name":"C","value":"4"}]}]}}`,
			`[{"name":"c1","image":"i1","env":[{"name":"A","value":"1"},{"name":"B","value":"3"},{"name":"C","value":"4"}]},{"name":"c2","image":"i2"}]`, "spec.containers"},
		{"null inside a merged element", `{"spec":{"containers":[{"name":"c2","image":null}]}}`,
			`[{"name":"c1","image":"i1","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},{"name":"c2"}]`, "spec.containers"},
		{"$setElementOrder", `{"spec":{"$setElementOrder/ports":[{"name":"https"},{"name":"http"}],"ports":[{"name":"http","port":81}]}}`,
			`[{"name":"https","port":443},{"name":"http","port":81}]`, "spec.ports"},
		{"$setElementOrder on scalars", `{"spec":{"$setElementOrder/tags":["b","a"]}}`, `["b","a"]`, "spec.tags"},
		{"patch strategy replace on a list", `{"spec":{"replaced":[{"name":"r2"}]}}`, `[{"name":"r2"}]`, "spec.replaced"},
		{"patch strategy replace on a map", `{"spec":{"config":{"a":"9"}}}`, `{"a":"9"}`, "spec.config"},
		{"$retainKeys", `{"spec":{"source":{"$retainKeys":["type","http"],"type":"http","http":"url"}}}`, `{"type":"http","http":"url"}`, "spec.source"},
		{"$patch replace on a map", `{"spec":{"$patch":"replace","size":7}}`, `{"size":7}`, ""},
		{"$patch delete on a map", `{"spec":{"source":{"$patch":"delete"}}}`, `{}`, "spec.source"},
		{"metadata labels merge", `{"metadata":{"labels":{"x":null,"z":"3"}}}`, `{"y":"2","z":"3"}`, "metadata.labels"},
		{"metadata finalizers merge", `{"metadata":{"finalizers":["f3"]}}`, `["f3","f1","f2"]`, "metadata.finalizers"},
		{"metadata finalizers delete", `{"metadata":{"$deleteFromPrimitiveList/finalizers":["f1"]}}`, `["f2"]`, "metadata.finalizers"},
		{"metadata ownerReferences by uid", `{"metadata":{"ownerReferences":[{"uid":"u2","$patch":"delete"}]}}`, `[{"apiVersion":"v1","kind":"O","name":"o1","uid":"u1"}]`, "metadata.ownerReferences"},
		{"new field with directives stripped", `{"spec":{"newmap":{"a":{"$patch":"delete"},"b":1}}}`, `{"b":1}`, "spec.newmap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := obj(t, base)
			before := toJSON(t, orig)
			out, err := Strategic(orig, obj(t, tc.patch), s)
			if err != nil {
				t.Fatal(err)
			}
			if toJSON(t, orig) != before {
				t.Fatal("Strategic modified its input")
			}
			if tc.field == "" {
				if !sameJSON(t, out["spec"], tc.want) {
					t.Fatalf("spec = %s, want %s", toJSON(t, out["spec"]), tc.want)
				}
				return
			}
			if tc.field[0] == '-' {
				if _, found := lookup(out, tc.field[1:]); found {
					t.Fatalf("%s still present: %s", tc.field[1:], toJSON(t, out))
				}
				return
			}
			got, _ := lookup(out, tc.field)
			if !sameJSON(t, got, tc.want) {
				t.Fatalf("%s = %s, want %s", tc.field, toJSON(t, got), tc.want)
			}
		})
	}
}

func TestStrategicErrors(t *testing.T) {
	s := mustSchema(t, smpSchema)
	base := obj(t, `{"spec":{"ports":[{"name":"http","port":80}],"containers":[{"name":"c"}],"matrix":[["a"]]}}`)
	for _, tc := range []struct {
		patch string
		code  int
	}{
		{`{"spec":{"$patch":"bogus"}}`, 400},
		{`{"spec":{"ports":[{"$patch":"bogus","name":"http"}]}}`, 400},
		{`{"spec":{"ports":[{"$patch":"merge"}]}}`, 400},
		{`{"spec":{"containers":[{"image":"x"}]}}`, 422},
		{`{"spec":{"containers":[{"$patch":"delete"}]}}`, 422},
		{`{"spec":{"containers":["x"]}}`, 422},
		{`{"spec":{"$setElementOrder/ports":"x"}}`, 400},
		{`{"spec":{"$deleteFromPrimitiveList/ports":{}}}`, 400},
		{`{"spec":{"$retainKeys":"x"}}`, 400},
		{`{"spec":{"$retainKeys":["a"],"b":1}}`, 400},
		{`{"spec":{"matrix":[["b"]]}}`, 422},
	} {
		_, err := Strategic(base, obj(t, tc.patch), s)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("patch %s: err %v, want a %d", tc.patch, err, tc.code)
		}
	}
}

// Without strategic merge metadata a schema only merges maps; lists are
// replaced.
func TestStrategicWithoutMetadata(t *testing.T) {
	s := mustSchema(t, widgetSchema)
	if DeclaresStrategicMerge(s) {
		t.Fatal("the widget schema declares no strategic merge metadata")
	}
	if !DeclaresStrategicMerge(mustSchema(t, smpSchema)) {
		t.Fatal("smpSchema declares strategic merge metadata")
	}
	out, err := Strategic(obj(t, `{"spec":{"size":1,"args":["a"]}}`), obj(t, `{"spec":{"args":["b"]}}`), s)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, out, `{"spec":{"size":1,"args":["b"]}}`) {
		t.Fatalf("out = %s", toJSON(t, out))
	}
}

func lookup(o map[string]any, path string) (any, bool) {
	var cur any = o
	for _, p := range splitDot(path) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func splitDot(s string) []string { return split(s, '.') }

func split(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
