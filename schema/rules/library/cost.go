package library

import (
	"math"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// CostEstimator prices the Kubernetes library functions, and the string
// extension functions Kubernetes reprices, with Kubernetes' cost factors:
// statically (checker.CostEstimator, the worst case a rule is admitted or
// refused by) and at evaluation (interpreter.ActualCostEstimator, what a
// rule's run is charged). The factors are part of Kubernetes' API: a rule
// is accepted or refused by them, so they must match kube-apiserver's to
// the unit. Functions it does not price (nil) fall back to cel-go's costs.
type CostEstimator struct {
	// SizeEstimator, if set, estimates the sizes of values CEL cannot size
	// from the expression (the schema's maxLength, maxItems and the like).
	SizeEstimator checker.CostEstimator
}

var _ checker.CostEstimator = (*CostEstimator)(nil)

// nominal are functions of a fixed cost of one: accessors, comparisons and
// arithmetic on the library's small values.
var nominal = map[string]bool{
	"masked": true, "prefixLength": true, "family": true, "isUnspecified": true,
	"isLoopback": true, "isLinkLocalMulticast": true, "isLinkLocalUnicast": true,
	"isGlobalUnicast": true, "format.named": true, "sign": true, "asInteger": true,
	"isInteger": true, "asApproximateFloat": true, "isGreaterThan": true,
	"isLessThan": true, "compareTo": true, "add": true, "sub": true, "major": true,
	"minor": true, "patch": true, "getScheme": true, "getHostname": true,
	"getHost": true, "getPort": true, "getEscapedPath": true, "getQuery": true,
}

// listFunctions cost one traversal of their receiver.
var listFunctions = map[string]bool{
	"isSorted": true, "sum": true, "max": true, "min": true, "indexOf": true, "lastIndexOf": true,
}

// Fixed sizes of the address byte lists containsIP and containsCIDR
// compare: 4 bytes for IPv4, 16 for IPv6.
var addressBytes = checker.SizeEstimate{Min: 4, Max: 16}

var unitCost = checker.CostEstimate{Min: 1, Max: 1}

// EstimateSize implements checker.CostEstimator by delegating to
// SizeEstimator.
func (e *CostEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	if e.SizeEstimator != nil {
		return e.SizeEstimator.EstimateSize(element)
	}
	return nil
}

// EstimateCallCost implements checker.CostEstimator.
func (e *CostEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch {
	case nominal[function]:
		return cost(unitCost)
	case listFunctions[function]:
		return e.estimateList(target)
	case function == "_==_":
		return e.estimateEquality(args)
	}
	if est := e.estimateString(function, target, args); est != nil {
		return est
	}
	return e.estimateParse(function, overloadID, args)
}

func cost(c checker.CostEstimate) *checker.CallEstimate {
	return &checker.CallEstimate{CostEstimate: c}
}

// estimateList charges one comparison per element, plus a traversal of
// each element for strings and bytes; on a string receiver (the strings
// library's indexOf) one traversal.
func (e *CostEstimator) estimateList(target *checker.AstNode) *checker.CallEstimate {
	if target == nil {
		return nil
	}
	elem := e.listElement(*target)
	if elem == nil {
		return cost(e.size(*target).MultiplyByCostFactor(common.StringTraversalCostFactor))
	}
	elemCost := unitCost
	if k := elem.Type().Kind(); k == types.StringKind || k == types.BytesKind {
		elemCost = elemCost.Add(e.size(elem).MultiplyByCostFactor(common.StringTraversalCostFactor))
	}
	return cost(e.size(*target).MultiplyByCost(elemCost))
}

// estimateParse prices the functions that parse or scan one string
// argument, and the network functions.
func (e *CostEstimator) estimateParse(function, overloadID string, args []checker.AstNode) *checker.CallEstimate {
	traversal := func(factor float64) *checker.CallEstimate {
		if len(args) == 0 {
			return nil
		}
		return cost(e.size(args[0]).MultiplyByCostFactor(factor))
	}
	switch function {
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		return traversal(common.StringTraversalCostFactor)
	case "ip":
		if overloadID == "cidr_ip" {
			return cost(unitCost)
		}
		return traversal(common.StringTraversalCostFactor)
	case "ip.isCanonical":
		return traversal(2 * common.StringTraversalCostFactor)
	case "validate":
		if len(args) == 0 {
			return nil
		}
		return cost(e.size(args[0]).MultiplyByCostFactor(common.StringTraversalCostFactor).
			MultiplyByCostFactor(maxFormatRegexSize * common.RegexStringLengthCostFactor))
	case "containsIP", "containsCIDR":
		return e.estimateContains(function, overloadID, args)
	}
	return nil
}

// estimateContains prices a comparison of two address byte lists, plus a
// masking pass for containsCIDR and a parse of a string argument.
func (e *CostEstimator) estimateContains(function, overloadID string, args []checker.AstNode) *checker.CallEstimate {
	if len(args) == 0 {
		return nil
	}
	c := addressBytes.Add(addressBytes).MultiplyByCostFactor(common.StringTraversalCostFactor)
	if function == "containsCIDR" {
		c = c.Add(addressBytes.MultiplyByCostFactor(common.StringTraversalCostFactor)).Add(unitCost)
	}
	if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
		c = c.Add(checker.CostEstimate(e.size(args[0])).MultiplyByCostFactor(common.StringTraversalCostFactor))
	}
	return cost(c)
}

// estimateEquality prices == on the library's types: one unit for
// addresses, networks, quantities and versions; a traversal for formats
// and URLs.
func (e *CostEstimator) estimateEquality(args []checker.AstNode) *checker.CallEstimate {
	if len(args) != 2 || args[0].Type().Equal(args[1].Type()) != types.True {
		return nil
	}
	t := args[0].Type()
	switch {
	case t.Kind() == types.OpaqueKind && (t.TypeName() == ipType.TypeName() || t.TypeName() == cidrType.TypeName()):
		return cost(unitCost)
	case t.Kind() != types.StructKind:
		return nil
	}
	switch t.TypeName() {
	case quantityType.TypeName(), semverType.TypeName():
		return cost(unitCost)
	case formatType.TypeName():
		return cost(checker.CostEstimate{Min: 1, Max: maxFormatSize}.MultiplyByCostFactor(common.StringTraversalCostFactor))
	case urlType.TypeName():
		size := checker.SizeEstimate{Min: 1, Max: 1}
		// Kubernetes unions the right operand's size with itself.
		if rs := args[1].ComputedSize(); rs != nil {
			size = rs.Union(*rs)
		}
		return cost(checker.CostEstimate{Min: 1, Max: size.Max}.MultiplyByCostFactor(common.StringTraversalCostFactor))
	}
	return nil
}

// size is the size of a node: computed from the expression, else from
// SizeEstimator, else unbounded.
func (e *CostEstimator) size(n checker.AstNode) checker.SizeEstimate {
	if sz := n.ComputedSize(); sz != nil {
		return *sz
	}
	if sz := e.EstimateSize(n); sz != nil {
		return *sz
	}
	return checker.SizeEstimate{Min: 0, Max: math.MaxUint64}
}

// listElement is a node standing for the elements of a list node (path
// "…/@items", so SizeEstimator can find the items' maxLength), or nil when
// the node is not a list.
func (e *CostEstimator) listElement(list checker.AstNode) checker.AstNode {
	params := list.Type().Parameters()
	if len(params) == 0 {
		return nil
	}
	var path []string
	if p := list.Path(); p != nil {
		path = append(append(make([]string, 0, len(p)+1), p...), "@items")
	}
	return &itemsNode{path: path, t: params[0]}
}

// itemsNode is the AstNode of a list's elements.
type itemsNode struct {
	path []string
	t    *types.Type
}

var _ checker.AstNode = (*itemsNode)(nil)

func (n *itemsNode) Path() []string                      { return n.path }
func (n *itemsNode) Type() *types.Type                   { return n.t }
func (n *itemsNode) Expr() ast.Expr                      { return nil }
func (n *itemsNode) ComputedSize() *checker.SizeEstimate { return nil }
