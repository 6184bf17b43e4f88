package meta

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Label selector operators, spelled as Kubernetes spells them.
const (
	LabelOpEquals       = "="
	LabelOpDoubleEquals = "=="
	LabelOpNotEquals    = "!="
	LabelOpIn           = "in"
	LabelOpNotIn        = "notin"
	LabelOpExists       = "exists"
	LabelOpDoesNotExist = "!"
	LabelOpGreaterThan  = "gt"
	LabelOpLessThan     = "lt"
)

// LabelRequirement is one condition of a label selector.
type LabelRequirement struct {
	// Key is the label key (a qualified name).
	Key string
	// Operator is one of the LabelOp constants.
	Operator string
	// Values are the values compared against, sorted and without duplicates:
	// one for =, ==, !=, gt and lt; one or more for in and notin; none for
	// exists and !.
	Values []string
}

// Matches reports whether labels satisfy the requirement.
func (r LabelRequirement) Matches(labels map[string]string) bool {
	v, has := labels[r.Key]
	switch r.Operator {
	case LabelOpEquals, LabelOpDoubleEquals, LabelOpIn:
		return has && slices.Contains(r.Values, v)
	case LabelOpNotEquals, LabelOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case LabelOpExists:
		return has
	case LabelOpDoesNotExist:
		return !has
	case LabelOpGreaterThan, LabelOpLessThan:
		if !has || len(r.Values) != 1 {
			return false
		}
		lv, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		rv, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			return false
		}
		if r.Operator == LabelOpGreaterThan {
			return lv > rv
		}
		return lv < rv
	}
	return false
}

// String renders the requirement in selector syntax.
func (r LabelRequirement) String() string {
	switch r.Operator {
	case LabelOpExists:
		return r.Key
	case LabelOpDoesNotExist:
		return "!" + r.Key
	case LabelOpIn, LabelOpNotIn:
		return r.Key + " " + r.Operator + " (" + strings.Join(r.Values, ",") + ")"
	case LabelOpGreaterThan:
		return r.Key + ">" + strings.Join(r.Values, "")
	case LabelOpLessThan:
		return r.Key + "<" + strings.Join(r.Values, "")
	default:
		return r.Key + r.Operator + strings.Join(r.Values, "")
	}
}

// LabelSelector selects objects by their labels: all its requirements must
// hold. The zero LabelSelector is empty and matches everything.
type LabelSelector struct {
	reqs    []LabelRequirement
	nothing bool
}

// Matches reports whether labels satisfy every requirement.
func (s LabelSelector) Matches(labels map[string]string) bool {
	if s.nothing {
		return false
	}
	for _, r := range s.reqs {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// Empty reports whether the selector has no requirements (and so matches
// everything).
func (s LabelSelector) Empty() bool { return len(s.reqs) == 0 && !s.nothing }

// Requirements returns a copy of the requirements, sorted by key.
func (s LabelSelector) Requirements() []LabelRequirement {
	out := make([]LabelRequirement, len(s.reqs))
	for i, r := range s.reqs {
		r.Values = slices.Clone(r.Values)
		out[i] = r
	}
	return out
}

// String renders the selector in its canonical string form: requirements
// sorted by key, joined by ",". Parsing the result gives an equal selector.
// A selector that matches nothing renders as "" (it has no string form).
func (s LabelSelector) String() string {
	parts := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// NewLabelRequirement builds and validates a requirement: the key must be a
// qualified name, values must be valid label values, in and notin need at
// least one value, exists and ! none, the others exactly one (an integer for
// gt and lt).
func NewLabelRequirement(key, op string, values []string) (LabelRequirement, error) {
	if msgs := IsQualifiedName(key); len(msgs) > 0 {
		return LabelRequirement{}, Invalid(NewPath("key"), key, strings.Join(msgs, "; "))
	}
	valuePath := NewPath("values")
	switch op {
	case LabelOpIn, LabelOpNotIn:
		if len(values) == 0 {
			return LabelRequirement{}, Invalid(valuePath, values, "for 'in', 'notin' operators, values set can't be empty")
		}
	case LabelOpEquals, LabelOpDoubleEquals, LabelOpNotEquals:
		if len(values) != 1 {
			return LabelRequirement{}, Invalid(valuePath, values, "exact-match compatibility requires one single value")
		}
	case LabelOpExists, LabelOpDoesNotExist:
		if len(values) != 0 {
			return LabelRequirement{}, Invalid(valuePath, values, "values set must be empty for exists and does not exist")
		}
	case LabelOpGreaterThan, LabelOpLessThan:
		if len(values) != 1 {
			return LabelRequirement{}, Invalid(valuePath, values, "for 'Gt', 'Lt' operators, exactly one value is required")
		}
		if _, err := strconv.ParseInt(values[0], 10, 64); err != nil {
			return LabelRequirement{}, Invalid(valuePath.Index(0), values[0], "for 'Gt', 'Lt' operators, the value must be an integer")
		}
	default:
		return LabelRequirement{}, NotSupported(NewPath("operator"), op,
			[]string{LabelOpEquals, LabelOpDoubleEquals, LabelOpNotEquals, LabelOpIn, LabelOpNotIn, LabelOpExists, LabelOpDoesNotExist, LabelOpGreaterThan, LabelOpLessThan})
	}
	vals := slices.Clone(values)
	slices.Sort(vals)
	vals = slices.Compact(vals)
	if op != LabelOpGreaterThan && op != LabelOpLessThan {
		for i, v := range vals {
			if msgs := IsValidLabelValue(v); len(msgs) > 0 {
				return LabelRequirement{}, Invalid(valuePath.Index(i), v, strings.Join(msgs, "; "))
			}
		}
	}
	return LabelRequirement{Key: key, Operator: op, Values: vals}, nil
}

// NewLabelSelector returns a selector of the given requirements (sorted by
// key; the order of requirements with equal keys is kept).
func NewLabelSelector(reqs ...LabelRequirement) LabelSelector {
	rs := make([]LabelRequirement, len(reqs))
	copy(rs, reqs)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Key < rs[j].Key })
	return LabelSelector{reqs: rs}
}

// LabelSelectorError is a syntax or validation error in a label selector.
type LabelSelectorError struct {
	// Selector is the text being parsed.
	Selector string
	// Msg says what is wrong.
	Msg string
}

func (e *LabelSelectorError) Error() string { return e.Msg }

// LabelSelectorFromObject converts the structured selector of
// Kubernetes' metav1.LabelSelector, in generic form:
//
//	{"matchLabels": {"app": "web"},
//	 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}
//
// Operators are In, NotIn, Exists and DoesNotExist. As in Kubernetes, a nil
// object selects nothing and an empty one selects everything.
func LabelSelectorFromObject(obj map[string]any) (LabelSelector, error) {
	if obj == nil {
		return LabelSelector{nothing: true}, nil
	}
	var reqs []LabelRequirement
	if ml, ok := obj["matchLabels"]; ok && ml != nil {
		m, ok := ml.(map[string]any)
		if !ok {
			return LabelSelector{}, fmt.Errorf("matchLabels: must be an object, not %s", jsonTypeName(ml))
		}
		for _, k := range sortedStringKeys(m) {
			v, ok := m[k].(string)
			if !ok {
				return LabelSelector{}, fmt.Errorf("matchLabels[%s]: must be a string, not %s", k, jsonTypeName(m[k]))
			}
			r, err := NewLabelRequirement(k, LabelOpEquals, []string{v})
			if err != nil {
				return LabelSelector{}, fmt.Errorf("matchLabels[%s]: %w", k, err)
			}
			reqs = append(reqs, r)
		}
	}
	if me, ok := obj["matchExpressions"]; ok && me != nil {
		list, ok := me.([]any)
		if !ok {
			return LabelSelector{}, fmt.Errorf("matchExpressions: must be an array, not %s", jsonTypeName(me))
		}
		for i, e := range list {
			r, err := labelRequirementFromObject(e)
			if err != nil {
				return LabelSelector{}, fmt.Errorf("matchExpressions[%d]: %w", i, err)
			}
			reqs = append(reqs, r)
		}
	}
	return NewLabelSelector(reqs...), nil
}

func labelRequirementFromObject(e any) (LabelRequirement, error) {
	m, ok := e.(map[string]any)
	if !ok {
		return LabelRequirement{}, fmt.Errorf("must be an object, not %s", jsonTypeName(e))
	}
	key, _ := m["key"].(string)
	opName, ok := m["operator"].(string)
	if !ok {
		return LabelRequirement{}, fmt.Errorf("operator: must be a string, not %s", jsonTypeName(m["operator"]))
	}
	var values []string
	if vs, ok := m["values"]; ok && vs != nil {
		list, ok := vs.([]any)
		if !ok {
			return LabelRequirement{}, fmt.Errorf("values: must be an array, not %s", jsonTypeName(vs))
		}
		for j, v := range list {
			s, ok := v.(string)
			if !ok {
				return LabelRequirement{}, fmt.Errorf("values[%d]: must be a string, not %s", j, jsonTypeName(v))
			}
			values = append(values, s)
		}
	}
	var op string
	switch opName {
	case "In":
		op = LabelOpIn
	case "NotIn":
		op = LabelOpNotIn
	case "Exists":
		op = LabelOpExists
	case "DoesNotExist":
		op = LabelOpDoesNotExist
	default:
		return LabelRequirement{}, fmt.Errorf("%q is not a valid label selector operator", opName)
	}
	return NewLabelRequirement(key, op, values)
}
