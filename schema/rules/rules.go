// Package rules enforces a schema's x-kubernetes-validations: CEL rules
// over self (the value at the rule's level) and, in transition rules,
// oldSelf (its value before an update), as kube-apiserver enforces them on
// custom resources — the same environment, types, cost limits, messages and
// ratcheting. Rules compile once, when a type is registered (Compile); a
// Validator then checks objects on every write.
package rules

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Validator checks objects against the rules of one schema. It is immutable
// and safe for concurrent use.
type Validator struct {
	root   *node
	limits Limits
}

// Compile compiles every rule of s, the schema of a whole object. It fails
// with every rule that does not compile, does not have the right type, or
// costs more than limits allow, each named by its path and index. A schema
// without rules compiles to a Validator that does nothing.
func Compile(s *schema.Schema, limits Limits) (*Validator, error) {
	limits = limits.withDefaults()
	if !hasRules(s) {
		return &Validator{root: &node{}, limits: limits}, nil // no CEL environment to build
	}
	c := &compiler{limits: limits, objects: map[string]*node{}}
	root := c.declare(s, "root", true)
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("rules: CEL types: %w", err)
	}
	base, err := cel.NewEnv(append(envOptions(), cel.CustomTypeProvider(&provider{Registry: reg, objects: c.objects}))...)
	if err != nil {
		return nil, fmt.Errorf("rules: CEL environment: %w", err)
	}
	c.base = base
	c.compileTree(root, nil, 1, nil)
	if len(c.errs) == 0 && c.total > float64(limits.PerType) {
		c.errs = append(c.errs, fmt.Sprintf("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
			factor(c.total, float64(limits.PerType))))
	}
	if len(c.errs) > 0 {
		sort.Strings(c.errs)
		return nil, fmt.Errorf("%w: %s", errCompile, strings.Join(c.errs, "; "))
	}
	return &Validator{root: root, limits: limits}, nil
}

// hasRules reports whether s or a schema under it has rules.
func hasRules(s *schema.Schema) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || hasRules(s.Items) {
		return true
	}
	for _, p := range s.Properties {
		if hasRules(p) {
			return true
		}
	}
	return s.AdditionalProperties != nil && hasRules(s.AdditionalProperties.Schema)
}

// Empty reports whether the schema has no rules.
func (v *Validator) Empty() bool { return v == nil || !v.root.rulesBelow }

// Validate evaluates the rules on obj, a whole object (old is its stored
// version on an update, nil on a create), and returns one error per failed
// rule at its field path. On an update a rule that does not read oldSelf
// and fails where the value at its level is unchanged is a warning, not an
// error (ratcheting: an object already stored never fails a rule for what
// its update did not touch), as Kubernetes reports it; transition rules run
// only where an old value exists. The evaluations of one call share a cost
// budget (Limits.PerObject).
func (v *Validator) Validate(ctx context.Context, obj, old map[string]any) (errs meta.ErrorList, warnings []string) {
	if v.Empty() {
		return nil, nil
	}
	w := &walk{ctx: ctx, budget: v.limits.PerObject}
	var oldV any
	if old != nil {
		oldV = old
	}
	w.visit(v.root, obj, oldV, old != nil, nil)
	return w.errs, w.warnings
}

// walk is one validation: the errors so far and the budget left.
type walk struct {
	ctx      context.Context
	budget   uint64
	spent    bool // the budget ran out: nothing more is evaluated
	errs     meta.ErrorList
	warnings []string
}

// visit evaluates the rules of level n on val (old, when hasOld, is its
// correlated previous value) and descends.
func (w *walk) visit(n *node, val, old any, hasOld bool, path *meta.Path) {
	if n == nil || !n.rulesBelow || w.spent || val == nil {
		return
	}
	// Compared only where rules run here: a level without rules is walked
	// through, not compared (a comparison costs the whole value).
	unchanged := len(n.rules) > 0 && hasOld && meta.DeepEqual(val, old)
	for _, r := range n.rules {
		if r.transition && !hasOld && !r.optional {
			continue
		}
		if w.ctx.Err() != nil {
			w.spent = true // the request is over: its answer no longer matters
			return
		}
		w.evaluate(n, r, val, old, hasOld, unchanged && !r.transition, path)
		if w.spent {
			return
		}
	}
	w.descend(n, val, old, hasOld, path)
}

// descend visits the members of an object, map or list.
func (w *walk) descend(n *node, val, old any, hasOld bool, path *meta.Path) {
	switch x := val.(type) {
	case map[string]any:
		om, _ := old.(map[string]any)
		if n.fields != nil {
			for _, f := range n.order {
				if v, ok := x[f.json]; ok {
					ov, ook := om[f.json]
					w.visit(f.n, v, ov, hasOld && ook, path.Child(f.json))
				}
			}
			return
		}
		for _, k := range meta.SortedKeys(x) {
			ov, ook := om[k]
			w.visit(n.elem, x[k], ov, hasOld && ook, path.Key(k))
		}
	case []any:
		var corr schema.ListCorrelation
		if hasOld {
			ol, _ := old.([]any)
			corr = schema.CorrelateList(n.s, ol)
		}
		for i, item := range x {
			ov, ook := corr.Old(item)
			w.visit(n.elem, item, ov, ook, path.Index(i))
		}
	}
}

// evaluate runs one rule and records its failure, as a warning when
// ratcheted.
func (w *walk) evaluate(n *node, r *rule, val, old any, hasOld, ratcheted bool, path *meta.Path) {
	vars := &activation{self: value(val, n)}
	switch {
	case r.optional && hasOld:
		vars.oldSelf = types.OptionalOf(value(old, n))
	case r.optional:
		vars.oldSelf = types.OptionalNone
	case hasOld:
		vars.oldSelf = value(old, n)
	}
	out, details, err := r.prog.Eval(vars)
	if !w.charge(r, details, n, path) {
		return
	}
	if err != nil {
		w.evalError(n, r, path, err)
		return
	}
	if out == types.True {
		return
	}
	msg, e := w.message(n, r, vars, path)
	if e == nil {
		e = w.failure(n, r, val, path, msg)
	}
	if ratcheted {
		w.warnings = append(w.warnings, e.Error())
		return
	}
	w.errs = append(w.errs, e)
}

// evalError records a rule that could not be evaluated, in Kubernetes'
// words; past its per-call cost limit nothing more is evaluated.
func (w *walk) evalError(n *node, r *rule, path *meta.Path, err error) {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "no such overload"):
		msg = fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, ruleErrorString(r))
	case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
		msg = fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleErrorString(r))
		w.spent = true
	default:
		msg = fmt.Sprintf("%v evaluating rule: %v", err, ruleErrorString(r))
	}
	w.errs = append(w.errs, meta.Invalid(orRoot(path), schemaType(n), msg))
}

// activation binds self and oldSelf without a map.
type activation struct {
	self, oldSelf ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch {
	case name == "self":
		return a.self, true
	case name == "oldSelf" && a.oldSelf != nil:
		return a.oldSelf, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// charge takes an evaluation's cost from the budget (a cheap rule's
// estimate, else what it cost); once the budget runs out, the validation
// ends with Kubernetes' error.
func (w *walk) charge(r *rule, details *cel.EvalDetails, n *node, path *meta.Path) bool {
	cost := r.maxCost
	if details != nil && details.ActualCost() != nil {
		cost = *details.ActualCost()
	}
	if cost > w.budget {
		w.spent = true
		w.errs = append(w.errs, meta.Invalid(orRoot(path), schemaType(n), "validation failed due to running out of cost budget, no further validation rules will be run"))
		return false
	}
	w.budget -= cost
	return true
}

// message is what a failed rule says: its messageExpression's value when
// that evaluates to a non-blank single line, else its message, else the
// rule itself. A messageExpression that runs out of cost instead ends the
// validation with the error it returns, as in Kubernetes.
func (w *walk) message(n *node, r *rule, vars *activation, path *meta.Path) (string, *meta.FieldError) {
	if r.message == nil {
		return ruleMessage(r), nil
	}
	out, details, err := r.message.Eval(vars)
	var cost uint64
	if details != nil && details.ActualCost() != nil {
		cost = *details.ActualCost()
	}
	at := orRoot(appendPath(path, r.fieldPath))
	if cost > w.budget {
		w.spent = true
		return "", meta.Invalid(at, schemaType(n), "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run")
	}
	w.budget -= cost
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			w.spent = true
			return "", meta.Invalid(at, schemaType(n), fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", r.src.MessageExpression))
		}
		return ruleMessage(r), nil
	}
	if s, ok := out.Value().(string); ok && strings.TrimSpace(s) != "" && !strings.Contains(s, "\n") && len(strings.TrimSpace(s)) <= 5000 {
		return strings.TrimSpace(s), nil
	}
	return ruleMessage(r), nil
}

func ruleMessage(r *rule) string {
	if m := strings.TrimSpace(r.src.Message); m != "" {
		return m
	}
	return "failed rule: " + ruleErrorString(r)
}

// ruleErrorString names a rule in errors: its message, or its expression.
func ruleErrorString(r *rule) string {
	if m := strings.TrimSpace(r.src.Message); m != "" {
		return m
	}
	return strings.TrimSpace(r.src.Rule)
}

// rootPath is where Kubernetes reports a failed rule of the root level.
var rootPath = meta.NewPath("<nil>")

func orRoot(path *meta.Path) *meta.Path {
	if path == nil {
		return rootPath
	}
	return path
}

// failure is the field error of a failed rule, by its reason: the value is
// shown for scalars, left out for objects and lists, as Kubernetes does.
func (w *walk) failure(n *node, r *rule, val any, path *meta.Path, msg string) *meta.FieldError {
	path = orRoot(appendPath(path, r.fieldPath))
	if t := schemaType(n); t == "object" || t == "array" {
		val = meta.Omitted()
	}
	switch r.reason {
	case meta.CauseTypeFieldValueForbidden:
		return meta.Forbidden(path, msg)
	case meta.CauseTypeFieldValueRequired:
		return meta.Required(path, msg)
	case meta.CauseTypeFieldValueDuplicate:
		return meta.Duplicate(path, val)
	}
	return meta.Invalid(path, val, msg)
}

// schemaType is the schema type of level n ("" for int-or-string and
// values without a type), which Kubernetes shows for errors of a rule.
func schemaType(n *node) string {
	if n.s == nil {
		return ""
	}
	if n.s.Type == "" && n.fields != nil {
		return "object"
	}
	return n.s.Type
}

// IsCompileError reports whether err is Compile's refusal of a schema's
// rules.
func IsCompileError(err error) bool { return errors.Is(err, errCompile) }
