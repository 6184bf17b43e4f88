package codec

import (
	"bytes"
	"io"
	"slices"
	"strconv"
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

func TestChoose(t *testing.T) {
	// An endpoint like a built-in type's object: JSON, YAML and protobuf;
	// Table in JSON and YAML only; PartialObjectMetadata in every format.
	builtin := func(c Choice) bool { return c.As != AsTable || c.Format != FormatProtobuf }
	// A custom resource: no protobuf for the object itself.
	custom := func(c Choice) bool {
		return (c.As == "" && c.Format != FormatProtobuf) || c.As == AsPartialObjectMetadata || (c.As == AsTable && c.Format != FormatProtobuf)
	}
	tests := []struct {
		accept string
		allow  func(Choice) bool
		want   Choice
		ok     bool
	}{
		{"", builtin, Choice{Format: FormatJSON}, true},
		{"*/*", builtin, Choice{Format: FormatJSON}, true},
		{"application/*", builtin, Choice{Format: FormatJSON}, true},
		{"application/yaml", builtin, Choice{Format: FormatYAML}, true},
		{"application/vnd.kubernetes.protobuf", builtin, Choice{Format: FormatProtobuf}, true},
		{"application/vnd.kubernetes.protobuf", custom, Choice{}, false},
		{"application/vnd.kubernetes.protobuf, application/json", custom, Choice{Format: FormatJSON}, true},
		{"application/vnd.kubernetes.protobuf,application/json", builtin, Choice{Format: FormatProtobuf}, true},
		{"application/json;as=Table;g=meta.k8s.io;v=v1", builtin, Choice{Format: FormatJSON, As: AsTable, Version: "v1"}, true},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", builtin, Choice{Format: FormatJSON, As: AsTable, Version: "v1beta1"}, true},
		{"application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", builtin, Choice{}, false},
		{"application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json", builtin, Choice{Format: FormatJSON}, true},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", custom,
			Choice{Format: FormatProtobuf, As: AsPartialObjectMetadata, Version: "v1"}, true},
		{"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2", builtin, Choice{}, false},
		{"application/json;as=Table;g=example.dev;v=v1, application/yaml", builtin, Choice{Format: FormatYAML}, true},
		{"application/json;as=Foo;g=meta.k8s.io;v=v1", builtin, Choice{}, false},
		{"application/json;g=meta.k8s.io;v=v1", builtin, Choice{}, false},
		{"application/json;stream=watch", builtin, Choice{Format: FormatJSON}, true},
		{"application/json;stream=other", builtin, Choice{}, false},
		{"application/json;pretty=1", builtin, Choice{Format: FormatJSON, Pretty: true}, true},
		{"application/json;q=0.5, application/yaml", builtin, Choice{Format: FormatYAML}, true},
		{"*/*, application/yaml", builtin, Choice{Format: FormatYAML}, true},
		{"application/json;q=0, */*;q=0.1", builtin, Choice{Format: FormatJSON}, true},
		{"text/html", builtin, Choice{}, false},
	}
	for _, tt := range tests {
		got, ok := Choose(tt.accept, tt.allow)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Choose(%q) = %+v, %v; want %+v, %v", tt.accept, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseAccept(t *testing.T) {
	render := func(mts []MediaType) []string {
		var out []string
		for _, m := range mts {
			out = append(out, m.Essence()+" "+strconv.FormatFloat(m.Q, 'g', -1, 64)+" "+m.Params["x"])
		}
		return out
	}
	for _, tc := range []struct {
		header string
		want   []string
	}{
		{"", []string{"*/* 1 "}},
		{"application/json", []string{"application/json 1 "}},
		// q first, then specificity, then order; a comma inside quotes
		// does not split; empty and malformed entries are skipped.
		{`*/*;q=0.8, text/*, application/json;x="a,b", , bad, application/yaml;q=0.8, image/png;q=0`,
			[]string{"application/json 1 a,b", "text/* 1 ", "application/yaml 0.8 ", "*/* 0.8 "}},
		{"a/b,", []string{"a/b 1 "}},
	} {
		if got := render(ParseAccept(tc.header)); !slices.Equal(got, tc.want) {
			t.Errorf("ParseAccept(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
}
