package codec

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeYAML(t *testing.T) {
	tests := []struct {
		in   string
		want string // JSON of the decoded value
		dups []string
		err  string
	}{
		{in: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"1\"\n", want: `{"apiVersion":"v1","data":{"x":"1"},"kind":"ConfigMap","metadata":{"name":"a"}}`},
		{in: `{"a": 1, "b": [true, null]}`, want: `{"a":1,"b":[true,null]}`},
		{in: "a: yes\nb: off\nc: 0x10\nd: 1.5\n", want: `{"a":true,"b":false,"c":16,"d":1.5}`},
		{in: "base: &b {x: 1}\nuse:\n  <<: *b\n  z: 2\n", want: `{"base":{"x":1},"use":{"x":1,"z":2}}`},
		{in: "y: n\n", want: `{"true":false}`}, // YAML 1.1, as kube-apiserver reads it
		{in: "metadata:\n  name: a\n  name: b\nspec:\n  - k: 1\n    k: 2\n", dups: []string{"metadata.name", "spec[0].k"}, want: `{"metadata":{"name":"b"},"spec":[{"k":2}]}`},
		{in: "", err: "empty"},
		{in: "a: 1\n---\nb: 2\n", err: "more than one document"},
		{in: "a: [1, 2", err: "yaml"},
		{in: "a: *nope\n", err: "unknown anchor"},
		{in: "a: .inf\n", err: "unsupported value"},
		{in: "\x00\x01k8s", err: "yaml"},
	}
	for _, tt := range tests {
		got, dups, err := DecodeYAML([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("DecodeYAML(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("DecodeYAML(%q): %v", tt.in, err)
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != tt.want {
			t.Errorf("DecodeYAML(%q) = %s, want %s", tt.in, b, tt.want)
		}
		if strings.Join(dups, ",") != strings.Join(tt.dups, ",") {
			t.Errorf("DecodeYAML(%q) dups = %v, want %v", tt.in, dups, tt.dups)
		}
	}
}

// billionLaughs builds an alias bomb: width^depth leaves from a few hundred
// bytes.
func billionLaughs(width, depth int) string {
	var b strings.Builder
	b.WriteString("a00: &a00 [" + strings.TrimSuffix(strings.Repeat(`"x",`, width), ",") + "]\n")
	for i := 1; i <= depth; i++ {
		prev := "*a" + itoa(i-1)
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [" + strings.TrimSuffix(strings.Repeat(prev+",", width), ",") + "]\n")
	}
	return b.String()
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func TestDecodeYAMLBombs(t *testing.T) {
	for name, in := range map[string]string{
		"narrow":   billionLaughs(9, 9),
		"wide":     billionLaughs(1000, 3),
		"deepList": strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		"deepMap":  strings.Repeat("{a: ", 20000) + "1" + strings.Repeat("}", 20000),
	} {
		if _, _, err := DecodeYAML([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Few nodes, many bytes: one long anchored string referenced many
	// times (a 109 KB body that expanded to 300 MB).
	long := "s: &s " + strings.Repeat("x", 100000) + "\nl:\n" + strings.Repeat("- *s\n", 3000)
	if _, _, err := DecodeYAML([]byte(long)); err == nil || !strings.Contains(err.Error(), "aliases expand") {
		t.Errorf("long anchored string: %v, want refused for its aliases' bytes", err)
	}
	// The bound is the caller's: 10 references of 1,000 bytes fit 20,000.
	ten := "s: &s " + strings.Repeat("x", 1000) + "\nl:\n" + strings.Repeat("- *s\n", 10)
	if _, _, err := DecodeYAMLLimit([]byte(ten), 20000); err != nil {
		t.Errorf("10 KB through aliases under a 20 KB bound: %v", err)
	}
	if _, _, err := DecodeYAMLLimit([]byte(ten), 5000); err == nil {
		t.Errorf("10 KB through aliases under a 5 KB bound: accepted")
	}
	// A document without aliases is never refused for its bytes.
	big := "s: " + strings.Repeat("x", 200000) + "\n"
	if _, _, err := DecodeYAMLLimit([]byte(big), 1000); err != nil {
		t.Errorf("no aliases: %v", err)
	}
	// Modest reuse of anchors is fine.
	if _, _, err := DecodeYAML([]byte(billionLaughs(3, 3))); err != nil {
		t.Errorf("small anchors: %v", err)
	}
}

// FuzzDecodeYAML: never a panic, and whatever decodes is a JSON value.
func FuzzDecodeYAML(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: &x [1]\nb: *x\n", "- a\n- {b: c}\n", "<<: {a: 1}\n", "a: !!binary aGVsbG8=\n", "? [a]\n: 1\n"} {
		f.Add([]byte(s))
	}
	f.Add([]byte("a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _, err := DecodeYAML(data)
		if err != nil {
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("DecodeYAML(%q) = %#v, not JSON: %v", data, v, err)
		}
		// What a small alias bound accepts stays within a few times the
		// body and the bound.
		const bound = 256
		v, _, err = DecodeYAMLLimit(data, bound)
		if err != nil {
			return
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("DecodeYAMLLimit(%q) = %#v, not JSON: %v", data, v, err)
		}
		if len(j) > 8*(len(data)+bound)+64 {
			t.Fatalf("DecodeYAMLLimit(%q, %d) accepted a document of %d bytes as JSON", data, bound, len(j))
		}
	})
}
