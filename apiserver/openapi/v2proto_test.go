package openapi

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// fieldsAt follows path from the message b, a field number a level (its
// first occurrence), and returns every occurrence of the last number: the
// length-delimited fields' contents.
func fieldsAt(t *testing.T, b []byte, path ...protowire.Number) [][]byte {
	t.Helper()
	var out [][]byte
	for i, num := range path {
		if i > 0 {
			if len(out) == 0 {
				t.Fatalf("no field at %v", path[:i])
			}
			b, out = out[0], nil
		}
		if err := codec.Walk(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
			if n == num && typ == protowire.BytesType {
				out = append(out, v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// fieldAt is the first occurrence of fieldsAt, as a string.
func fieldAt(t *testing.T, b []byte, path ...protowire.Number) string {
	t.Helper()
	all := fieldsAt(t, b, path...)
	if len(all) == 0 {
		t.Fatalf("no field at %v", path)
	}
	return string(all[0])
}

// The encoder on its own: oneof branches and the parts of Swagger 2.0 kapi's
// document does not use (security definitions, references, headers).
func TestEncodeV2Protobuf(t *testing.T) {
	doc := `{"swagger":"2.0","info":{"title":"t","version":"1"},
	"securityDefinitions":{"BearerToken":{"type":"apiKey","name":"authorization","in":"header","description":"Bearer"}},
	"security":[{"BearerToken":[]}],
	"paths":{"/x":{"parameters":[{"$ref":"#/parameters/p"}],"get":{"responses":{"200":{"$ref":"#/responses/r"},"default":{"description":"d","headers":{"H":{"type":"string"}}}}}}},
	"parameters":{"p":{"name":"p","in":"header","type":"string"}},
	"definitions":{"s":{"type":"object","additionalProperties":false,"items":[{"type":"string"}]}},
	"x-top":{"a":1}}`
	b, err := encodeV2Protobuf([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	// securityDefinitions (13) > NamedSecurityDefinitionsItem (1) > item (2) > apiKey (2) > in (3)
	if in := fieldsAt(t, b, 13, 1, 2, 2, 3); len(in) != 1 || string(in[0]) != "header" {
		t.Errorf("apiKey security: in %q", in)
	}
	// security (12) > NamedStringArray (1), name (1) BearerToken
	if n := fieldAt(t, b, 12, 1, 1); n != "BearerToken" {
		t.Errorf("security requirement %q", n)
	}
	// paths (8) > /x (2) > PathItem (2) > parameters (9) > ParametersItem.json_reference (2) > $ref (1)
	item := []byte(fieldAt(t, b, 8, 2, 2))
	if ref := fieldAt(t, item, 9, 2, 1); ref != "#/parameters/p" {
		t.Errorf("parameter reference %q", ref)
	}
	// get (2) > responses (9) > response_code (1): "200" a reference (2),
	// "default" a response (1) with headers.
	codes := fieldsAt(t, item, 2, 9, 1)
	if len(codes) != 2 {
		t.Fatalf("response codes %q", codes)
	}
	if fieldsAt(t, codes[0], 2, 2) == nil || fieldsAt(t, codes[0], 2, 1) != nil {
		t.Errorf("200: not a reference: %q", codes[0])
	}
	if fieldsAt(t, codes[1], 2, 1) == nil {
		t.Errorf("default: not a response: %q", codes[1])
	}
	// parameters (10) > NamedParameter (1) > Parameter (2) > non_body (2) > header (1)
	if fieldsAt(t, b, 10, 1, 2, 2, 1) == nil {
		t.Errorf("header parameter %q", fieldsAt(t, b, 10, 1, 2))
	}
	// definitions (9) > s (1) > Schema (2): additionalProperties (21) false
	// is boolean (2) = 0; items (23) an array.
	s := []byte(fieldAt(t, b, 9, 1, 2))
	if ap := fieldsAt(t, s, 21); len(ap) != 1 || string(ap[0]) != "\x10\x00" {
		t.Errorf("additionalProperties false: %q", ap)
	}
	if items := fieldsAt(t, s, 23, 1); len(items) != 1 {
		t.Errorf("items array: %q", items)
	}
	// The document's own vendor extension (16): NamedAny, Any.yaml.
	if name, yaml := fieldAt(t, b, 16, 1), fieldAt(t, b, 16, 2, 2); name != "x-top" || yaml != "a: 1\n" {
		t.Errorf("document extension %q: %q", name, yaml)
	}
}

func BenchmarkEncodeV2Protobuf(b *testing.B) {
	doc := Build(testResources(b)).V2
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeV2Protobuf(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// testResources returns namespaces, configmaps and a namespaced widget type
// with a schema and status and scale subresources, as a registry completes
// them.
func testResources(t testing.TB) []*registry.Resource {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg, err := registry.New(registry.Config{Storage: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	var s schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","required":["spec"],"properties":{
		"spec":{"type":"object","properties":{"size":{"type":"integer","minimum":0},"replicas":{"type":"integer"},
			"tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}}}},
		"status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}`), &s); err != nil {
		t.Fatal(err)
	}
	widgets := registry.Resource{Group: "example.dev", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true, Schema: &s,
		Subresources: registry.Subresources{Status: true, Scale: &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}}}
	for _, res := range []registry.Resource{registry.Namespaces(), registry.ConfigMaps(), widgets} {
		if err := reg.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	return reg.Resources()
}
