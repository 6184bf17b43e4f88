package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestPrune(t *testing.T) {
	widget := mustParse(t, widgetCRD)
	tests := []struct {
		name    string
		schema  *Schema
		obj     string
		want    string
		dropped []string
	}{
		{"nothing unknown", widget,
			`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"size":1,"ports":[{"name":"a","port":1}]}}`,
			`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"size":1,"ports":[{"name":"a","port":1}]}}`,
			nil},
		{"unknown fields at every level", widget,
			`{"apiVersion":"example.dev/v1","kind":"Widget","bogus":1,"metadata":{"name":"a","bogus":{"x":1}},"spec":{"size":1,"bogus":true,"ports":[{"name":"a","port":1,"x":1},{"name":"b","port":2,"y":{"z":1}}]},"status":{"zzz":[]}}`,
			`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"ports":[{"name":"a","port":1},{"name":"b","port":2}]},"status":{}}`,
			[]string{"bogus", "metadata.bogus", "spec.bogus", "spec.ports[0].x", "spec.ports[1].y", "status.zzz"}},
		{"non-string apiVersion and kind are dropped at the root of a CRD schema", widget,
			`{"apiVersion":1,"kind":{},"metadata":"x","spec":{"size":1}}`,
			`{"spec":{"size":1}}`,
			[]string{"apiVersion", "kind", "metadata"}},
		{"metadata is pruned deeply", widget,
			`{"metadata":{"name":"a","selfLink":"/x","creationTimestamp":null,"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","bogus":1}],"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{"f:size":{}}},"extra":1}]}}`,
			`{"metadata":{"name":"a","selfLink":"/x","creationTimestamp":null,"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u"}],"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{"f:size":{}}}}]}}`,
			[]string{"metadata.managedFields[0].extra", "metadata.ownerReferences[0].bogus"}},
		{"type mismatches are left for validation", widget,
			`{"spec":"x","status":[{"a":1}]}`,
			`{"spec":"x","status":[{"a":1}]}`,
			nil},
		{"preserve unknown fields", mustParse(t, `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"known":{"type":"object","properties":{"a":{"type":"string"}}}}}}}`),
			`{"spec":{"free":{"x":[1,{"y":2}]},"known":{"a":"x","b":"pruned"}},"other":1}`,
			`{"spec":{"free":{"x":[1,{"y":2}]},"known":{"a":"x"}}}`,
			[]string{"other", "spec.known.b"}},
		{"preserve unknown fields at the root", mustParse(t, `{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}`),
			`{"anything":{"goes":1},"metadata":{"name":"a","bogus":1},"spec":{"a":"x","b":1}}`,
			`{"anything":{"goes":1},"metadata":{"name":"a"},"spec":{"a":"x"}}`,
			[]string{"metadata.bogus", "spec.b"}},
		{"additionalProperties schema", mustParse(t, `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"object","properties":{"a":{"type":"string"}}}}}}`),
			`{"m":{"k1":{"a":"x","b":1},"k2":{}}}`,
			`{"m":{"k1":{"a":"x"},"k2":{}}}`,
			[]string{"m.k1.b"}},
		{"additionalProperties true", mustParse(t, `{"type":"object","properties":{"m":{"type":"object","additionalProperties":true}}}`),
			`{"m":{"k1":{"a":"x","b":1}}}`,
			`{"m":{"k1":{"a":"x","b":1}}}`,
			nil},
		{"additionalProperties false", mustParse(t, `{"type":"object","properties":{"m":{"type":"object","additionalProperties":false}}}`),
			`{"m":{"k1":1}}`,
			`{"m":{}}`,
			[]string{"m.k1"}},
		{"array without items drops object fields", mustParse(t, `{"type":"object","properties":{"l":{"type":"array"}}}`),
			`{"l":[{"a":1},[{"b":2}],3]}`,
			`{"l":[{},[{}],3]}`,
			[]string{"l[0].a", "l[1][0].b"}},
		{"embedded resource", mustParse(t, `{"type":"object","properties":{"tpl":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}}}`),
			`{"tpl":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","junk":1},"spec":{"a":"x","b":1},"other":1}}`,
			`{"tpl":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"a":"x"}}}`,
			[]string{"tpl.metadata.junk", "tpl.other", "tpl.spec.b"}},
		{"embedded resource with preserve unknown fields", mustParse(t, `{"type":"object","properties":{"tpl":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}}}`),
			`{"tpl":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","junk":1},"spec":{"b":1}}}`,
			`{"tpl":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"b":1}}}`,
			[]string{"tpl.metadata.junk"}},
		{"arrays of arrays", mustParse(t, `{"type":"object","properties":{"m":{"type":"array","items":{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"}}}}}}}`),
			`{"m":[[{"a":1,"b":2}],[],[{"c":3}]]}`,
			`{"m":[[{"a":1}],[],[{}]]}`,
			[]string{"m[0][0].b", "m[2][0].c"}},
		{"nil schema prunes nothing", nil, `{"a":{"b":1}}`, `{"a":{"b":1}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := decodeJSON(t, tt.obj)
			dropped := Prune(obj, tt.schema)
			if !reflect.DeepEqual(dropped, tt.dropped) {
				t.Errorf("dropped = %q, want %q", dropped, tt.dropped)
			}
			got, _ := json.Marshal(obj)
			if string(got) != canonical(t, []byte(tt.want)) {
				t.Errorf("pruned object:\n got %s\nwant %s", got, canonical(t, []byte(tt.want)))
			}
			if again := Prune(obj, tt.schema); again != nil {
				t.Errorf("second prune dropped %q", again)
			}
		})
	}
}
