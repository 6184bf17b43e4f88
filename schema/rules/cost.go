package rules

import (
	"fmt"
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"

	"github.com/kapi-dev/kapi/meta"
)

// maxRequestBytes is the largest object the estimates assume (Kubernetes'
// 3 MiB request limit): a list, map or string without a declared maximum
// can be no larger than fits in it.
const maxRequestBytes = 3 << 20

// programOptions are the options every rule's program is made with: the
// per-call cost limit, measured by the library's cost model.
func (c *compiler) programOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostLimit(c.limits.PerCall), cel.CostTracking(runtimeCost())}
}

// cheapRule is the estimated cost under which a rule runs untracked.
const cheapRule = 1000

// checkCost estimates the cost of a compiled expression at level n and
// refuses it beyond the per-rule limit; it adds it, times the number of
// times the level may occur, to the type's total. It returns the estimate's
// maximum.
func (c *compiler) checkCost(env *cel.Env, ast *cel.Ast, n *node, path *meta.Path, i int, cardinality float64) (uint64, bool) {
	est, err := env.EstimateCost(ast, staticCost(&sizes{root: n}))
	if err != nil {
		c.compileErr(path, i, "rule: cost estimation failed: %v", err)
		return 0, false
	}
	if est.Max > c.limits.PerRule {
		c.compileErr(path, i, "rule: Forbidden: estimated rule cost exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
			factor(float64(est.Max), float64(c.limits.PerRule)))
		return 0, false
	}
	c.total += float64(est.Max) * cardinality
	return est.Max, true
}

// factor renders how many times over a limit a cost is.
func factor(cost, limit float64) string {
	if cost/limit > 100 {
		return "more than 100x"
	}
	return fmt.Sprintf("%.1fx", cost/limit)
}

// maxElements is the most elements a list or map of level n can hold: its
// maxItems or maxProperties, or what fits in the largest request.
func maxElements(n *node) float64 {
	if n.s != nil {
		switch {
		case n.s.MaxItems != nil:
			return float64(*n.s.MaxItems)
		case n.s.MaxProperties != nil:
			return float64(*n.s.MaxProperties)
		}
	}
	return float64(maxRequestBytes-2) / float64(minSize(n.elem)+1)
}

// minSize is the fewest bytes a value of level n takes in JSON.
func minSize(n *node) int {
	if n == nil {
		return 1
	}
	switch n.typ.Kind() {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind, types.StructKind:
		return 2 // "", [], {}
	case types.BoolKind:
		return 4
	}
	return 1
}

// sizes estimates the size of the values a rule reads from its level's
// schema (maxLength, maxItems, maxProperties), for the static cost model.
type sizes struct{ root *node }

func (z *sizes) EstimateSize(el checker.AstNode) *checker.SizeEstimate {
	path := el.Path()
	if len(path) == 0 || (path[0] != "self" && path[0] != "oldSelf") {
		return nil
	}
	n := z.root
	for _, step := range path[1:] {
		switch step {
		case "@items", "@values":
			n = n.elem
		case "@keys":
			return &checker.SizeEstimate{Min: 0, Max: maxRequestBytes}
		default:
			f, ok := n.fields[step]
			if !ok {
				return nil
			}
			n = f.n
		}
		if n == nil {
			return nil
		}
	}
	switch n.typ.Kind() {
	case types.DynKind:
		return &checker.SizeEstimate{Min: 0, Max: maxRequestBytes - 2}
	case types.StringKind, types.BytesKind:
		if n.s != nil && n.s.MaxLength != nil {
			return &checker.SizeEstimate{Min: 0, Max: uint64(*n.s.MaxLength)}
		}
		return &checker.SizeEstimate{Min: 0, Max: maxRequestBytes - 2}
	case types.ListKind, types.MapKind:
		return &checker.SizeEstimate{Min: 0, Max: uint64(math.Ceil(maxElements(n)))}
	}
	return nil
}

func (z *sizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
