package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// widgetCRD is the schema of the reference Widget custom resource
// (shared/reference/widgets-crd.yaml), plus a few extra constraints.
const widgetCRD = `{
  "type": "object",
  "required": ["spec"],
  "properties": {
    "spec": {
      "type": "object",
      "required": ["size"],
      "properties": {
        "size": {"type": "integer", "minimum": 0},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "replicas": {"type": "integer"},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          "items": {
            "type": "object",
            "required": ["name", "port"],
            "properties": {
              "name": {"type": "string"},
              "port": {"type": "integer"},
              "protocol": {"type": "string", "default": "TCP"}
            }
          }
        }
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "replicas": {"type": "integer"},
        "phase": {"type": "string"},
        "selector": {"type": "string"}
      }
    }
  }
}`

func mustParse(t testing.TB, js string) *Schema {
	t.Helper()
	var s Schema
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("parsing schema: %v\n%s", err, js)
	}
	return &s
}

func decodeJSON(t testing.TB, js string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	return v
}

// canonical re-encodes JSON so that documents can be compared.
func canonical(t testing.TB, b []byte) string {
	t.Helper()
	v := decodeJSON(t, string(b))
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestSchemaJSONRoundTrip(t *testing.T) {
	docs := []string{
		widgetCRD,
		`{"type":"string","format":"date-time","description":"d","title":"T","pattern":"^a","minLength":1,"maxLength":63,"nullable":true,"example":"x"}`,
		`{"type":"integer","format":"int32","minimum":0,"maximum":10,"exclusiveMinimum":true,"exclusiveMaximum":true,"multipleOf":2,"default":3,"enum":[1,2,3]}`,
		`{"type":"number","default":1.5,"enum":[1.5,12345678901234567890]}`,
		`{"type":"object","additionalProperties":{"type":"string"},"minProperties":1,"maxProperties":5,"x-kubernetes-map-type":"atomic"}`,
		`{"type":"object","additionalProperties":true}`,
		`{"type":"object","additionalProperties":false}`,
		`{"type":"array","items":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true},"minItems":1,"maxItems":2,"x-kubernetes-list-type":"atomic"}`,
		`{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}`,
		`{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}}},"x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"k","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"]}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"x-kubernetes-validations":[{"rule":"self.a != ''"}],"default":{"a":"x"}}`,
		`{"type":"boolean","default":false}`,
		`{"type":"string","default":""}`,
	}
	for _, doc := range docs {
		s := mustParse(t, doc)
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if got, want := canonical(t, out), canonical(t, []byte(doc)); got != want {
			t.Errorf("round trip changed the schema:\n got %s\nwant %s", got, want)
		}
		// A second round trip is stable too.
		var again Schema
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatal(err)
		}
		out2, _ := json.Marshal(&again)
		if !bytes.Equal(out, out2) {
			t.Errorf("second round trip differs:\n%s\n%s", out, out2)
		}
	}
}

func TestSchemaJSONNumbers(t *testing.T) {
	s := mustParse(t, `{"type":"integer","default":9007199254740993,"enum":[1,9007199254740993]}`)
	if s.Default != json.Number("9007199254740993") {
		t.Errorf("default = %#v, want an exact json.Number", s.Default)
	}
	if s.Enum[1] != json.Number("9007199254740993") {
		t.Errorf("enum = %#v", s.Enum)
	}
	if s.Properties != nil || s.AdditionalProperties != nil {
		t.Error("absent fields should stay nil")
	}
	var bad Schema
	if err := json.Unmarshal([]byte(`{"type":1}`), &bad); err == nil || !strings.Contains(err.Error(), "schema:") {
		t.Errorf("wrong type should fail with context: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"additionalProperties":"x"}`), &bad); err == nil {
		t.Error("a string additionalProperties should fail")
	}
}

func TestSchemaClone(t *testing.T) {
	s := mustParse(t, widgetCRD)
	s.Properties["spec"].Properties["size"].Default = map[string]any{"a": []any{"b"}}
	c := s.Clone()
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(c)
	if !bytes.Equal(a, b) {
		t.Fatalf("clone differs:\n%s\n%s", a, b)
	}
	c.Properties["spec"].Required[0] = "changed"
	c.Properties["spec"].Properties["ports"].XListMapKeys[0] = "changed"
	*c.Properties["spec"].Properties["size"].Minimum = 5
	c.Properties["spec"].Properties["color"].Enum[0] = "changed"
	c.Properties["spec"].Properties["size"].Default.(map[string]any)["a"].([]any)[0] = "changed"
	c.Properties["status"].Properties["new"] = &Schema{Type: TypeString}
	a2, _ := json.Marshal(s)
	if !bytes.Equal(a, a2) {
		t.Errorf("changing the clone changed the original:\n%s\n%s", a, a2)
	}
	if (*Schema)(nil).Clone() != nil {
		t.Error("Clone of nil")
	}
	// Unmodelled keywords survive a clone.
	x := mustParse(t, `{"type":"string","x-kubernetes-validations":[{"rule":"true"}]}`)
	out, _ := json.Marshal(x.Clone())
	if !strings.Contains(string(out), "x-kubernetes-validations") {
		t.Errorf("clone lost extra keywords: %s", out)
	}
}

func TestLookupAndMergeRules(t *testing.T) {
	s := mustParse(t, widgetCRD)
	s.Properties["spec"].Properties["labels"] = &Schema{Type: TypeObject, AdditionalProperties: &SchemaOrBool{Allows: true, Schema: &Schema{Type: TypeString}}}
	tests := []struct {
		path []string
		want *Schema
	}{
		{nil, s},
		{[]string{"spec"}, s.Properties["spec"]},
		{[]string{"spec", "size"}, s.Properties["spec"].Properties["size"]},
		{[]string{"spec", "ports", "0"}, s.Properties["spec"].Properties["ports"].Items},
		{[]string{"spec", "ports", "*", "name"}, s.Properties["spec"].Properties["ports"].Items.Properties["name"]},
		{[]string{"spec", "labels", "anything"}, s.Properties["spec"].Properties["labels"].AdditionalProperties.Schema},
		{[]string{"spec", "bogus"}, nil},
		{[]string{"spec", "size", "x"}, nil},
		{[]string{"nope", "deeper"}, nil},
	}
	for _, tt := range tests {
		if got := s.Lookup(tt.path...); got != tt.want {
			t.Errorf("Lookup(%q) = %p, want %p", tt.path, got, tt.want)
		}
	}
	if (*Schema)(nil).Lookup("a") != nil {
		t.Error("nil Lookup")
	}

	ports := s.Lookup("spec", "ports")
	if ports.ListType() != ListTypeMap || !reflect.DeepEqual(ports.ListMapKeys(), []string{"name"}) {
		t.Errorf("ports: %q %q", ports.ListType(), ports.ListMapKeys())
	}
	if tags := s.Lookup("spec", "tags"); tags.ListType() != ListTypeSet || tags.ListMapKeys() != nil {
		t.Errorf("tags: %q", tags.ListType())
	}
	plain := &Schema{Type: TypeArray, Items: &Schema{Type: TypeString}}
	if plain.ListType() != ListTypeAtomic {
		t.Errorf("default list type = %q", plain.ListType())
	}
	if s.ListType() != "" || s.Lookup("spec", "size").MapType() != "" {
		t.Error("list/map types of non-lists/non-maps should be empty")
	}
	if s.MapType() != MapTypeGranular {
		t.Errorf("default map type = %q", s.MapType())
	}
	if (&Schema{Type: TypeObject, XMapType: MapTypeAtomic}).MapType() != MapTypeAtomic {
		t.Error("explicit map type")
	}
	smp := &Schema{Type: TypeArray, XPatchStrategy: "merge", XPatchMergeKey: "name"}
	if smp.PatchStrategy() != "merge" || smp.PatchMergeKey() != "name" {
		t.Error("patch strategy")
	}
	var nilSchema *Schema
	if nilSchema.ListType() != "" || nilSchema.MapType() != "" || nilSchema.ListMapKeys() != nil ||
		nilSchema.PatchStrategy() != "" || nilSchema.PatchMergeKey() != "" {
		t.Error("nil receivers")
	}
}

func TestPatternCache(t *testing.T) {
	s := &Schema{Type: TypeString, Pattern: "^a+$"}
	if errs := Validate("aaa", s); errs != nil {
		t.Fatalf("match: %v", errs)
	}
	re1, _ := s.regexp()
	re2, _ := s.regexp()
	if re1 != re2 {
		t.Error("pattern compiled twice")
	}
	s.Pattern = "^b+$" // a changed pattern is recompiled
	if errs := Validate("aaa", s); len(errs) != 1 {
		t.Fatalf("after change: %v", errs)
	}
	if errs := Validate("bb", s); errs != nil {
		t.Fatalf("after change: %v", errs)
	}
	bad := &Schema{Type: TypeString, Pattern: "("}
	errs := Validate("x", bad)
	if len(errs) != 1 || errs[0].Type != meta.CauseTypeInternal || !strings.Contains(errs[0].Error(), `invalid pattern "("`) {
		t.Errorf("invalid pattern: %v", errs)
	}
}

// TestConcurrentUse validates, prunes and defaults against one schema from
// many goroutines (run with -race): the pattern cache is the only state a
// schema changes.
func TestConcurrentUse(t *testing.T) {
	s := mustParse(t, `{"type":"object","properties":{"spec":{"type":"object","properties":{
		"name":{"type":"string","pattern":"^[a-z]+$"},
		"tags":{"type":"array","items":{"type":"string","pattern":"^t"},"x-kubernetes-list-type":"set"},
		"n":{"type":"integer","default":1}}}}}`)
	template := decodeJSON(t, `{"spec":{"name":"Abc","tags":["t1","x"],"bogus":1}}`)
	done := make(chan []string)
	for i := 0; i < 8; i++ {
		go func() {
			var got []string
			for j := 0; j < 50; j++ {
				obj := meta.DeepCopy(template)
				Prune(obj, s)
				Default(obj, s)
				got = errorStrings(Validate(obj, s))
			}
			done <- got
		}()
	}
	want := []string{
		`spec.name: Invalid value: "Abc": spec.name in body should match '^[a-z]+$'`,
		`spec.tags[1]: Invalid value: "x": spec.tags[1] in body should match '^t'`,
	}
	for i := 0; i < 8; i++ {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Errorf("got %q", got)
		}
	}
}
