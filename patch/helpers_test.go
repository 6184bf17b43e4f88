package patch

import (
	"encoding/json"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// configMapSchema is the schema kapi serves configmaps with.
const configMapSchema = `{"type":"object","properties":{
"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
"data":{"type":"object","additionalProperties":{"type":"string"}},
"binaryData":{"type":"object","additionalProperties":{"type":"string","format":"byte"}},
"immutable":{"type":"boolean"}}}`

// widgetSchema is the quickstart's Widget, with a status subresource.
const widgetSchema = `{"type":"object","required":["spec"],"properties":{
 "spec":{"type":"object","required":["size"],"properties":{
  "size":{"type":"integer","minimum":0},"color":{"type":"string"},"replicas":{"type":"integer"},
  "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
  "labels":{"type":"object","additionalProperties":{"type":"string"}},
  "selector":{"type":"object","x-kubernetes-map-type":"atomic","additionalProperties":{"type":"string"}},
  "args":{"type":"array","items":{"type":"string"}},
  "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name","port"],"properties":{"name":{"type":"string"},"port":{"type":"integer"},"protocol":{"type":"string"}}}}}},
 "status":{"type":"object","properties":{"replicas":{"type":"integer"},"phase":{"type":"string"},"selector":{"type":"string"}}}}}`

func mustSchema(t testing.TB, js string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// obj decodes YAML or JSON into a generic object with exact numbers.
func obj(t testing.TB, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad YAML %q: %v", y, err)
	}
	v, _, err := codec.DecodeJSON(j)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", y)
	}
	return m
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON compares two values as JSON.
func sameJSON(t testing.TB, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %s: %v", want, err)
	}
	var g any
	if err := json.Unmarshal([]byte(toJSON(t, got)), &g); err != nil {
		t.Fatal(err)
	}
	return meta.DeepEqual(g, w)
}

var t0 = time.Date(2010, 10, 10, 0, 0, 0, 0, time.UTC)

// managed returns obj's managedFields entries, without their times, as JSON
// values keyed by manager and operation.
func managedEntries(t testing.TB, o map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	md, _ := o["metadata"].(map[string]any)
	list, _ := md["managedFields"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		key := m["manager"].(string) + "/" + m["operation"].(string)
		if sr, ok := m["subresource"].(string); ok {
			key += "/" + sr
		}
		if _, dup := out[key]; dup {
			t.Fatalf("two entries for %s: %s", key, toJSON(t, list))
		}
		out[key] = m
	}
	return out
}
