package meta

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLabelSelector(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical String(); ignored when err is set
		err  string // substring of the error
	}{
		{in: "", want: ""},
		{in: "   ", want: ""},
		{in: "a=b", want: "a=b"},
		{in: "a==b", want: "a==b"},
		{in: "a!=b", want: "a!=b"},
		{in: " a = b ", want: "a=b"},
		{in: "a=", want: "a="},
		{in: "a=,b=c", want: "a=,b=c"},
		{in: "a", want: "a"},
		{in: "!a", want: "!a"},
		{in: "! a", want: "!a"},
		{in: "a in (x,y)", want: "a in (x,y)"},
		{in: "a in (y, x, x)", want: "a in (x,y)"},
		{in: "a in(x)", want: "a in (x)"},
		{in: "a notin (x,y)", want: "a notin (x,y)"},
		{in: "a in ()", want: "a in ()"},
		{in: "a in (,x)", want: "a in (,x)"},
		{in: "a in (x,)", want: "a in (,x)"},
		{in: "a in (in,notin)", want: "a in (in,notin)"},
		{in: "a>5", want: "a>5"},
		{in: "a < -5", want: "a<-5"},
		{in: "z=1,a=2,m", want: "a=2,m,z=1"},
		{in: "example.com/app=web,tier notin (db),!legacy", want: "example.com/app=web,!legacy,tier notin (db)"},
		{in: "in=x", want: "in=x"},
		{in: "x=in", want: "x=in"},
		{in: "a\tin\t(x)", want: "a in (x)"},

		{in: "a b", err: "found 'b', expected: in, notin, =, ==, !=, gt, lt"},
		{in: "a=b c", err: "found 'c', expected: ',' or 'end of string'"},
		{in: "a=b,", err: "found '', expected: identifier after ','"},
		{in: ",a", err: "found ',', expected: !, identifier, or 'end of string'"},
		{in: "a=b,,c", err: "found ',', expected: identifier after ','"},
		{in: "!", err: "found '', expected: identifier after '!'"},
		{in: "!a=b", err: "found '=', expected: ',' or 'end of string'"},
		{in: "=b", err: "found '=', expected: !, identifier, or 'end of string'"},
		{in: "a in x", err: "found 'x' expected: '('"},
		{in: "a in (x", err: "found '', expected: ',', ')' or identifier"},
		{in: "a in (x y)", err: "found 'y', expected: ',' or ')'"},
		{in: "a=(b)", err: "found '(', expected: identifier"},
		{in: "a>b", err: "for 'Gt', 'Lt' operators, the value must be an integer"},
		{in: "a>", err: "for 'Gt', 'Lt' operators, the value must be an integer"},
		{in: "a b=c", err: "found 'b'"},
		{in: "-a=b", err: `key: Invalid value: "-a": name part must consist of alphanumeric characters`},
		{in: "a/b/c=d", err: "a qualified name must consist of"},
		{in: "a=b-", err: `values[0]: Invalid value: "b-": a valid label must be an empty string or consist of alphanumeric characters`},
		{in: "a in (x,-y)", err: `values[0]: Invalid value: "-y"`},
		{in: strings.Repeat("k", 64) + "=v", err: "name part must be no more than 63 characters"},
		{in: "k=" + strings.Repeat("v", 64), err: "must be no more than 63 characters"},
	}
	for _, tt := range tests {
		sel, err := ParseLabelSelector(tt.in)
		if tt.err != "" {
			if err == nil {
				t.Errorf("ParseLabelSelector(%q) = %q, want error %q", tt.in, sel, tt.err)
			} else if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseLabelSelector(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
			} else {
				var lse *LabelSelectorError
				if !errors.As(err, &lse) || lse.Selector != tt.in {
					t.Errorf("ParseLabelSelector(%q) error is not a *LabelSelectorError for the input", tt.in)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLabelSelector(%q): %v", tt.in, err)
			continue
		}
		if got := sel.String(); got != tt.want {
			t.Errorf("ParseLabelSelector(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		if sel.Empty() != (tt.want == "") {
			t.Errorf("ParseLabelSelector(%q).Empty() = %v", tt.in, sel.Empty())
		}
	}
}

func TestLabelSelectorMatches(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "n": "10", "empty": ""}
	tests := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"app=web", true},
		{"app==web", true},
		{"app=db", false},
		{"app!=db", true},
		{"app!=web", false},
		{"missing!=x", true},
		{"missing=x", false},
		{"app", true},
		{"missing", false},
		{"!missing", true},
		{"!app", false},
		{"app in (web,db)", true},
		{"app in (db)", false},
		{"missing in (db)", false},
		{"app notin (db)", true},
		{"app notin (web)", false},
		{"missing notin (web)", true},
		{"empty=", true},
		{"empty in ()", true},
		{"missing=", false},
		{"n>9", true},
		{"n>10", false},
		{"n<11", true},
		{"app>1", false}, // not an integer label
		{"missing<1", false},
		{"app=web,tier=front", true},
		{"app=web,tier=back", false},
	}
	for _, tt := range tests {
		sel, err := ParseLabelSelector(tt.sel)
		if err != nil {
			t.Fatalf("ParseLabelSelector(%q): %v", tt.sel, err)
		}
		if got := sel.Matches(labels); got != tt.want {
			t.Errorf("%q.Matches = %v, want %v", tt.sel, got, tt.want)
		}
	}
	var zero LabelSelector
	if !zero.Matches(nil) || !zero.Empty() || zero.String() != "" {
		t.Error("the zero selector should be empty and match everything")
	}
}

func TestLabelSelectorRequirements(t *testing.T) {
	sel, err := ParseLabelSelector("b in (y,x),a")
	if err != nil {
		t.Fatal(err)
	}
	reqs := sel.Requirements()
	if len(reqs) != 2 || reqs[0].Key != "a" || reqs[0].Operator != LabelOpExists ||
		reqs[1].Operator != LabelOpIn || strings.Join(reqs[1].Values, ",") != "x,y" {
		t.Fatalf("Requirements() = %#v", reqs)
	}
	reqs[1].Values[0] = "changed"
	if sel.String() != "a,b in (x,y)" {
		t.Error("Requirements() shares memory with the selector")
	}
}

func TestNewLabelRequirement(t *testing.T) {
	tests := []struct {
		key, op string
		values  []string
		err     string
	}{
		{"a", LabelOpIn, []string{"x"}, ""},
		{"a", LabelOpIn, nil, "for 'in', 'notin' operators, values set can't be empty"},
		{"a", LabelOpEquals, []string{"x", "y"}, "exact-match compatibility requires one single value"},
		{"a", LabelOpExists, []string{"x"}, "values set must be empty for exists and does not exist"},
		{"a", LabelOpGreaterThan, []string{"1", "2"}, "exactly one value is required"},
		{"a", "~", nil, `operator: Unsupported value: "~"`},
		{"", LabelOpExists, nil, "name part must be non-empty"},
	}
	for _, tt := range tests {
		_, err := NewLabelRequirement(tt.key, tt.op, tt.values)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("NewLabelRequirement(%q, %q, %q) = %v, want %q", tt.key, tt.op, tt.values, err, tt.err)
		}
	}
}

func TestLabelSelectorFromObject(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		err    string
		labels map[string]string
		match  bool
	}{
		{in: `{}`, want: "", labels: nil, match: true},
		{in: `{"matchLabels":{"app":"web","b":"c"}}`, want: "app=web,b=c", labels: map[string]string{"app": "web", "b": "c"}, match: true},
		{in: `{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]},{"key":"x","operator":"DoesNotExist"}]}`,
			want: "app=web,tier in (a,b),!x", labels: map[string]string{"app": "web", "tier": "b"}, match: true},
		{in: `{"matchExpressions":[{"key":"t","operator":"NotIn","values":["a"]},{"key":"e","operator":"Exists"}]}`,
			want: "e,t notin (a)", labels: map[string]string{"t": "a", "e": ""}, match: false},
		{in: `{"matchExpressions":[{"key":"t","operator":"Gt","values":["1"]}]}`, err: `"Gt" is not a valid label selector operator`},
		{in: `{"matchExpressions":[{"key":"t","operator":"In","values":[]}]}`, err: "values set can't be empty"},
		{in: `{"matchExpressions":[{"key":"t","operator":"Exists","values":["a"]}]}`, err: "values set must be empty"},
		{in: `{"matchExpressions":[{"key":"-t","operator":"Exists"}]}`, err: "matchExpressions[0]: key: Invalid value"},
		{in: `{"matchExpressions":[{"key":"t","operator":"In","values":[1]}]}`, err: "values[0]: must be a string"},
		{in: `{"matchExpressions":{}}`, err: "matchExpressions: must be an array"},
		{in: `{"matchExpressions":[1]}`, err: "matchExpressions[0]: must be an object"},
		{in: `{"matchExpressions":[{"key":"t"}]}`, err: "operator: must be a string"},
		{in: `{"matchLabels":[]}`, err: "matchLabels: must be an object"},
		{in: `{"matchLabels":{"a":1}}`, err: "matchLabels[a]: must be a string"},
		{in: `{"matchLabels":{"a":"-"}}`, err: "matchLabels[a]: values[0]: Invalid value"},
	}
	for _, tt := range tests {
		sel, err := LabelSelectorFromObject(decode(t, tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("LabelSelectorFromObject(%s) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("LabelSelectorFromObject(%s): %v", tt.in, err)
			continue
		}
		if sel.String() != tt.want {
			t.Errorf("LabelSelectorFromObject(%s) = %q, want %q", tt.in, sel, tt.want)
		}
		if sel.Matches(tt.labels) != tt.match {
			t.Errorf("LabelSelectorFromObject(%s).Matches(%v) = %v", tt.in, tt.labels, !tt.match)
		}
	}
	nothing, err := LabelSelectorFromObject(nil)
	if err != nil || nothing.Matches(map[string]string{}) || nothing.Empty() {
		t.Errorf("a nil selector should match nothing: %v", err)
	}
}

func FuzzParseLabelSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b,c!=d", "a in (x,y),!b", "a notin (,)", "x>1,y<2", "a in ()",
		"example.com/app=web", "a b", "a=b,", "!", "a in (x", "a\tin(x,,y)", "k=v-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseLabelSelector(s)
		if err != nil {
			return
		}
		str := sel.String()
		again, err := ParseLabelSelector(str)
		if err != nil {
			t.Fatalf("String() of %q is %q, which does not parse: %v", s, str, err)
		}
		if again.String() != str {
			t.Fatalf("round trip of %q: %q then %q", s, str, again.String())
		}
		labels := map[string]string{"a": "b", "x": "1"}
		if sel.Matches(labels) != again.Matches(labels) {
			t.Fatalf("%q and %q match differently", s, str)
		}
	})
}
