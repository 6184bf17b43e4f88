package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Limits are the cost limits of validation rules. The zero value is
// Kubernetes' limits.
type Limits struct {
	// PerRule bounds the estimated cost of one rule, checked at
	// registration. Default 10,000,000.
	PerRule uint64
	// PerType bounds the estimated cost of all the rules of a type, each
	// counted as many times as its level may occur in one object. Default
	// 100,000,000.
	PerType uint64
	// PerCall bounds the cost of one evaluation of a rule. Default 1,000,000.
	PerCall uint64
	// PerObject bounds the cost of all the evaluations that validate one
	// object. Default 10,000,000.
	PerObject uint64
}

func (l Limits) withDefaults() Limits {
	if l.PerRule == 0 {
		l.PerRule = 10_000_000
	}
	if l.PerType == 0 {
		l.PerType = 100_000_000
	}
	if l.PerCall == 0 {
		l.PerCall = 1_000_000
	}
	if l.PerObject == 0 {
		l.PerObject = 10_000_000
	}
	return l
}

// rule is one compiled validation rule.
type rule struct {
	src  schema.ValidationRule
	prog cel.Program
	// maxCost is the rule's estimated cost at most. A rule that cannot
	// cost more than cheapRule runs without cost tracking and is charged
	// that estimate (tracking would cost more than the rule).
	maxCost    uint64
	message    cel.Program // messageExpression, or nil
	transition bool        // the rule reads oldSelf
	optional   bool        // optionalOldSelf: it runs on creates too
	fieldPath  []pathStep  // where failures are reported below the level
	reason     meta.CauseType
}

// compiler compiles the rules of one schema.
type compiler struct {
	limits   Limits
	base     *cel.Env
	objects  map[string]*node // object types by name
	nextType int              // the number of object types named so far
	errs     []string
	total    float64 // estimated cost of all rules, by cardinality
}

// compileErr records a registration error of the rule at path.
func (c *compiler) compileErr(path *meta.Path, i int, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("%s: x-kubernetes-validations[%d]: %s", pathString(path), i, fmt.Sprintf(format, args...)))
}

func pathString(p *meta.Path) string {
	if s := p.String(); s != "" {
		return s
	}
	return "<root>"
}

// compileTree compiles the rules of n and of every level under it.
// cardinality is how many times n's level may occur in one object;
// uncorrelated, when not nil, is the set, atomic list or atomic map above n
// whose members have no old value to compare with.
func (c *compiler) compileTree(n *node, path *meta.Path, cardinality float64, uncorrelated *meta.Path) {
	if n == nil || n.s == nil {
		return
	}
	for i, r := range n.s.XValidations {
		c.compileRule(n, path, i, r, cardinality, uncorrelated)
	}
	below := uncorrelated
	if below == nil && n.s.XMapType == schema.MapTypeAtomic {
		below = path // the members of an atomic map have no old values of their own
	}
	for _, f := range n.fields {
		c.compileTree(f.n, path.Child(f.json), cardinality, below)
	}
	if n.elem != nil {
		child := path.Index(0)
		switch {
		case n.typ.Kind() == types.MapKind:
			child = path.Key("*")
		case below == nil && n.s.ListType() != schema.ListTypeMap:
			below = path // elements of sets and atomic lists are not correlated
		}
		c.compileTree(n.elem, child, cardinality*bound(n), below)
	}
	for _, f := range n.fields {
		n.rulesBelow = n.rulesBelow || f.n.rulesBelow
	}
	if n.elem != nil {
		n.rulesBelow = n.rulesBelow || n.elem.rulesBelow
	}
	n.rulesBelow = n.rulesBelow || len(n.rules) > 0
}

// compileRule compiles rule i of n and checks its estimated cost.
func (c *compiler) compileRule(n *node, path *meta.Path, i int, src schema.ValidationRule, cardinality float64, uncorrelated *meta.Path) {
	optional := src.OptionalOldSelf != nil && *src.OptionalOldSelf
	oldType := n.typ
	if optional {
		oldType = types.NewOptionalType(n.typ)
	}
	env, err := c.base.Extend(cel.Variable("self", n.typ), cel.Variable("oldSelf", oldType))
	if err != nil {
		c.compileErr(path, i, "%v", err)
		return
	}
	r := &rule{src: src, optional: optional}
	var ok bool
	if r.reason, ok = reasons[src.Reason]; !ok {
		c.compileErr(path, i, "reason: Unsupported value: %q: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"", src.Reason)
		return
	}
	if strings.TrimSpace(src.Rule) == "" {
		c.compileErr(path, i, "rule: Required value: rule is not specified")
		return
	}
	ast, iss := env.Compile(src.Rule)
	if iss.Err() != nil {
		c.compileErr(path, i, "rule: Invalid value: %q: compilation failed: %v", src.Rule, iss.Err())
		return
	}
	if ast.OutputType() != cel.BoolType {
		c.compileErr(path, i, "rule: Invalid value: %q: cel expression must evaluate to a bool", src.Rule)
		return
	}
	r.transition = usesOldSelf(ast)
	if r.transition && uncorrelated != nil {
		c.compileErr(path, i, "rule: Invalid value: %q: oldSelf cannot be used on the uncorrelatable portion of the schema within %s", src.Rule, pathString(uncorrelated))
		return
	}
	if optional && !r.transition {
		c.compileErr(path, i, "optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule")
		return
	}
	if r.maxCost, ok = c.checkCost(env, ast, n, path, i, "rule", cardinality); !ok {
		return
	}
	if r.prog, err = env.Program(ast, c.programOptions(r.maxCost <= cheapRule)...); err != nil {
		c.compileErr(path, i, "rule: %v", err)
		return
	}
	if !c.compileMessage(env, r, n, path, i, cardinality) || !c.compileFieldPath(r, n, path, i) {
		return
	}
	n.rules = append(n.rules, r)
}

// compileMessage compiles the rule's messageExpression, which must be a
// string.
func (c *compiler) compileMessage(env *cel.Env, r *rule, n *node, path *meta.Path, i int, cardinality float64) bool {
	if r.src.MessageExpression == "" {
		return true
	}
	ast, iss := env.Compile(r.src.MessageExpression)
	if iss.Err() != nil {
		c.compileErr(path, i, "messageExpression: Invalid value: %q: messageExpression compilation failed: %v", r.src.MessageExpression, iss.Err())
		return false
	}
	if ast.OutputType() != cel.StringType {
		c.compileErr(path, i, "messageExpression: Invalid value: %q: must evaluate to a string", r.src.MessageExpression)
		return false
	}
	if _, ok := c.checkCost(env, ast, n, path, i, "messageExpression", cardinality); !ok {
		return false
	}
	var err error
	if r.message, err = env.Program(ast, c.programOptions(false)...); err != nil {
		c.compileErr(path, i, "messageExpression: %v", err)
		return false
	}
	return true
}

// compileFieldPath checks the rule's fieldPath against the schema.
func (c *compiler) compileFieldPath(r *rule, n *node, path *meta.Path, i int) bool {
	if r.src.FieldPath == "" {
		return true
	}
	p, err := parseFieldPath(r.src.FieldPath, n, path)
	if err != nil {
		c.compileErr(path, i, "fieldPath: Invalid value: %q: %v", r.src.FieldPath, err)
		return false
	}
	r.fieldPath = p
	return true
}

// reasons are the reasons a rule may give, by name ("" is the default).
var reasons = map[string]meta.CauseType{
	"":                    meta.CauseTypeFieldValueInvalid,
	"FieldValueInvalid":   meta.CauseTypeFieldValueInvalid,
	"FieldValueForbidden": meta.CauseTypeFieldValueForbidden,
	"FieldValueRequired":  meta.CauseTypeFieldValueRequired,
	"FieldValueDuplicate": meta.CauseTypeFieldValueDuplicate,
}

// usesOldSelf reports whether a checked expression reads oldSelf.
func usesOldSelf(ast *cel.Ast) bool {
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "oldSelf" {
			return true
		}
	}
	return false
}

// errCompile reports every rule of a schema that does not compile or
// costs too much.
var errCompile = errors.New("invalid validation rules")
