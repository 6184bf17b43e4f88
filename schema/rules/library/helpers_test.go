package library

import (
	"regexp"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// newEnv is the rule environment with a few variables for table tests.
func newEnv(t testing.TB, vars ...cel.EnvOption) *cel.Env {
	t.Helper()
	env, err := cel.NewEnv(append(EnvOptions(), vars...)...)
	if err != nil {
		t.Fatalf("NewEnv: %v", err)
	}
	return env
}

// evalCase is one table test: an expression and either its result, a
// compile error or an evaluation error (regular expressions).
type evalCase struct {
	expr       string
	want       any    // a Go or CEL value, compared with CEL equality
	compileErr string // regexp
	evalErr    string // regexp
}

// run compiles and evaluates each case and checks its outcome.
func run(t *testing.T, cases []evalCase) {
	t.Helper()
	env := newEnv(t)
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			got, err := evaluate(env, c.expr, nil)
			switch {
			case c.compileErr != "":
				if err == nil || !matches(c.compileErr, err.Error()) || !isCompileErr(err) {
					t.Fatalf("want compile error %q, got %v (value %v)", c.compileErr, err, got)
				}
			case c.evalErr != "":
				if err == nil || !matches(c.evalErr, err.Error()) || isCompileErr(err) {
					t.Fatalf("want evaluation error %q, got %v (value %v)", c.evalErr, err, got)
				}
			case err != nil:
				t.Fatalf("unexpected error: %v", err)
			default:
				want := types.DefaultTypeAdapter.NativeToValue(c.want)
				if w, ok := c.want.(ref.Val); ok {
					want = w
				}
				if got.Equal(want) != types.True {
					t.Fatalf("got %v (%T), want %v", got, got, want)
				}
			}
		})
	}
}

type compileError struct{ error }

func isCompileErr(err error) bool { _, ok := err.(compileError); return ok }

func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// evaluate compiles expr in env and runs it with ProgramOptions.
func evaluate(env *cel.Env, expr string, vars map[string]any) (ref.Val, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, compileError{iss.Err()}
	}
	prg, err := env.Program(ast, ProgramOptions()...)
	if err != nil {
		return nil, compileError{err}
	}
	if vars == nil {
		vars = map[string]any{}
	}
	out, _, err := prg.Eval(vars)
	return out, err
}
