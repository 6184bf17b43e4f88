package apiserver

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// FuzzDecodeBody throws arbitrary bodies at the request decoder in every
// media type: it never panics, every failure is a 400 Status, what a
// protobuf body decodes to is an object of the target kind, and the object
// keeps none of the body's bytes (readBody reuses the buffer).
func FuzzDecodeBody(f *testing.F) {
	cm := registry.ConfigMaps()
	target := bodyTarget{kind: cm.Kind, apiVersion: cm.APIVersion(), msg: cm.Protobuf}
	raw, _ := cm.Protobuf.AppendProtobuf(nil, []byte(`{"metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"},"binaryData":{"b":"AAE="}}`))
	for _, s := range []string{
		string(codec.EncodeEnvelope("v1", "ConfigMap", raw)),
		`{"metadata":{"name":"a"}}`,
		"metadata:\n  name: a\n  name: b\n",
		"a: &a [x]\nb: [*a, *a]\n",
		"k8s\x00\x0a\x00\x12\x00",
	} {
		for _, mt := range []string{codec.MediaJSON, codec.MediaYAML, codec.MediaProtobuf} {
			f.Add(mt, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, mt string, data []byte) {
		switch mt {
		case codec.MediaJSON, codec.MediaYAML, codec.MediaProtobuf:
		default:
			return
		}
		data = bytes.Clone(data)
		obj, _, err := decodeBody(mt, data, target)
		if err != nil {
			se, ok := meta.AsStatusError(err)
			if !ok || se.Code() != 400 {
				t.Fatalf("decodeBody(%s, %q): %v is not a 400 Status", mt, data, err)
			}
			return
		}
		if obj == nil {
			t.Fatalf("decodeBody(%s, %q): no object and no error", mt, data)
		}
		if mt == codec.MediaProtobuf && (obj["kind"] != "ConfigMap" || obj["apiVersion"] != "v1") {
			t.Fatalf("protobuf body decoded to %v", obj)
		}
		before := fmt.Sprintf("%#v", obj)
		for i := range data {
			data[i] = '#'
		}
		if after := fmt.Sprintf("%#v", obj); after != before {
			t.Fatalf("decodeBody(%s): the object changed with the body's bytes:\n%s\n%s", mt, before, after)
		}
	})
}
