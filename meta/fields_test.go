package meta

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseFieldSelector(t *testing.T) {
	tests := []struct {
		in   string
		want []FieldRequirement
		str  string
		err  string
	}{
		{in: "", want: nil, str: ""},
		{in: "metadata.name=x", want: []FieldRequirement{{"metadata.name", "=", "x"}}, str: "metadata.name=x"},
		{in: "metadata.name==x", want: []FieldRequirement{{"metadata.name", "=", "x"}}, str: "metadata.name=x"},
		{in: "status.phase!=Running", want: []FieldRequirement{{"status.phase", "!=", "Running"}}, str: "status.phase!=Running"},
		{in: "b=2,a=1", want: []FieldRequirement{{"a", "=", "1"}, {"b", "=", "2"}}, str: "a=1,b=2"},
		{in: "a=", want: []FieldRequirement{{"a", "=", ""}}, str: "a="},
		{in: "a=1,", want: []FieldRequirement{{"a", "=", "1"}}, str: "a=1"},
		{in: " a =1", want: []FieldRequirement{{"a", "=", "1"}}, str: "a=1"},
		{in: `a=x\,y`, want: []FieldRequirement{{"a", "=", "x,y"}}, str: `a=x\,y`},
		{in: `a=x\=y\\z`, want: []FieldRequirement{{"a", "=", `x=y\z`}}, str: `a=x\=y\\z`},
		{in: `a=x\,y,b!=\\`, want: []FieldRequirement{{"a", "=", "x,y"}, {"b", "!=", `\`}}, str: `a=x\,y,b!=\\`},

		{in: "a", err: "invalid selector: 'a'; can't understand 'a'"},
		{in: "a=1,b", err: "can't understand 'b'"},
		{in: "=x", err: `invalid field name ""`},
		{in: "a! =x", err: `invalid field name "a!"`},
		{in: `a=x\y`, err: `invalid field selector: invalid escape sequence: \y`},
		{in: `a=x\`, err: `invalid escape sequence: \`},
		{in: "a=x=y", err: "invalid field selector: unescaped character in value: ="},
		{in: "a==x=y", err: "unescaped character in value: ="},
	}
	for _, tt := range tests {
		sel, err := ParseFieldSelector(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseFieldSelector(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFieldSelector(%q): %v", tt.in, err)
			continue
		}
		if got := sel.Requirements(); !reflect.DeepEqual(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
			t.Errorf("ParseFieldSelector(%q).Requirements() = %#v, want %#v", tt.in, got, tt.want)
		}
		if got := sel.String(); got != tt.str {
			t.Errorf("ParseFieldSelector(%q).String() = %q, want %q", tt.in, got, tt.str)
		}
		if sel.Empty() != (len(tt.want) == 0) {
			t.Errorf("ParseFieldSelector(%q).Empty() = %v", tt.in, sel.Empty())
		}
	}
}

func TestFieldSelectorMatches(t *testing.T) {
	fields := map[string]string{"metadata.name": "w", "metadata.namespace": "ns", "spec.color": "a,b"}
	get := func(f string) (string, bool) { v, ok := fields[f]; return v, ok }
	tests := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"metadata.name=w", true},
		{"metadata.name=x", false},
		{"metadata.name!=x", true},
		{"metadata.name!=w", false},
		{"metadata.name=w,metadata.namespace=ns", true},
		{"metadata.name=w,metadata.namespace=other", false},
		{`spec.color=a\,b`, true},
		{"spec.missing=", true}, // an unknown field reads as ""
		{"spec.missing=x", false},
		{"spec.missing!=x", true},
	}
	for _, tt := range tests {
		sel, err := ParseFieldSelector(tt.sel)
		if err != nil {
			t.Fatalf("ParseFieldSelector(%q): %v", tt.sel, err)
		}
		if got := sel.Matches(get); got != tt.want {
			t.Errorf("%q.Matches = %v, want %v", tt.sel, got, tt.want)
		}
	}
}

func TestFieldSelectorRequiresExactMatch(t *testing.T) {
	sel, err := ParseFieldSelector("metadata.namespace!=x,metadata.name=foo")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sel.RequiresExactMatch("metadata.name"); !ok || v != "foo" {
		t.Errorf("RequiresExactMatch(metadata.name) = %q, %v", v, ok)
	}
	if _, ok := sel.RequiresExactMatch("metadata.namespace"); ok {
		t.Error("a != requirement is not an exact match")
	}
	if _, ok := sel.RequiresExactMatch("spec.x"); ok {
		t.Error("no requirement on spec.x")
	}
	name := "a,b=c"
	sel, err = ParseFieldSelector("metadata.name=" + EscapeFieldValue(name))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sel.RequiresExactMatch("metadata.name"); !ok || v != name {
		t.Errorf("escaped name round trip = %q, %v", v, ok)
	}
}

func TestEscapeFieldValue(t *testing.T) {
	for _, s := range []string{"", "plain", `a\b`, "a,b", "a=b", `\,=`, "ünïcode,"} {
		esc := EscapeFieldValue(s)
		back, err := UnescapeFieldValue(esc)
		if err != nil || back != s {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
	}
	if got := EscapeFieldValue(`a,b=c\d`); got != `a\,b\=c\\d` {
		t.Errorf("EscapeFieldValue = %q", got)
	}
}

func FuzzParseFieldSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b,c!=d", `a=x\,y`, `a=\\`, "a", "=x", `a=x\`, "a=b=c", "b=1,a=2,", " a = b "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseFieldSelector(s)
		if err != nil {
			return
		}
		str := sel.String()
		again, err := ParseFieldSelector(str)
		if err != nil {
			t.Fatalf("String() of %q is %q, which does not parse: %v", s, str, err)
		}
		if again.String() != str || !reflect.DeepEqual(again.Requirements(), sel.Requirements()) {
			t.Fatalf("round trip of %q: %#v then %#v", s, sel.Requirements(), again.Requirements())
		}
	})
}
