package meta

import (
	"fmt"
	"sort"
	"strings"
)

// Field selector operators. "==" is accepted when parsing and normalised to
// "=", as Kubernetes does.
const (
	FieldOpEquals    = "="
	FieldOpNotEquals = "!="
)

// FieldRequirement is one condition of a field selector.
type FieldRequirement struct {
	// Field is the field path, e.g. "metadata.name" or "spec.color".
	Field string
	// Operator is FieldOpEquals or FieldOpNotEquals.
	Operator string
	// Value is the unescaped value.
	Value string
}

// String renders the requirement with its value escaped.
func (r FieldRequirement) String() string {
	return r.Field + r.Operator + EscapeFieldValue(r.Value)
}

// FieldSelector selects objects by field values: all its requirements must
// hold. The zero FieldSelector is empty and matches everything.
type FieldSelector struct {
	reqs []FieldRequirement
}

// ParseFieldSelector parses a field selector: comma-separated terms
// field=value, field==value or field!=value. In values, "\," "\=" and "\\"
// stand for ",", "=" and "\"; other escapes, and unescaped "," or "=", are
// errors. Whitespace around field names is ignored; values are taken as
// written. The empty string selects everything.
func ParseFieldSelector(selector string) (FieldSelector, error) {
	var reqs []FieldRequirement
	for _, term := range splitFieldTerms(selector) {
		if term == "" {
			continue
		}
		field, op, raw, ok := splitFieldTerm(term)
		if !ok {
			return FieldSelector{}, fmt.Errorf("invalid selector: '%s'; can't understand '%s'", selector, term)
		}
		field = strings.TrimSpace(field)
		if field == "" || strings.HasSuffix(field, "!") {
			return FieldSelector{}, fmt.Errorf("invalid selector: '%s'; can't understand '%s': invalid field name %q", selector, term, field)
		}
		value, err := UnescapeFieldValue(raw)
		if err != nil {
			return FieldSelector{}, err
		}
		if op == "==" {
			op = FieldOpEquals
		}
		reqs = append(reqs, FieldRequirement{Field: field, Operator: op, Value: value})
	}
	return NewFieldSelector(reqs...), nil
}

// NewFieldSelector returns a selector of the given requirements, sorted.
func NewFieldSelector(reqs ...FieldRequirement) FieldSelector {
	rs := make([]FieldRequirement, len(reqs))
	copy(rs, reqs)
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		if a.Operator != b.Operator {
			return a.Operator < b.Operator
		}
		return a.Value < b.Value
	})
	return FieldSelector{reqs: rs}
}

// splitFieldTerms splits on commas not escaped by a backslash.
func splitFieldTerms(s string) []string {
	if s == "" {
		return nil
	}
	var terms []string
	start := 0
	escaped := false
	for i := 0; i < len(s); i++ {
		switch {
		case escaped:
			escaped = false
		case s[i] == '\\':
			escaped = true
		case s[i] == ',':
			terms = append(terms, s[start:i])
			start = i + 1
		}
	}
	return append(terms, s[start:])
}

// splitFieldTerm splits at the first operator; field names cannot escape
// operator characters.
func splitFieldTerm(term string) (field, op, value string, ok bool) {
	for i := 0; i < len(term); i++ {
		for _, op := range []string{"!=", "==", "="} {
			if strings.HasPrefix(term[i:], op) {
				return term[:i], op, term[i+len(op):], true
			}
		}
	}
	return "", "", "", false
}

// EscapeFieldValue escapes "\", "," and "=" in a field selector value.
func EscapeFieldValue(s string) string {
	if !strings.ContainsAny(s, `\,=`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', ',', '=':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnescapeFieldValue reverses EscapeFieldValue, failing on unknown escape
// sequences and on unescaped "," or "=".
func UnescapeFieldValue(s string) (string, error) {
	if !strings.ContainsAny(s, `\,=`) {
		return s, nil
	}
	var b strings.Builder
	escaped := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escaped {
			switch c {
			case '\\', ',', '=':
				b.WriteByte(c)
			default:
				return "", fmt.Errorf("invalid field selector: invalid escape sequence: %s", `\`+string(c))
			}
			escaped = false
			continue
		}
		switch c {
		case '\\':
			escaped = true
		case ',', '=':
			return "", fmt.Errorf("invalid field selector: unescaped character in value: %c", c)
		default:
			b.WriteByte(c)
		}
	}
	if escaped {
		return "", fmt.Errorf("invalid field selector: invalid escape sequence: %s", `\`)
	}
	return b.String(), nil
}

// Matches reports whether every requirement holds. get returns a field's
// value; as in Kubernetes, a field that get does not know reads as "".
func (s FieldSelector) Matches(get func(field string) (string, bool)) bool {
	for _, r := range s.reqs {
		v, _ := get(r.Field)
		if (v == r.Value) != (r.Operator == FieldOpEquals) {
			return false
		}
	}
	return true
}

// Requirements returns a copy of the requirements, sorted.
func (s FieldSelector) Requirements() []FieldRequirement {
	return append([]FieldRequirement(nil), s.reqs...)
}

// Empty reports whether the selector has no requirements.
func (s FieldSelector) Empty() bool { return len(s.reqs) == 0 }

// RequiresExactMatch returns the value field must equal for the selector to
// match, if it has such an "=" requirement (the first one when several).
func (s FieldSelector) RequiresExactMatch(field string) (string, bool) {
	for _, r := range s.reqs {
		if r.Field == field && r.Operator == FieldOpEquals {
			return r.Value, true
		}
	}
	return "", false
}

// String renders the selector canonically: sorted requirements joined by
// ",", values escaped. Parsing the result gives an equal selector.
func (s FieldSelector) String() string {
	parts := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}
