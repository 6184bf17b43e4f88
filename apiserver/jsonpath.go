package apiserver

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// jsonPath is a compiled JSONPath of the subset printer columns use:
// .field, ['field'], [index] (negative from the end), [*] and .*, and
// filters [?(@.path OP literal)] with ==, !=, <, <=, >, >= or a bare
// [?(@.path)] for existence. Evaluation gives the first result, as
// kube-apiserver takes results[0][0].
type jsonPath []jsonStep

type jsonStep struct {
	field    string
	index    int
	kind     byte // 'f' field, 'i' index, '*' wildcard, '?' filter
	filter   jsonPath
	op       string
	operand  any
	hasValue bool
}

func compileJSONPath(path string) (jsonPath, error) {
	p := strings.TrimSpace(path)
	if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
		p = strings.TrimSpace(p[1 : len(p)-1])
	}
	p = strings.TrimPrefix(p, "$")
	steps, rest, err := parseSteps(p, false)
	if err != nil {
		return nil, fmt.Errorf("invalid JSONPath %q: %w", path, err)
	}
	if rest != "" {
		return nil, fmt.Errorf("invalid JSONPath %q: unexpected %q", path, rest)
	}
	return steps, nil
}

// parseSteps parses steps until the end or, inside a filter, an operator
// or ')'.
func parseSteps(p string, inFilter bool) (jsonPath, string, error) {
	var steps jsonPath
	for p != "" {
		switch {
		case inFilter && (p[0] == ' ' || p[0] == ')' || strings.ContainsRune("=!<>", rune(p[0]))):
			return steps, p, nil
		case strings.HasPrefix(p, ".*"):
			steps = append(steps, jsonStep{kind: '*'})
			p = p[2:]
		case p[0] == '.':
			end := 1
			for end < len(p) && !strings.ContainsRune(".[ )=!<>", rune(p[end])) {
				end++
			}
			if end == 1 {
				return nil, "", fmt.Errorf("empty field name")
			}
			steps = append(steps, jsonStep{kind: 'f', field: p[1:end]})
			p = p[end:]
		case strings.HasPrefix(p, "[*]"):
			steps = append(steps, jsonStep{kind: '*'})
			p = p[3:]
		case strings.HasPrefix(p, "['") || strings.HasPrefix(p, `["`):
			q := p[1]
			end := strings.IndexByte(p[2:], q)
			if end < 0 || !strings.HasPrefix(p[2+end+1:], "]") {
				return nil, "", fmt.Errorf("unterminated quoted field")
			}
			steps = append(steps, jsonStep{kind: 'f', field: p[2 : 2+end]})
			p = p[2+end+2:]
		case strings.HasPrefix(p, "[?("):
			step, rest, err := parseFilter(p[3:])
			if err != nil {
				return nil, "", err
			}
			steps = append(steps, step)
			p = rest
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, "", fmt.Errorf("unterminated index")
			}
			n, err := strconv.Atoi(strings.TrimSpace(p[1:end]))
			if err != nil {
				return nil, "", fmt.Errorf("unsupported subscript %q", p[:end+1])
			}
			steps = append(steps, jsonStep{kind: 'i', index: n})
			p = p[end+1:]
		default:
			if len(steps) == 0 && !inFilter {
				// A leading field without a dot: "spec.size".
				p = "." + p
				continue
			}
			return nil, "", fmt.Errorf("unexpected %q", p)
		}
	}
	return steps, "", nil
}

// parseFilter parses "@.path OP literal)]" or "@.path)]".
func parseFilter(p string) (jsonStep, string, error) {
	p = strings.TrimSpace(p)
	if !strings.HasPrefix(p, "@") {
		return jsonStep{}, "", fmt.Errorf("filter must start with @")
	}
	sub, rest, err := parseSteps(p[1:], true)
	if err != nil {
		return jsonStep{}, "", err
	}
	step := jsonStep{kind: '?', filter: sub}
	rest = strings.TrimSpace(rest)
	for _, op := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(rest, op) {
			step.op = op
			rest = strings.TrimSpace(rest[len(op):])
			lit, after, err := parseLiteral(rest)
			if err != nil {
				return jsonStep{}, "", err
			}
			step.operand, step.hasValue = lit, true
			rest = strings.TrimSpace(after)
			break
		}
	}
	if !strings.HasPrefix(rest, ")]") {
		return jsonStep{}, "", fmt.Errorf("unterminated filter")
	}
	return step, rest[2:], nil
}

func parseLiteral(p string) (any, string, error) {
	if p == "" {
		return nil, "", fmt.Errorf("missing value in filter")
	}
	if p[0] == '\'' || p[0] == '"' {
		end := strings.IndexByte(p[1:], p[0])
		if end < 0 {
			return nil, "", fmt.Errorf("unterminated string in filter")
		}
		return p[1 : 1+end], p[2+end:], nil
	}
	end := 0
	for end < len(p) && p[end] != ')' && p[end] != ' ' {
		end++
	}
	word := p[:end]
	switch word {
	case "true":
		return true, p[end:], nil
	case "false":
		return false, p[end:], nil
	case "null":
		return nil, p[end:], nil
	}
	f, err := strconv.ParseFloat(word, 64)
	if err != nil {
		return nil, "", fmt.Errorf("invalid value %q in filter", word)
	}
	return f, p[end:], nil
}

// firstRaw evaluates the path on JSON text: field steps scan the text, and
// what is left after them is decoded (only the value a cell shows, unless a
// step needs more).
func (p jsonPath) firstRaw(raw []byte) (any, error) {
	cur := raw
	for i, st := range p {
		if st.kind != 'f' {
			v, _, err := codec.DecodeStoredJSON(cur)
			if err != nil {
				return nil, err
			}
			return p[i:].first(v), nil
		}
		if t := bytes.TrimLeft(cur, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, nil // a field of something that is no object
		}
		f, err := codec.TopLevelFields(cur, st.field)
		if err != nil {
			return nil, err
		}
		if cur = f[0]; cur == nil {
			return nil, nil
		}
	}
	v, _, err := codec.DecodeStoredJSON(cur)
	return v, err
}

// first evaluates the path and returns its first result (nil for none).
func (p jsonPath) first(obj any) any {
	res := p.eval([]any{obj})
	if len(res) == 0 {
		return nil
	}
	return res[0]
}

func (p jsonPath) eval(cur []any) []any {
	for _, st := range p {
		var next []any
		for _, v := range cur {
			switch st.kind {
			case 'f':
				if m, ok := v.(map[string]any); ok {
					if x, ok := m[st.field]; ok {
						next = append(next, x)
					}
				}
			case 'i':
				if a, ok := v.([]any); ok {
					i := st.index
					if i < 0 {
						i += len(a)
					}
					if i >= 0 && i < len(a) {
						next = append(next, a[i])
					}
				}
			case '*':
				switch x := v.(type) {
				case []any:
					next = append(next, x...)
				case map[string]any:
					keys := make([]string, 0, len(x))
					for k := range x {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						next = append(next, x[k])
					}
				}
			case '?':
				a, ok := v.([]any)
				if !ok {
					continue
				}
				for _, el := range a {
					if st.match(el) {
						next = append(next, el)
					}
				}
			}
		}
		cur = next
		if len(cur) == 0 {
			return nil
		}
	}
	return cur
}

func (st jsonStep) match(el any) bool {
	res := st.filter.eval([]any{el})
	if !st.hasValue {
		return len(res) > 0
	}
	if len(res) == 0 {
		return st.op == "!="
	}
	got := res[0]
	switch want := st.operand.(type) {
	case string:
		s, ok := got.(string)
		return compare(st.op, ok, strings.Compare(s, want))
	case float64:
		f, ok := meta.AsFloat64(got)
		c := 0
		if f < want {
			c = -1
		} else if f > want {
			c = 1
		}
		return compare(st.op, ok, c)
	case bool:
		b, ok := got.(bool)
		return compare(st.op, ok && (st.op == "==" || st.op == "!="), boolCompare(b == want))
	case nil:
		return compare(st.op, st.op == "==" || st.op == "!=", boolCompare(got == nil))
	}
	return false
}

// boolCompare is the comparison result of an equality test.
func boolCompare(equal bool) int {
	if equal {
		return 0
	}
	return 1
}

// compare applies op to a comparison result c (-1, 0, 1); ok false means the
// values are not comparable: only != holds.
func compare(op string, ok bool, c int) bool {
	if !ok {
		return op == "!="
	}
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}
