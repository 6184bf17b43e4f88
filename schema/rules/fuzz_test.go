package rules

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// fuzzSchema has rules of every kind over objects, maps, lists, sets and
// int-or-string values.
const fuzzSchema = `{"type":"object","properties":{"spec":{"type":"object",
 "x-kubernetes-validations":[{"rule":"!has(self.a) || !has(self.b) || self.a <= self.b","messageExpression":"'a is too large: ' + self.s"},{"rule":"self == oldSelf || !has(oldSelf.a) || has(self.a)"}],
 "properties":{"a":{"type":"integer"},"b":{"type":"integer"},"s":{"type":"string","maxLength":64,"x-kubernetes-validations":[{"rule":"self.size() < 10 && !self.contains('x')"}]},
  "m":{"type":"object","maxProperties":32,"additionalProperties":{"type":"string","maxLength":16},"x-kubernetes-validations":[{"rule":"self.all(k, k.size() < 5 && self[k] != 'bad')"}]},
  "l":{"type":"array","maxItems":32,"x-kubernetes-list-type":"set","items":{"type":"integer"},"x-kubernetes-validations":[{"rule":"self.all(x, x >= 0)"},{"rule":"self.size() <= oldSelf.size() + 3"}]},
  "p":{"x-kubernetes-int-or-string":true},
  "u":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"z":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"!has(self.z) || self.z == 1"}]}}}}}`

// FuzzRules validates arbitrary objects, old and new, against rules of
// every kind, with a budget small enough to run out: no panic, every error
// is a field error, and once the budget is out nothing more is evaluated
// (its error is the last one).
func FuzzRules(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"a":1,"b":2,"s":"ok","m":{"k":"v"},"l":[1,2],"p":"x","u":{"z":1}}}`,
		`{"spec":{"a":"1","b":null,"s":5,"m":[],"l":{},"p":1.5,"u":{"z":[1]}}}`,
		`{"spec":{"l":[-1,-2,-3,-4,-5],"m":{"toolong":"bad"}}}`,
		`{"spec":null}`, `{}`, `{"spec":{"a":9007199254740993,"b":1e308}}`,
	} {
		f.Add(seed, `{"spec":{"a":1,"l":[1]}}`)
	}
	v, err := Compile(mustSchema(f, fuzzSchema), Limits{PerObject: 60})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, obj, old string) {
		o, ok := decodeFuzz(obj)
		if !ok {
			return
		}
		var prev map[string]any
		if p, ok := decodeFuzz(old); ok {
			prev = p
		}
		errs, _ := v.Validate(context.Background(), o, prev)
		for i, e := range errs {
			if e.Field == "" || e.Type == "" || strings.Contains(e.Error(), "panic") {
				t.Fatalf("bad error %+v", e)
			}
			if strings.Contains(e.Detail, "running out of cost budget") && i != len(errs)-1 {
				t.Fatalf("evaluations went on after the budget ran out: %v", errs)
			}
		}
	})
}

func decodeFuzz(s string) (map[string]any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	return m, d.Decode(&m) == nil && m != nil
}
