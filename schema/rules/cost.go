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
const maxRequestBytes = 3 * 1024 * 1024

// cheapRule is the estimated cost under which a rule runs untracked.
const cheapRule = 1000

// Sizes in JSON Kubernetes assumes for string formats.
const (
	maxDurationSize = 32
	dateSize        = 12
	maxDatetimeSize = 32
	minDurationSize = 3
	minDatetimeSize = 21
)

// checkCost estimates the cost of a compiled expression (what: "rule" or
// "messageExpression") at level n and refuses it beyond the per-rule
// limit; it adds it, times the number of times the level may occur in one
// object, to the type's total. It returns the estimate's maximum.
func (c *compiler) checkCost(env *cel.Env, ast *cel.Ast, n *node, path *meta.Path, i int, what string, cardinality float64) (uint64, bool) {
	est, err := env.EstimateCost(ast, staticCost(&sizes{root: n}))
	if err != nil {
		c.compileErr(path, i, "%s: cost estimation failed: %v", what, err)
		return 0, false
	}
	if est.Max > c.limits.PerRule {
		c.compileErr(path, i, "%s: Forbidden: estimated %s cost exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
			what, what, factor(float64(est.Max), float64(c.limits.PerRule)))
		return 0, false
	}
	if math.IsInf(cardinality, 1) {
		cardinality = math.Floor(float64(maxRequestBytes) / float64(minSize(n)+1))
	}
	c.total += float64(est.Max) * cardinality
	return est.Max, true
}

// factor renders how many times over a limit a cost is, as Kubernetes does.
func factor(cost, limit float64) string {
	switch f := cost / limit; {
	case f > 100:
		return "more than 100x"
	case f < 1.5:
		return fmt.Sprintf("%fx", f)
	default:
		return fmt.Sprintf("%.1fx", f)
	}
}

// bound is how many elements a list or map of level n may hold by its
// schema (maxItems, maxProperties), +Inf without one.
func bound(n *node) float64 {
	switch {
	case n.s != nil && n.s.MaxItems != nil:
		return float64(max(*n.s.MaxItems, 0))
	case n.s != nil && n.s.MaxProperties != nil:
		return float64(max(*n.s.MaxProperties, 0))
	}
	return math.Inf(1)
}

// maxSize is the most elements a value of level n has for the cost model,
// as Kubernetes estimates it: a list's or map's bound or what fits in the
// largest request, a string's maxLength (times 4: characters may take 4
// bytes), its longest enum value or what fits in a request, a fixed size
// for durations and times, 0 for numbers, booleans and objects.
func maxSize(n *node) uint64 {
	s := n.s
	switch n.typ.Kind() {
	case types.ListKind:
		if b := bound(n); !math.IsInf(b, 1) {
			return uint64(b)
		}
		return uint64((maxRequestBytes - 2) / (minSize(n.elem) + 1))
	case types.MapKind:
		if b := bound(n); !math.IsInf(b, 1) {
			return uint64(b)
		}
		return uint64((maxRequestBytes - 2) / (minSize(n.elem) + 6))
	case types.DurationKind:
		return maxDurationSize
	case types.TimestampKind:
		if s.Format == "date" {
			return dateSize
		}
		return maxDatetimeSize
	case types.BytesKind:
		if s.MaxLength != nil {
			return uint64(max(*s.MaxLength, 0))
		}
		return maxRequestBytes - 2
	case types.StringKind, types.DynKind:
		switch {
		case s != nil && s.MaxLength != nil:
			return uint64(max(*s.MaxLength, 0)) * 4
		case s != nil && n.typ.Kind() == types.StringKind && len(s.Enum) > 0:
			var longest int
			for _, e := range s.Enum {
				if str, ok := e.(string); ok {
					longest = max(longest, len(str))
				}
			}
			return uint64(longest)
		}
		return maxRequestBytes - 2
	}
	return 0
}

// minSize is the fewest bytes a value of level n takes in JSON, as
// Kubernetes counts it: an object counts its required properties without
// a default.
func minSize(n *node) int {
	if n == nil {
		return 1
	}
	switch n.typ.Kind() {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind:
		return 2
	case types.BoolKind:
		return 4
	case types.DurationKind:
		return minDurationSize
	case types.TimestampKind:
		if n.s.Format == "date" {
			return dateSize
		}
		return minDatetimeSize
	case types.StructKind:
		size := 2
		for _, req := range n.s.Required {
			if f := fieldByJSON(n, req); f != nil && f.n.s != nil && f.n.s.Default == nil {
				size += len(req) + minSize(f.n) + 4
			}
		}
		return size
	}
	return 1
}

// sizes gives the cost model the sizes of what a rule reads, from its
// level's schema (maxSize).
type sizes struct{ root *node }

func (z *sizes) EstimateSize(el checker.AstNode) *checker.SizeEstimate {
	if t := el.Type(); t != nil && t.Kind() == types.TypeKind {
		return &checker.SizeEstimate{Min: 1, Max: 1} // a type value: type(x) == int costs one comparison
	}
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
			n = &node{s: nil, typ: types.StringType}
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
	return &checker.SizeEstimate{Min: 0, Max: maxSize(n)}
}

func (z *sizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
