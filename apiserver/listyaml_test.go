package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

// FuzzYAMLListSink: a list written item by item through a yamlListSink is
// byte for byte what codec.JSONToYAML makes of the whole list.
func FuzzYAMLListSink(f *testing.F) {
	f.Add([]byte(`{"a":"x"}`), []byte(`{"b":{"c":[1,"two",null]}}`), uint8(2))
	f.Add([]byte(`{"long":"a sentence with spaces that goes on and on well past the eighty columns of a line"}`), []byte(`{"m":"one\ntwo\n\n three "}`), uint8(1))
	f.Add([]byte(`{"t":"true","n":"0123","e":"","d":"- x","q":"\"q\""}`), []byte(`{}`), uint8(0))
	res := registry.ConfigMaps()
	f.Fuzz(func(t *testing.T, a, b []byte, n uint8) {
		items := [][]byte{a, b, a}[:int(n)%4]
		for _, it := range items {
			// Stored items are JSON objects: a YAML comment would run
			// across items in the whole list.
			if len(it) == 0 || it[0] != '{' || !json.Valid(it) {
				return
			}
		}
		h := registry.ListHead{ResourceVersion: 42}
		want, err := codec.JSONToYAML(bytes.Join(listJSONChunks(&res, items, headListMeta(h)), nil))
		if err != nil {
			return
		}
		var got bytes.Buffer
		y := newYAMLListSink(&got, &jsonListSink{res: &res}, "items")
		if err := y.Begin(h); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if err := y.Item(it); err != nil {
				t.Fatalf("item %q: %v", it, err)
			}
		}
		if err := y.End(registry.ListEnd{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("items %q:\n got %q\nwant %q", items, got.Bytes(), want)
		}
	})
}
