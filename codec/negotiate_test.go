package codec

import (
	"bytes"
	"io"
	"testing"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func TestNegotiate(t *testing.T) {
	json := MediaType{Type: "application", Subtype: "json"}
	yaml := MediaType{Type: "application", Subtype: "yaml"}
	table := MediaType{Type: "application", Subtype: "json", Params: map[string]string{"as": "Table", "g": "meta.k8s.io", "v": "v1"}}
	offers := []MediaType{json, yaml, table}
	tests := []struct {
		accept string
		want   int
	}{
		{"", 0},
		{"*/*", 0},
		{"application/json", 0},
		{"application/yaml", 1},
		{"application/*", 0},
		{"application/json;as=Table;g=meta.k8s.io;v=v1", 2},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", 2},
		{"application/json;as=Table;g=meta.k8s.io;v=v1beta1, application/json", 0},
		{"application/vnd.kubernetes.protobuf", -1},
		{"application/vnd.kubernetes.protobuf, application/json", 0},
		{"application/json;q=0.5, application/yaml", 1},
		{"application/yaml;q=0, application/json", 0},
		{"text/html", -1},
		{"garbage", -1},
	}
	for _, tt := range tests {
		if got, _ := Negotiate(tt.accept, offers); got != tt.want {
			t.Errorf("Negotiate(%q) = %d, want %d", tt.accept, got, tt.want)
		}
	}
}

func TestParseMediaType(t *testing.T) {
	mt, ok := ParseMediaType(`Application/JSON; charset=utf-8; as="Table"; q=0.3`)
	if !ok || mt.Essence() != "application/json" || mt.Params["as"] != "Table" || mt.Params["charset"] != "utf-8" || mt.Q != 0.3 {
		t.Fatalf("ParseMediaType = %+v, %v", mt, ok)
	}
	for _, bad := range []string{"", "json", "/json", "application/", "a/b;q=2", "a/b;noval"} {
		if _, ok := ParseMediaType(bad); ok {
			t.Errorf("ParseMediaType(%q) accepted", bad)
		}
	}
}
