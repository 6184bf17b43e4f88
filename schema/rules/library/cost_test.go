package library

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// schemaSizes stands for a schema's size limits: self is a list of at most
// maxItems strings of at most maxLength characters, str a string of at most
// maxLength characters.
type schemaSizes struct{ maxItems, maxLength uint64 }

func (s schemaSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	switch strings.Join(n.Path(), ".") {
	case "self":
		return &checker.SizeEstimate{Min: 0, Max: s.maxItems}
	case "self.@items", "str":
		return &checker.SizeEstimate{Min: 0, Max: s.maxLength}
	}
	return nil
}

func (s schemaSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// costEnv is the rule environment with self (list of strings) and str.
func costEnv(t testing.TB) *cel.Env {
	return newEnv(t, cel.Variable("self", cel.ListType(cel.StringType)), cel.Variable("str", cel.StringType))
}

// costs returns the estimated and the actual cost of expr for the inputs.
func costs(t *testing.T, env *cel.Env, sizes schemaSizes, expr string, vars map[string]any) (checker.CostEstimate, uint64) {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	est, err := env.EstimateCost(ast, &CostEstimator{SizeEstimator: sizes})
	if err != nil {
		t.Fatalf("%s: EstimateCost: %v", expr, err)
	}
	prg, err := env.Program(ast, ProgramOptions()...)
	if err != nil {
		t.Fatalf("%s: Program: %v", expr, err)
	}
	_, det, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("%s: Eval: %v", expr, err)
	}
	return est, *det.ActualCost()
}

func strs(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(string(rune('a'+i%26)), length)
	}
	return out
}

// TestCostGrowsWithList checks that list functions are charged by the size
// of the list they walk.
func TestCostGrowsWithList(t *testing.T) {
	env := costEnv(t)
	sizes := schemaSizes{maxItems: 1000, maxLength: 64}
	for _, expr := range []string{`self.isSorted()`, `self.indexOf('zz') >= -1`, `self.max() != ''`, `self.lastIndexOf('a') >= -1`} {
		_, small := costs(t, env, sizes, expr, map[string]any{"self": strs(10, 20), "str": ""})
		_, big := costs(t, env, sizes, expr, map[string]any{"self": strs(1000, 20), "str": ""})
		if big <= small {
			t.Errorf("%s: cost over 1000 items %d, not above the cost over 10 (%d)", expr, big, small)
		}
	}
	small, _ := costs(t, env, schemaSizes{maxItems: 10, maxLength: 64}, `self.isSorted()`, map[string]any{"self": strs(1, 1), "str": ""})
	big, _ := costs(t, env, sizes, `self.isSorted()`, map[string]any{"self": strs(1, 1), "str": ""})
	if big.Max <= small.Max {
		t.Errorf("estimate for 1000 items %d, not above the estimate for 10 (%d)", big.Max, small.Max)
	}
}

// TestEstimateBoundsActual checks, for each library function, that the
// static estimate with the schema's limits bounds the cost of an input at
// those limits.
func TestEstimateBoundsActual(t *testing.T) {
	env := costEnv(t)
	sizes := schemaSizes{maxItems: 50, maxLength: 40}
	vars := map[string]any{"self": strs(50, 40), "str": strings.Repeat("1", 40)}
	for _, expr := range []string{
		`self.isSorted()`, `self.max() != ''`, `self.min() != ''`, `self.indexOf('x') >= -1`,
		`str.find('[0-9]+') != ''`, `str.findAll('[0-9]', 3).size() >= 0`,
		`isURL(str)`, `url('https://example.com/' + str).getHost() != ''`,
		`isQuantity(str)`, `quantity(str).add(quantity('1k')).isGreaterThan(quantity('1'))`,
		`quantity(str).asApproximateFloat() > 0.0 && sign(quantity(str)) == 1`,
		`isIP(str) || ip('10.0.0.1').isLoopback() || ip.isCanonical('10.0.0.1')`,
		`isCIDR(str) || cidr('10.0.0.0/8').containsIP('10.1.2.3')`,
		`cidr('10.0.0.0/8').containsCIDR(cidr('10.1.0.0/16')) && cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')`,
		`cidr('10.0.0.0/8').ip() == ip('10.0.0.0') && cidr('10.0.0.1/8').masked().prefixLength() == 8`,
		`!format.dns1123Label().validate(str).hasValue() || format.named('uuid').value().validate(str).hasValue()`,
		`isSemver(str) || semver('1.2.3').isLessThan(semver('1.2.4'))`,
		`str.lowerAscii().upperAscii().trim().substring(1) != ''`,
		`str.replace('1', '22').split('2').join('-') != ''`,
		`quantity('1') == quantity('1') && url('/a') == url('/a') && format.uri() == format.uri()`,
	} {
		est, actual := costs(t, env, sizes, expr, vars)
		if actual > est.Max || actual < est.Min {
			t.Errorf("%s: actual cost %d outside the estimate [%d, %d]", expr, actual, est.Min, est.Max)
		}
	}
}

// TestJoinCost pins a Kubernetes inconsistency kapi keeps: join is
// estimated at one traversal of its result but charged two, so its actual
// cost can exceed the estimate.
func TestJoinCost(t *testing.T) {
	env := costEnv(t)
	est, actual := costs(t, env, schemaSizes{maxItems: 50, maxLength: 40}, `self.join(',').size() > 0`,
		map[string]any{"self": strs(50, 40), "str": ""})
	if actual <= est.Max {
		t.Errorf("join: actual %d within the estimate %d; Kubernetes charges twice the estimate", actual, est.Max)
	}
}

// TestCallCostFactors checks Kubernetes' runtime factors on single calls.
func TestCallCostFactors(t *testing.T) {
	e := &CostEstimator{}
	long := types.String(strings.Repeat("x", 100))
	ip4, _ := stringToIP("10.0.0.1").(ipValue)
	net8, _ := stringToCIDR("10.0.0.0/8").(cidrValue)
	uuid, _ := lookupFormat("uuid")
	for _, c := range []struct {
		function, overload string
		args               []ref.Val
		want               uint64
	}{
		// (1+100)/10 rounded up, times 6/4 rounded up.
		{"find", "string_find_string", []ref.Val{long, types.String("[0-9]+")}, 11 * 2},
		{"isSorted", "list_string_is_sorted_bool", []ref.Val{types.NewStringList(types.DefaultTypeAdapter, []string{string(long), string(long)})}, 20},
		{"quantity", "string_to_quantity", []ref.Val{long}, 10},
		{"ip.isCanonical", "ip_is_canonical", []ref.Val{long}, 20},
		{"ip", "cidr_ip", []ref.Val{net8}, 1},
		// Network of 1 byte: 2 bytes compared, plus the string parsed.
		{"containsIP", "cidr_contains_ip_string", []ref.Val{net8, types.String("10.0.0.1")}, 1 + 1},
		{"containsIP", "cidr_contains_ip_ip", []ref.Val{net8, ip4}, 1},
		{"containsCIDR", "cidr_contains_cidr", []ref.Val{net8, net8}, 1 + 1 + 1},
		{"validate", "format-validate", []ref.Val{uuid, long}, 11 * 18},
		{"getHost", "url_get_host", nil, 1},
		{"_==_", "equals", []ref.Val{ip4, ip4}, 1},
	} {
		got := e.CallCost(c.function, c.overload, c.args, nil)
		if got == nil || *got != c.want {
			t.Errorf("CallCost(%s) = %v, want %d", c.function, got, c.want)
		}
	}
	if got := e.CallCost("size", "size_string", []ref.Val{long}, nil); got != nil {
		t.Errorf("CallCost(size) = %d, want nil (cel-go's own cost)", *got)
	}
}
