package apiserver

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/codec"
)

const acceptOpenAPIV2Protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

func TestOpenAPIV2Protobuf(t *testing.T) {
	_, ts := newTestServer(t)
	for _, tc := range []struct {
		accept, ctype string
	}{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/json", "application/json"},
		{"application/yaml", "application/yaml"},
		{acceptOpenAPIV2Protobuf, mediaOpenAPIV2Protobuf},
		{mediaOpenAPIV2Protobuf, mediaOpenAPIV2Protobuf},
		{"application/json;q=0.5, " + acceptOpenAPIV2Protobuf, mediaOpenAPIV2Protobuf},
		{"application/json, " + acceptOpenAPIV2Protobuf + ";q=0.5", "application/json"},
		{"application/vnd.kubernetes.protobuf, " + acceptOpenAPIV2Protobuf + ";q=0.9", mediaOpenAPIV2Protobuf},
	} {
		r := do(t, ts, "GET", "/openapi/v2", "", "Accept", tc.accept)
		if r.code != 200 || r.header.Get("Content-Type") != tc.ctype {
			t.Errorf("Accept %q: %d %q, want 200 %q", tc.accept, r.code, r.header.Get("Content-Type"), tc.ctype)
		}
	}

	js := do(t, ts, "GET", "/openapi/v2", "", "Accept", "application/json")
	pb := do(t, ts, "GET", "/openapi/v2", "", "Accept", acceptOpenAPIV2Protobuf)
	etag := pb.header.Get("Etag")
	if len(etag) != 130 || etag != js.header.Get("Etag") {
		t.Errorf("ETag: protobuf %q, JSON %q", etag, js.header.Get("Etag"))
	}
	for _, accept := range []string{acceptOpenAPIV2Protobuf, "application/json"} {
		if r := do(t, ts, "GET", "/openapi/v2", "", "Accept", accept, "If-None-Match", etag); r.code != 304 || len(r.body) != 0 {
			t.Errorf("If-None-Match, Accept %q: %d %q", accept, r.code, r.body)
		}
	}
	if r := do(t, ts, "GET", "/openapi/v2", "", "Accept", acceptOpenAPIV2Protobuf, "If-None-Match", `"other"`); r.code != 200 {
		t.Errorf("If-None-Match of another ETag: %d", r.code)
	}

	// A few fields by number (examples/e2e compares the whole document with
	// gnostic's parse of the JSON).
	fields := protoFields(t, pb.body)
	if s := fields[1]; len(s) != 1 || string(s[0]) != "2.0" {
		t.Errorf("swagger: %q", s)
	}
	if title := protoFields(t, fields[2][0])[1]; len(title) != 1 || string(title[0]) != "Kubernetes" {
		t.Errorf("info.title: %q", title)
	}
	paths := map[string][]byte{}
	for _, p := range protoFields(t, fields[8][0])[2] { // Paths.path: NamedPathItem
		nf := protoFields(t, p)
		paths[string(nf[1][0])] = nf[2][0]
	}
	item, ok := paths["/apis/example.dev/v1/namespaces/{namespace}/widgets/{name}"]
	if !ok {
		t.Fatalf("no widget item path among %d", len(paths))
	}
	patch := protoFields(t, protoFields(t, item)[8][0]) // PathItem.patch
	if id := patch[5]; len(id) != 1 || string(id[0]) != "patchExampleDevV1NamespacedWidget" {
		t.Errorf("patch operationId %q", id)
	}
	exts := map[string]string{}
	for _, e := range patch[13] { // Operation.vendor_extension: NamedAny
		nf := protoFields(t, e)
		exts[string(nf[1][0])] = string(protoFields(t, nf[2][0])[2][0]) // Any.yaml
	}
	if exts["x-kubernetes-action"] != "patch\n" || exts["x-kubernetes-group-version-kind"] != "group: example.dev\nkind: Widget\nversion: v1\n" {
		t.Errorf("patch vendor extensions %q", exts)
	}
	var widget []byte
	for _, d := range protoFields(t, fields[9][0])[1] { // Definitions: NamedSchema
		nf := protoFields(t, d)
		if string(nf[1][0]) == "dev.example.v1.Widget" {
			widget = nf[2][0]
		}
	}
	if widget == nil {
		t.Fatal("no Widget definition")
	}
	ws := protoFields(t, widget)
	if req := ws[19]; len(req) != 1 || string(req[0]) != "spec" { // Schema.required
		t.Errorf("Widget required %q", req)
	}
	if typ := protoFields(t, ws[22][0])[1]; len(typ) != 1 || string(typ[0]) != "object" { // Schema.type: TypeItem
		t.Errorf("Widget type %q", typ)
	}
}

// protoFields splits a message into its length-delimited fields by number.
func protoFields(t *testing.T, b []byte) map[protowire.Number][][]byte {
	t.Helper()
	out := map[protowire.Number][][]byte{}
	if err := codec.Walk(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ == protowire.BytesType {
			out[num] = append(out[num], v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
