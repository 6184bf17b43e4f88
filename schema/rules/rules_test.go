package rules

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

func mustSchema(t testing.TB, js string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return &s
}

func mustObj(t testing.TB, js string) map[string]any {
	t.Helper()
	if js == "" {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return m
}

// rendered is an error list as "field: type: detail" lines.
func rendered(errs meta.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

// spec wraps the properties of a spec in a root object schema.
func spec(props string, rules string) string {
	r := ""
	if rules != "" {
		r = `,"x-kubernetes-validations":` + rules
	}
	return `{"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
"spec":{"type":"object","properties":` + props + r + `}}}`
}

// TestRules: the examples of Kubernetes' CRD validation rules
// documentation, on creates and updates.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name, schema, obj, old, want string
	}{
		{"replicas in range",
			spec(`{"minReplicas":{"type":"integer"},"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"}}`,
				`[{"rule":"self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas","message":"replicas should be in the range minReplicas..maxReplicas."}]`),
			`{"spec":{"minReplicas":1,"replicas":5,"maxReplicas":3}}`, "",
			`spec: Invalid value: replicas should be in the range minReplicas..maxReplicas.`},
		{"replicas in range holds",
			spec(`{"minReplicas":{"type":"integer"},"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"}}`,
				`[{"rule":"self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas"}]`),
			`{"spec":{"minReplicas":1,"replicas":2,"maxReplicas":3}}`, "", ``},
		{"default message",
			spec(`{"x":{"type":"string"}}`, `[{"rule":"self.x.startsWith('a')"}]`),
			`{"spec":{"x":"b"}}`, "", `spec: Invalid value: failed rule: self.x.startsWith('a')`},
		{"missing field is an evaluation error",
			spec(`{"x":{"type":"string"}}`, `[{"rule":"self.x == 'a'"}]`),
			`{"spec":{}}`, "", `spec: Invalid value: "object": no such key: x evaluating rule: self.x == 'a'`},
		{"has() guards",
			spec(`{"x":{"type":"string"}}`, `[{"rule":"!has(self.x) || self.x == 'a'"}]`),
			`{"spec":{}}`, "", ``},
		{"messageExpression",
			spec(`{"x":{"type":"integer"},"maxLimit":{"type":"integer"},"unit":{"type":"string","maxLength":8}}`,
				`[{"rule":"self.x <= self.maxLimit","messageExpression":"'x exceeded its max limit, in ' + self.unit"}]`),
			`{"spec":{"x":5,"maxLimit":3,"unit":"pods"}}`, "", `spec: Invalid value: x exceeded its max limit, in pods`},
		{"reason and fieldPath",
			spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x >= 0","message":"x must not be negative","reason":"FieldValueForbidden","fieldPath":".x"}]`),
			`{"spec":{"x":-1}}`, "", `spec.x: Forbidden: x must not be negative`},
		{"immutable: transition rules do not run on creates",
			`{"type":"object","properties":{"spec":{"type":"object","properties":{"name":{"type":"string","x-kubernetes-validations":[{"rule":"self == oldSelf","message":"Value is immutable"}]}}}}}`,
			`{"spec":{"name":"a"}}`, "", ``},
		{"immutable",
			`{"type":"object","properties":{"spec":{"type":"object","properties":{"name":{"type":"string","x-kubernetes-validations":[{"rule":"self == oldSelf","message":"Value is immutable"}]}}}}}`,
			`{"spec":{"name":"b"}}`, `{"spec":{"name":"a"}}`, `spec.name: Invalid value: "b": Value is immutable`},
		{"optionalOldSelf runs on creates",
			spec(`{"x":{"type":"integer"}}`, `[{"rule":"!oldSelf.hasValue() || self.x >= oldSelf.value().x","optionalOldSelf":true,"message":"x may only grow"},{"rule":"oldSelf.hasValue() || self.x == 0","optionalOldSelf":true,"message":"x starts at 0"}]`),
			`{"spec":{"x":1}}`, "", `spec: Invalid value: x starts at 0`},
		{"optionalOldSelf on updates",
			spec(`{"x":{"type":"integer"}}`, `[{"rule":"!oldSelf.hasValue() || self.x >= oldSelf.value().x","optionalOldSelf":true,"message":"x may only grow"}]`),
			`{"spec":{"x":1}}`, `{"spec":{"x":2}}`, `spec: Invalid value: x may only grow`},
		{"map values",
			spec(`{"limits":{"type":"object","maxProperties":100,"additionalProperties":{"type":"integer"},"x-kubernetes-validations":[{"rule":"self.all(k, self[k] > 0)"}]}}`, ``),
			`{"spec":{"limits":{"a":1,"b":0}}}`, "", `spec.limits: Invalid value: failed rule: self.all(k, self[k] > 0)`},
		{"list items",
			spec(`{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"x-kubernetes-validations":[{"rule":"self.name.startsWith('a')"}]}}}`, ``),
			`{"spec":{"items":[{"name":"ab"},{"name":"b"}]}}`, "", `spec.items[1]: Invalid value: failed rule: self.name.startsWith('a')`},
		{"sets",
			spec(`{"set1":{"type":"array","maxItems":100,"items":{"type":"string"}},"set2":{"type":"array","maxItems":100,"items":{"type":"string"}}}`, `[{"rule":"self.set1.all(e, !(e in self.set2))"}]`),
			`{"spec":{"set1":["a"],"set2":["b","a"]}}`, "", `spec: Invalid value: failed rule: self.set1.all(e, !(e in self.set2))`},
		{"escaped names",
			spec(`{"foo-bar":{"type":"string"},"namespace":{"type":"string"}}`, `[{"rule":"self.foo__dash__bar == self.__namespace__"}]`),
			`{"spec":{"foo-bar":"a","namespace":"b"}}`, "", `spec: Invalid value: failed rule: self.foo__dash__bar == self.__namespace__`},
		{"root sees name",
			`{"type":"object","x-kubernetes-validations":[{"rule":"self.metadata.name.startsWith('ok')"}],"properties":{"spec":{"type":"object"}}}`,
			`{"metadata":{"name":"bad","namespace":"x"},"spec":{}}`, "", `<nil>: Invalid value: failed rule: self.metadata.name.startsWith('ok')`},
		{"set lists compare as sets",
			spec(`{"s":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"},"x-kubernetes-validations":[{"rule":"self == oldSelf","message":"immutable"}]}}`, ``),
			`{"spec":{"s":["a","b"]}}`, `{"spec":{"s":["b","a"]}}`, ``},
		{"durations and times",
			spec(`{"d":{"type":"string","format":"duration"},"t":{"type":"string","format":"date-time"}}`, `[{"rule":"self.d > duration('1m') && self.t < timestamp('2030-01-01T00:00:00Z')"}]`),
			`{"spec":{"d":"30s","t":"2026-01-01T00:00:00Z"}}`, "", `spec: Invalid value: failed rule: self.d > duration('1m') && self.t < timestamp('2030-01-01T00:00:00Z')`},
		{"int-or-string",
			spec(`{"port":{"x-kubernetes-int-or-string":true}}`, `[{"rule":"type(self.port) == int ? self.port > 0 : self.port != ''"}]`),
			`{"spec":{"port":0}}`, "", `spec: Invalid value: failed rule: type(self.port) == int ? self.port > 0 : self.port != ''`},
		// Kubernetes' value semantics: null reads as absent, objects compare
		// with their undeclared members, type names do not collide.
		{"null is absent", spec(`{"n":{"type":"string","nullable":true}}`, `[{"rule":"!has(self.n)"}]`), `{"spec":{"n":null}}`, "", ``},
		{"unknown members count in equality",
			spec(`{"u":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"self == oldSelf","message":"immutable"}]}}`, ``),
			`{"spec":{"u":{"a":1,"extra":2}}}`, `{"spec":{"u":{"a":1,"extra":1}}}`, `spec.u: Invalid value: immutable`},
		{"a dotted property and a nested one",
			`{"type":"object","properties":{"a.b":{"type":"object","properties":{"y":{"type":"integer"}}},
			"a":{"type":"object","properties":{"b":{"type":"object","properties":{"x":{"type":"integer"}}}}}},
			"x-kubernetes-validations":[{"rule":"self.a.b.x == 1 && self.a__dot__b.y == 2"}]}`,
			`{"a":{"b":{"x":1}},"a.b":{"y":2}}`, "", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Compile(mustSchema(t, tc.schema), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			errs, _ := v.Validate(context.Background(), mustObj(t, tc.obj), mustObj(t, tc.old))
			if got := rendered(errs); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRatcheting: on an update a rule that fails where the value at its
// level is unchanged is a warning, so a rule added after an object was
// stored does not lock it; where the value changed it is an error.
func TestRatcheting(t *testing.T) {
	v, err := Compile(mustSchema(t, spec(`{"replicas":{"type":"integer","x-kubernetes-validations":[{"rule":"self <= 10"}]},"note":{"type":"string"},
		"ports":{"type":"array","maxItems":10,"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","properties":{"name":{"type":"string","maxLength":10},"port":{"type":"integer"}},
			"x-kubernetes-validations":[{"rule":"self.port < 1000"}]}}}`, ``)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	old := mustObj(t, `{"spec":{"replicas":20,"note":"a","ports":[{"name":"x","port":5000},{"name":"y","port":1}]}}`)
	for _, tc := range []struct{ obj, errs, warnings string }{
		{`{"spec":{"replicas":20,"note":"b","ports":[{"name":"y","port":1},{"name":"x","port":5000}]}}`, ``,
			`spec.ports[1]: Invalid value: failed rule: self.port < 1000` + "\n" + `spec.replicas: Invalid value: 20: failed rule: self <= 10`},
		{`{"spec":{"replicas":30,"note":"b","ports":[{"name":"x","port":5000}]}}`, `spec.replicas: Invalid value: 30: failed rule: self <= 10`,
			`spec.ports[0]: Invalid value: failed rule: self.port < 1000`},
		{`{"spec":{"replicas":20,"ports":[{"name":"x","port":5001},{"name":"z","port":2000}]}}`,
			`spec.ports[0]: Invalid value: failed rule: self.port < 1000` + "\n" + `spec.ports[1]: Invalid value: failed rule: self.port < 1000`,
			`spec.replicas: Invalid value: 20: failed rule: self <= 10`},
	} {
		errs, warnings := v.Validate(context.Background(), mustObj(t, tc.obj), old)
		if got := rendered(errs); got != tc.errs {
			t.Errorf("%s errors:\n got  %s\n want %s", tc.obj, got, tc.errs)
		}
		if got := strings.Join(warnings, "\n"); got != tc.warnings {
			t.Errorf("%s warnings:\n got  %s\n want %s", tc.obj, got, tc.warnings)
		}
	}
}

// TestCompileErrors: registration refuses rules that do not compile, are
// not boolean, or cost too much, naming each.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.y > 1"}]`), `spec: x-kubernetes-validations[0]: rule: Invalid value: "self.y > 1": compilation failed: ERROR: <input>:1:5: undefined field 'y'`},
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x"}]`), `spec: x-kubernetes-validations[0]: rule: Invalid value: "self.x": cel expression must evaluate to a bool`},
		// Fields a schema keeps without describing them are not visible.
		{spec(`{"u":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-validations":[{"rule":"self.z == 1"}]}}`, ``), `undefined field 'z'`},
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x > 0","messageExpression":"self.x"}]`), `messageExpression: Invalid value: "self.x": must evaluate to a string`},
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x > 0","reason":"Bad"}]`), `reason: Unsupported value: "Bad"`},
		// Kubernetes refuses its documentation's own example: a string
		// made from an int has no size bound.
		{spec(`{"x":{"type":"integer"},"maxLimit":{"type":"integer"}}`, `[{"rule":"self.x <= self.maxLimit","messageExpression":"'x exceeded max limit of ' + string(self.maxLimit)"}]`),
			`messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x`},
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x > 0","fieldPath":".y"}]`), `fieldPath: Invalid value: ".y"`},
		{spec(`{"x":{"type":"integer"}}`, `[{"rule":"self.x > 0","optionalOldSelf":true}]`), `optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`},
		{spec(`{"l":{"type":"array","items":{"type":"string"}}}`, `[{"rule":"self.l.all(a, self.l.all(b, a == b))"}]`), `estimated rule cost exceeds budget`},
		{spec(`{"l":{"type":"array","maxItems":5,"items":{"type":"string","maxLength":5,"x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}`, ``),
			`spec.l[0]: x-kubernetes-validations[0]: rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.l`},
	} {
		_, err := Compile(mustSchema(t, tc.schema), Limits{})
		if err == nil || !IsCompileError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.schema, err, tc.want)
		}
	}
	// Bounded, the same rule is fine.
	if _, err := Compile(mustSchema(t, spec(`{"l":{"type":"array","maxItems":20,"items":{"type":"string","maxLength":10}}}`, `[{"rule":"self.l.all(a, self.l.all(b, a == b))"}]`)), Limits{}); err != nil {
		t.Errorf("bounded list: %v", err)
	}
}

// TestRuntimeBudget: evaluations share the object's budget; past it the
// validation stops with Kubernetes' error.
func TestRuntimeBudget(t *testing.T) {
	v, err := Compile(mustSchema(t, spec(`{"l":{"type":"array","maxItems":100,"items":{"type":"string","maxLength":10,"x-kubernetes-validations":[{"rule":"self.size() < 5"}]}}}`, ``)), Limits{PerObject: 20})
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for range 50 {
		items = append(items, `"ab"`)
	}
	errs, _ := v.Validate(context.Background(), mustObj(t, `{"spec":{"l":[`+strings.Join(items, ",")+`]}}`), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "running out of cost budget") {
		t.Fatalf("got %s", rendered(errs))
	}
}

// TestEmbeddedResource: an embedded resource is an object with kind,
// apiVersion and metadata.name and generateName, whatever its schema says.
func TestEmbeddedResource(t *testing.T) {
	v, err := Compile(mustSchema(t, spec(`{"template":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,
		"x-kubernetes-validations":[{"rule":"self.kind == 'ConfigMap' && self.metadata.name.startsWith('cm-')","message":"only cm- configmaps"}]}}`, ``)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for obj, want := range map[string]string{
		`{"spec":{"template":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a"},"data":{"k":"v"}}}}`: ``,
		`{"spec":{"template":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"cm-a"}}}}`:                     `spec.template: Invalid value: only cm- configmaps`,
	} {
		errs, _ := v.Validate(context.Background(), mustObj(t, obj), nil)
		if got := rendered(errs); got != want {
			t.Errorf("%s: got %q, want %q", obj, got, want)
		}
	}
}

// TestMessageExpressionCostLimit: a messageExpression that exceeds its
// per-call cost ends the validation with Kubernetes' error (it used to
// crash the evaluation).
func TestMessageExpressionCostLimit(t *testing.T) {
	v, err := Compile(mustSchema(t, spec(`{"xs":{"type":"array","maxItems":1000,"items":{"type":"integer"}}}`,
		`[{"rule":"size(self.xs) < 2","messageExpression":"string(self.xs.map(x, x * 2).size())"},{"rule":"false","message":"never reached"}]`)), Limits{PerCall: 100})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, 200)
	for i := range items {
		items[i] = "1"
	}
	errs, _ := v.Validate(context.Background(), mustObj(t, `{"spec":{"xs":[`+strings.Join(items, ",")+`]}}`), nil)
	want := `spec: Invalid value: "object": no further validation rules will be run due to call cost exceeds limit for messageExpression: "string(self.xs.map(x, x * 2).size())"`
	if got := rendered(errs); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestUncorrelatedTransitionRules: oldSelf is refused where elements have
// no old value: under sets, atomic lists and atomic maps.
func TestUncorrelatedTransitionRules(t *testing.T) {
	for _, sch := range []string{
		spec(`{"s":{"type":"array","maxItems":5,"x-kubernetes-list-type":"set","items":{"type":"string","maxLength":5,"x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}`, ``),
		spec(`{"m":{"type":"object","x-kubernetes-map-type":"atomic","properties":{"k":{"type":"string","x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}}`, ``),
	} {
		if _, err := Compile(mustSchema(t, sch), Limits{}); err == nil || !strings.Contains(err.Error(), "oldSelf cannot be used on the uncorrelatable portion of the schema") {
			t.Errorf("%s: got %v", sch, err)
		}
	}
}
