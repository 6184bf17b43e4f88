package library

import (
	"math"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

var _ interpreter.ActualCostEstimator = (*CostEstimator)(nil)

// CallCost implements interpreter.ActualCostEstimator: the cost charged
// for one evaluated call, from the sizes of its actual arguments.
func (e *CostEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	var c uint64
	switch {
	case nominal[function]:
		c = 1
	case listFunctions[function]:
		if len(args) > 0 {
			c = traversalCost(args[0])
		}
	case function == "_==_":
		if len(args) != 2 || !isLibraryValue(args[0]) {
			return nil
		}
		c = 1
	default:
		return callCost(function, overloadID, args, result)
	}
	return &c
}

// callCost prices the string, parsing and network functions.
func callCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	traversal := func(v ref.Val, passes float64) *uint64 {
		c := ceilCost(float64(actualSize(v)) * passes * common.StringTraversalCostFactor)
		return &c
	}
	switch function {
	case "url", "lowerAscii", "upperAscii", "substring", "trim",
		"cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return traversal(args[0], 1)
		}
	case "replace", "split", "ip.isCanonical":
		if len(args) >= 1 {
			return traversal(args[0], 2)
		}
	case "join":
		if len(args) >= 1 {
			return traversal(result, 2)
		}
	case "ip":
		if len(args) >= 1 && overloadID == "cidr_ip" {
			c := uint64(1)
			return &c
		} else if len(args) >= 1 {
			return traversal(args[0], 1)
		}
	case "find", "findAll":
		if len(args) >= 2 {
			c := regexCost(actualSize(args[0]), uint64(actualSize(args[1])))
			return &c
		}
	case "validate":
		if f, ok := formatArg(args); ok && len(args) >= 2 {
			c := regexCost(actualSize(args[1]), uint64(f.maxRegexSize))
			return &c
		}
	case "containsIP", "containsCIDR":
		if len(args) >= 2 {
			c := containsCost(function, overloadID, actualSize(args[0]), actualSize(args[1]))
			return &c
		}
	}
	return nil
}

// regexCost is the runtime cost of matching a pattern of patternSize
// against a string of strSize: (1+strSize)/10 times patternSize/4, each
// rounded up.
func regexCost(strSize, patternSize uint64) uint64 {
	strCost := ceilCost((1 + float64(strSize)) * common.StringTraversalCostFactor)
	reCost := ceilCost(float64(patternSize) * common.RegexStringLengthCostFactor)
	return strCost * reCost
}

// containsCost prices containsIP and containsCIDR from the network's
// prefix size in bytes and the other operand's size.
func containsCost(function, overloadID string, cidrSize, otherSize uint64) uint64 {
	c := ceilCost(float64(cidrSize+cidrSize) * common.StringTraversalCostFactor)
	if function == "containsCIDR" {
		c += ceilCost(float64(cidrSize)*common.StringTraversalCostFactor) + 1
	}
	if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
		c += ceilCost(float64(otherSize) * common.StringTraversalCostFactor)
	}
	return c
}

func formatArg(args []ref.Val) (namedFormat, bool) {
	if len(args) == 0 {
		return namedFormat{}, false
	}
	f, ok := args[0].(namedFormat)
	return f, ok
}

// isLibraryValue reports whether v is one of the library's value types,
// whose equality costs one unit.
func isLibraryValue(v ref.Val) bool {
	switch v.(type) {
	case quantity, ipValue, cidrValue, namedFormat, urlValue, semverValue:
		return true
	}
	return false
}

func ceilCost(f float64) uint64 { return uint64(math.Ceil(f)) }

// actualSize is a value's CEL size (characters, bytes, elements, or the
// address bytes of an IP or CIDR), 1 for unsized values.
func actualSize(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 1
}

// traversalCost is the cost of walking a value as a tree: a tenth of each
// string's or bytes' length (rounded down), one per other leaf.
func traversalCost(v ref.Val) uint64 {
	switch t := v.(type) {
	case types.String:
		return uint64(float64(len(t)) * common.StringTraversalCostFactor)
	case types.Bytes:
		return uint64(float64(len(t)) * common.StringTraversalCostFactor)
	case traits.Lister:
		var c uint64
		for it := t.Iterator(); it.HasNext() == types.True; {
			c += traversalCost(it.Next())
		}
		return c
	case traits.Mapper:
		var c uint64
		for it := t.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			c += traversalCost(k) + traversalCost(t.Get(k))
		}
		return c
	}
	return 1
}
