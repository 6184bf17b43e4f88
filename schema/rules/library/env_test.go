package library

import (
	"testing"
	"time"

	"github.com/google/cel-go/cel"
)

// TestEnvironment checks the language settings and cel-go extensions of
// Kubernetes 1.36's base environment, and what it leaves out.
func TestEnvironment(t *testing.T) {
	run(t, []evalCase{
		// Standard library and macros.
		{expr: `[1, 2, 3].exists(x, x > 2) && has({'a': 1}.a)`, want: true},
		{expr: `'abc'.matches('^a')`, want: true},
		// Cross-type numeric comparisons, UTC default time zone.
		{expr: `1 < 1.5 && 2u > 1`, want: true},
		{expr: `timestamp('2021-01-01T23:00:00Z').getHours()`, want: 23},
		// Optional types.
		{expr: `optional.of(1).orValue(2)`, want: 1},
		{expr: `{'a': 1}[?'b'].orValue(3)`, want: 3},
		// Strings version 2.
		{expr: `'hello'.charAt(1) + 'A'.lowerAscii() + ' x '.trim()`, want: "eax"},
		{expr: `'a,b'.split(',').join('-')`, want: "a-b"},
		{expr: `'%s-%d'.format(['a', 1])`, want: "a-1"},
		{expr: `strings.quote('a"b')`, want: `"a\"b"`},
		{expr: `'abc'.reverse()`, compileErr: `undeclared reference to 'reverse'|found no matching overload for 'reverse'`},
		// Sets, two-variable comprehensions, lists version 3.
		{expr: `sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 2]) && sets.equivalent([1, 1], [1])`, want: true},
		{expr: `[10, 20].all(i, v, v == (i + 1) * 10)`, want: true},
		{expr: `{'a': 1}.transformMap(k, v, v + 1)`, want: map[string]int{"a": 2}},
		{expr: `[3, 1, 2].sort()`, want: []int{1, 2, 3}},
		{expr: `lists.range(3).reverse()`, want: []int{2, 1, 0}},
		{expr: `[[1], [1, 3]].flatten().distinct().slice(0, 2)`, want: []int{1, 3}},
		// Literal validators and homogeneous aggregate literals.
		{expr: `duration('1x') == duration('1s')`, compileErr: `invalid duration argument`},
		{expr: `timestamp('yesterday') == timestamp('2021-01-01T00:00:00Z')`, compileErr: `invalid timestamp argument`},
		{expr: `'abc'.matches('[')`, compileErr: `invalid matches argument`},
		{expr: `[1, 'a'].size() == 2`, compileErr: `expected type 'int' but found 'string'`},
		// cel-go v0.26's duration(int), kept for rules Kubernetes 1.36
		// accepts: it type-checks and fails at evaluation (a literal
		// argument fails the duration literal validator, as in 1.36).
		{expr: `[5].all(x, duration(x) == duration('5s'))`, evalErr: `type conversion error from 'int' to 'google.protobuf.Duration'`},
		{expr: `duration(5) == duration('5s')`, compileErr: `invalid duration argument`},
		// Libraries Kubernetes does not enable.
		{expr: `math.greatest(1, 2)`, compileErr: `undeclared reference to 'math.greatest'|undeclared reference to 'greatest'`},
		{expr: `base64.encode(b'a')`, compileErr: `undeclared reference`},
		{expr: `authorizer.path('/healthz')`, compileErr: `undeclared reference to 'authorizer'`},
	})
}

// TestEnvOptionsFresh checks that environments built from separate calls
// do not share state, and that a rule variable can be added on top.
func TestEnvOptionsFresh(t *testing.T) {
	for range 2 {
		env := newEnv(t, cel.Variable("self", cel.ListType(cel.StringType)))
		got, err := evaluate(env, `self.isSorted() && self.indexOf('b') == 1`, map[string]any{"self": []string{"a", "b"}})
		if err != nil || got.Value() != true {
			t.Fatalf("got %v, %v", got, err)
		}
	}
	env := newEnv(t, cel.Variable("self", cel.DurationType))
	if got, err := evaluate(env, `[self, duration('1s')].sum() == duration('61s')`, map[string]any{"self": time.Minute}); err != nil || got.Value() != true {
		t.Fatalf("got %v, %v", got, err)
	}
}
