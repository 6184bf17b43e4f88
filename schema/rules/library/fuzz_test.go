package library

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/cel-go/cel"
)

// FuzzQuantity checks that parsing never panics, that every parsed
// quantity prints a canonical form that parses again, and that the
// canonical form keeps the value whenever it fits Kubernetes' documented
// range (beyond it Kubernetes prints some exponents without a suffix).
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"1.5Gi", "100m", "1e3", "-0.1n", "9999999999999999999999999999999999999G",
		"Mi", ".", "+5", "1000E", "12Mi", "0.5Ki", "1e-10", "7e-1", "1.1Ki"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseQuantity(s)
		if err != nil {
			return
		}
		q.Sign()
		q.AsInt64()
		q.AsApproximateFloat64()
		canonical := q.String()
		back, err := parseQuantity(canonical)
		if err != nil {
			t.Fatalf("%q prints %q, which does not parse: %v", s, canonical, err)
		}
		inRange := q.Cmp(newIntQuantity(math.MaxInt64)) <= 0 && q.Cmp(newIntQuantity(-math.MaxInt64)) >= 0
		if inRange && back.Cmp(q) != 0 {
			t.Fatalf("%q prints %q, which parses to a different value (%s)", s, canonical, back)
		}
		if _, err := q.Add(back); err != nil && inRange {
			t.Fatalf("%q + %q: %v", s, canonical, err)
		}
	})
}

// fuzzTemplates are expressions over a string s and an int n that reach
// every library function.
var fuzzTemplates = []string{
	`quantity(s)`, `isQuantity(s)`, `quantity(s).add(n).sub(quantity(s)).asApproximateFloat()`,
	`quantity(s).asInteger()`, `quantity(s).isInteger()`, `sign(quantity(s).sub(n))`,
	`quantity(s).compareTo(quantity('1Ki'))`, `quantity(s).isGreaterThan(quantity(s).add(n))`,
	`url(s).getQuery()`, `isURL(s)`, `url(s).getHostname() + url(s).getPort() + url(s).getEscapedPath()`,
	`ip(s).family()`, `isIP(s)`, `ip.isCanonical(s)`, `string(ip(s))`, `ip(s).isGlobalUnicast()`,
	`cidr(s).masked()`, `isCIDR(s)`, `cidr(s).containsIP(s)`, `cidr(s).containsCIDR(s)`, `cidr(s).ip().isLoopback()`,
	`s.find(s)`, `s.findAll(s, n)`, `s.find('[a-z]+')`, `s.findAll('.', n)`,
	`semver(s, true).major()`, `isSemver(s)`, `semver(s).compareTo(semver('1.0.0'))`,
	`format.named(s).hasValue()`, `format.dns1123SubdomainPrefix().validate(s)`, `format.qualifiedName().validate(s)`,
	`format.datetime().validate(s)`, `format.byte().validate(s)`,
	`[s, s + s].isSorted()`, `[n, n].sum()`, `[s].indexOf(s)`, `[n, 1].max()`, `[s, 'a'].min()`,
	`duration(n)`,
}

// FuzzLibrary evaluates random pairs of library expressions over random
// inputs, with the static estimate and a cost limit, and checks that
// nothing panics and that errors are errors, not crashes.
func FuzzLibrary(f *testing.F) {
	env := newEnv(f, cel.Variable("s", cel.StringType), cel.Variable("n", cel.IntType))
	programs := make([]cel.Program, 0, len(fuzzTemplates)*len(fuzzTemplates))
	for _, a := range fuzzTemplates {
		for _, b := range fuzzTemplates {
			ast, iss := env.Compile(fmt.Sprintf("[%s].size() + [%s].size()", a, b))
			if iss.Err() != nil {
				f.Fatalf("%s, %s: %v", a, b, iss.Err())
			}
			if _, err := env.EstimateCost(ast, &CostEstimator{SizeEstimator: schemaSizes{maxItems: 10, maxLength: 256}}); err != nil {
				f.Fatalf("%s, %s: EstimateCost: %v", a, b, err)
			}
			prg, err := env.Program(ast, append(ProgramOptions(), cel.CostLimit(1000000))...)
			if err != nil {
				f.Fatalf("%s, %s: %v", a, b, err)
			}
			programs = append(programs, prg)
		}
	}
	for _, s := range []string{"1.5Gi", "10.0.0.0/8", "10.0.0.1", "https://example.com/a?b=c", "v1.2", "a-b.c", "[", "2021-01-01T00:00:00Z"} {
		f.Add(uint16(len(s)), s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, pick uint16, s string, n int64) {
		prg := programs[int(pick)%len(programs)]
		if _, _, err := prg.Eval(map[string]any{"s": s, "n": n}); err != nil && err.Error() == "" {
			t.Fatalf("empty error for s=%q n=%d", s, n)
		}
	})
}
