package library

import (
	"math"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
)

// Static costs of the string functions Kubernetes prices itself: url(),
// the regex library, and the strings extension's lowerAscii, upperAscii,
// substring, trim, replace, split and join, which Kubernetes charges (and
// sizes) differently from cel-go.

// estimateString returns the cost and result size of a string function,
// or nil for any other function.
func (e *CostEstimator) estimateString(function string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch function {
	case "url":
		if len(args) == 1 {
			return traversed(e.size(args[0]), 1)
		}
	case "lowerAscii", "upperAscii", "substring", "trim":
		if target != nil {
			return traversed(e.size(*target), 1)
		}
	case "replace":
		if target != nil && len(args) >= 2 {
			return e.estimateReplace(*target, args[0], args[1])
		}
	case "split":
		if target != nil {
			return e.estimateSplit(*target, args)
		}
	case "join":
		if target != nil {
			return e.estimateJoin(*target, args)
		}
	case "find", "findAll":
		if target != nil && len(args) >= 1 {
			return e.estimateFind(*target, args[0])
		}
	}
	return nil
}

// traversed is the cost of walking a string of size sz passes times, with a
// result of the same size.
func traversed(sz checker.SizeEstimate, passes float64) *checker.CallEstimate {
	return &checker.CallEstimate{
		CostEstimate: sz.MultiplyByCostFactor(passes * common.StringTraversalCostFactor),
		ResultSize:   &sz,
	}
}

// estimateFind charges the string length (plus one, so an empty string
// still costs) times a quarter of the pattern length: RE2's worst case.
func (e *CostEstimator) estimateFind(str, pattern checker.AstNode) *checker.CallEstimate {
	sz := e.size(str)
	strCost := sz.Add(checker.SizeEstimate{Min: 1, Max: 1}).MultiplyByCostFactor(common.StringTraversalCostFactor)
	reCost := e.size(pattern).MultiplyByCostFactor(common.RegexStringLengthCostFactor)
	return &checker.CallEstimate{
		CostEstimate: strCost.Multiply(reCost),
		ResultSize:   &checker.SizeEstimate{Min: 0, Max: sz.Max},
	}
}

// estimateSplit charges two traversals; the result has at most as many
// elements as the string has characters, or the literal limit.
func (e *CostEstimator) estimateSplit(str checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	sz := e.size(str)
	limit := sz.Max
	if len(args) > 1 {
		if lit := args[1].Expr().AsLiteral(); lit != nil {
			if n, ok := lit.Value().(int64); ok {
				limit = uint64(n)
			}
		}
	}
	return &checker.CallEstimate{
		CostEstimate: sz.MultiplyByCostFactor(2 * common.StringTraversalCostFactor),
		ResultSize:   &checker.SizeEstimate{Min: 0, Max: limit},
	}
}

// estimateJoin sizes the result as the elements plus the separators
// between them and charges one traversal of it.
func (e *CostEstimator) estimateJoin(list checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	var sz checker.SizeEstimate
	n := e.size(list)
	if elem := e.listElement(list); elem != nil {
		sz = n.Multiply(e.size(elem))
	}
	if len(args) > 0 {
		var seps checker.SizeEstimate
		if n.Min > 0 {
			seps.Min = n.Min - 1
		}
		if n.Max > 0 {
			seps.Max = n.Max - 1
		}
		sz = sz.Add(e.size(args[0]).Multiply(seps))
	}
	return &checker.CallEstimate{
		CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor),
		ResultSize:   &sz,
	}
}

// estimateReplace charges two traversals and bounds the result by the most
// (and fewest) replacements the sizes allow.
func (e *CostEstimator) estimateReplace(str, old, repl checker.AstNode) *checker.CallEstimate {
	sz, oldSz, replSz := e.size(str), e.size(old), e.size(repl)
	var count, kept checker.SizeEstimate
	count.Max, kept.Max = replaceBound(sz.Max, oldSz.Min, replSz.Max <= oldSz.Min)
	count.Min, kept.Min = replaceBound(sz.Min, oldSz.Max, oldSz.Max <= replSz.Min)
	size := count.Multiply(replSz).Add(kept)
	return &checker.CallEstimate{
		CostEstimate: sz.MultiplyByCostFactor(2 * common.StringTraversalCostFactor),
		ResultSize:   &size,
	}
}

// replaceBound bounds, for a string of size n, the number of replacements
// of a substring of size old and the characters kept as they are: replacing
// "" surrounds every character; a replacement that does not grow (or, for
// the lower bound, shrink) the string keeps the original size; otherwise
// every old-sized piece may be replaced.
func replaceBound(n, old uint64, sameSize bool) (count, kept uint64) {
	switch {
	case old == 0:
		if n < math.MaxUint64 {
			return n + 1, n
		}
		return n, n
	case sameSize:
		return 0, n
	}
	return uint64(math.Ceil(float64(n) / float64(old))), 0
}
