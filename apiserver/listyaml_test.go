package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

// yamlListForms are the representations of a list in YAML: objects, Tables
// with each includeObject, PartialObjectMetadataList, meta v1 and v1beta1.
var yamlListForms = []struct{ as, version, query string }{
	{"", "", ""},
	{codec.AsTable, "v1", ""},
	{codec.AsTable, "v1beta1", "includeObject=None"},
	{codec.AsTable, "v1", "includeObject=Object"},
	{codec.AsTable, "v1beta1", "includeObject=Metadata"},
	{codec.AsPartialObjectMetadataList, "v1", ""},
	{codec.AsPartialObjectMetadataList, "v1beta1", ""},
}

// yamlFuzzResource is a type whose Table has cells of every kind but dates
// (ages would move between the two Tables compared): read from the JSON
// text, or computed from the decoded object.
func yamlFuzzResource() registry.Resource {
	res := registry.ConfigMaps()
	res.PrinterColumns = []registry.Column{
		{Name: "Text", Type: "string", JSONPath: ".data.text", Description: "A column whose description is long enough, with its many words, to wrap in YAML."},
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio"},
		{Name: "Ready", Type: "boolean", JSONPath: ".status.ready", Priority: 1},
		{Name: "Keys", Type: "integer", Value: func(obj registry.Object) any { return len(obj) }},
	}
	return res
}

// FuzzYAMLListSink: a list written item by item through the YAML sink of
// its representation (yamlListForms) is byte for byte what the buffered
// path writes: codec.JSONToYAML of the whole JSON list.
func FuzzYAMLListSink(f *testing.F) {
	f.Add([]byte(`{"a":"x"}`), []byte(`{"b":{"c":[1,"two",null]}}`), uint8(2), uint8(0), "")
	f.Add([]byte(`{"long":"a sentence with spaces that goes on and on well past the eighty columns of a line"}`), []byte(`{"m":"one\ntwo\n\n three "}`), uint8(1), uint8(5), "")
	f.Add([]byte(`{"t":"true","n":"0123","e":"","d":"- x","q":"\"q\""}`), []byte(`{}`), uint8(0), uint8(1), "")
	f.Add([]byte(`{"metadata":{"name":"a b","annotations":{"x":"a long annotation with spaces that goes on and on well past the eighty columns"}},"data":{"text":"it's \"quoted\"\nand multi-line"},"spec":{"size":3,"ratio":0.5}}`),
		[]byte(`{"metadata":{"name":"- dash","creationTimestamp":"2024-01-02T03:04:05Z","labels":{"on":"yes"}},"status":{"ready":true},"data":{"text":"null"}}`), uint8(3), uint8(3), "")
	f.Add([]byte(`{"metadata":{"name":"n"},"spec":{"size":1e3,"ratio":"x"}}`), []byte(`{"metadata":{}}`), uint8(3), uint8(4), "a continue token")
	f.Add([]byte(`{"metadata":{"name":"n","namespace":"default"}}`), []byte(`{"metadata":{"name":"m","uid":"a long uid with spaces that goes on and on well past the eighty columns"}}`), uint8(2), uint8(6), "")
	res := yamlFuzzResource()
	f.Fuzz(func(t *testing.T, a, b []byte, n, form uint8, cont string) {
		items := [][]byte{a, b, a}[:int(n)%4]
		for _, it := range items {
			// Stored items are JSON objects: a YAML comment would run
			// across items in the whole list.
			if len(it) == 0 || it[0] != '{' || !json.Valid(it) {
				return
			}
		}
		h := registry.ListHead{ResourceVersion: 42, Continue: cont}
		if cont != "" {
			rem := int64(7)
			h.RemainingItemCount = &rem
		}
		fm := yamlListForms[int(form)%len(yamlListForms)]
		r := httptest.NewRequest("GET", "/api/v1/configmaps?"+fm.query, nil)
		c := codec.Choice{Format: codec.FormatYAML, As: fm.as, Version: fm.version}
		s := &Server{}
		p := payload{kind: bodyList, res: &res, items: items, listMeta: headListMeta(h)}
		chunks, err := s.encode(r, c, &p)
		if err != nil {
			return // the buffered path refuses these items too
		}
		want := bytes.Join(chunks, nil)
		var got bytes.Buffer
		sink, err := s.listSink(r, &got, &res, c, &registry.ListOptions{})
		if sink == nil || err != nil {
			t.Fatalf("%+v: no sink (%v)", fm, err)
		}
		if err := sink.Begin(h); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if err := sink.Item(it); err != nil {
				t.Fatalf("%+v: item %q: %v", fm, it, err)
			}
		}
		if err := sink.End(registry.ListEnd{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%+v: items %q:\n got %q\nwant %q", fm, items, got.Bytes(), want)
		}
	})
}
