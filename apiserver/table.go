package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// The meta.k8s.io Table of kubectl get: a Name column, then the type's
// printer columns (or "Created At" when it has none), one row per object,
// each row carrying the object, its metadata or nothing (includeObject).

type tableColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
}

type tableRow struct {
	Cells []any `json:"cells"`
	// Object is null for includeObject=None, as kube-apiserver writes it.
	Object json.RawMessage `json:"object"`
}

type table struct {
	Kind              string        `json:"kind"`
	APIVersion        string        `json:"apiVersion"`
	Metadata          meta.ListMeta `json:"metadata"`
	ColumnDefinitions []tableColumn `json:"columnDefinitions"`
	Rows              []tableRow    `json:"rows"`
}

const nameDescription = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"

const creationTimestampDescription = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"

// includeObject values of a Table request.
const (
	includeNone     = "None"
	includeMetadata = "Metadata"
	includeObject   = "Object"
)

// tableInclude reads and checks the includeObject parameter.
func tableInclude(r *http.Request) (string, error) {
	v := queryOf(r).Get("includeObject")
	switch v {
	case "":
		return includeMetadata, nil
	case includeNone, includeMetadata, includeObject:
		return v, nil
	}
	return "", meta.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: includeObject: Unsupported value: %q: supported values: \"Metadata\", \"None\", \"Object\"", v))
}

// tableBuilder makes Tables of one resource's objects.
type tableBuilder struct {
	res     *registry.Resource
	version string // meta.k8s.io version: v1 or v1beta1
	include string
	now     time.Time
	cols    []registry.Column
	paths   []jsonPath // compiled JSONPath of cols (nil for Value columns)
	// decode says a column computes its cell from the decoded object
	// (Value); otherwise cells are read from the JSON text directly.
	decode bool
	// For reading the JSON text: the top-level keys and metadata keys the
	// row needs (each read in one pass), and where each column starts.
	topKeys, metaKeys []string
	starts            []pathStart
}

// pathStart is where a JSONPath column is read from: the raw value of
// topKeys[i] (level 1) or metaKeys[i] (level 2), then rest; level 0 reads
// the whole object.
type pathStart struct {
	level, index int
	rest         jsonPath
}

// Fixed metadata keys of every row.
const (
	metaName = iota
	metaResourceVersion
	metaCreationTimestamp
)

func keyIndex(keys *[]string, k string) int {
	for i, x := range *keys {
		if x == k {
			return i
		}
	}
	*keys = append(*keys, k)
	return len(*keys) - 1
}

func newTableBuilder(res *registry.Resource, version, include string, now time.Time) (*tableBuilder, error) {
	b := &tableBuilder{res: res, version: version, include: include, now: now, cols: res.PrinterColumns}
	b.paths = make([]jsonPath, len(b.cols))
	for i, c := range b.cols {
		if c.Value != nil {
			b.decode = true
			continue
		}
		p, err := compileJSONPath(c.JSONPath)
		if err != nil {
			return nil, meta.NewInternalError(fmt.Errorf("printer column %q: %w", c.Name, err))
		}
		b.paths[i] = p
	}
	b.topKeys = []string{"metadata"}
	b.metaKeys = []string{metaName: "name", metaResourceVersion: "resourceVersion", metaCreationTimestamp: "creationTimestamp"}
	b.starts = make([]pathStart, len(b.cols))
	for i, p := range b.paths {
		switch {
		case len(p) >= 2 && p[0].kind == 'f' && p[0].field == "metadata" && p[1].kind == 'f':
			b.starts[i] = pathStart{level: 2, index: keyIndex(&b.metaKeys, p[1].field), rest: p[2:]}
		case len(p) >= 1 && p[0].kind == 'f':
			b.starts[i] = pathStart{level: 1, index: keyIndex(&b.topKeys, p[0].field), rest: p[1:]}
		default:
			b.starts[i] = pathStart{rest: p}
		}
	}
	return b, nil
}

// columns returns the column definitions.
func (b *tableBuilder) columns() []tableColumn {
	out := []tableColumn{{Name: "Name", Type: "string", Format: "name", Description: nameDescription}}
	if len(b.cols) == 0 {
		return append(out, tableColumn{Name: "Created At", Type: "date", Description: creationTimestampDescription})
	}
	for _, c := range b.cols {
		desc := c.Description
		if desc == "" && c.Value == nil {
			desc = "Custom resource definition column (in JSONPath format): " + c.JSONPath
		}
		out = append(out, tableColumn{Name: c.Name, Type: c.Type, Format: c.Format, Description: desc, Priority: c.Priority})
	}
	return out
}

// build returns the Table of items. single says the items are one object
// (a get): the Table's resourceVersion is then the object's. headers
// includes the column definitions (watch events after the first have none).
func (b *tableBuilder) build(items [][]byte, lm meta.ListMeta, single, headers bool) (*table, error) {
	t := &table{Kind: "Table", APIVersion: codec.MetaGroup + "/" + b.version, Metadata: lm, Rows: make([]tableRow, 0, len(items))}
	if headers {
		t.ColumnDefinitions = b.columns()
	}
	for _, raw := range items {
		row, rv, err := b.row(raw)
		if err != nil {
			return nil, err
		}
		if single {
			t.Metadata = meta.ListMeta{ResourceVersion: rv}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// row makes the row of one object and returns its resourceVersion. Unless
// a column needs the decoded object, only the values the cells show are
// decoded.
func (b *tableBuilder) row(raw []byte) (tableRow, string, error) {
	internal := func(err error) error {
		return meta.NewInternalError(fmt.Errorf("reading an object for its table row: %v", err))
	}
	row := tableRow{Cells: make([]any, 0, 1+max(len(b.cols), 1))}
	top, err := codec.TopLevelFields(raw, b.topKeys...)
	if err != nil {
		return row, "", internal(err)
	}
	md := top[0]
	mdFields := make([][]byte, len(b.metaKeys))
	if md != nil {
		if mdFields, err = codec.TopLevelFields(md, b.metaKeys...); err != nil {
			return row, "", internal(err)
		}
	}
	var name, rv, created any
	for i, dst := range []*any{metaName: &name, metaResourceVersion: &rv, metaCreationTimestamp: &created} {
		if mdFields[i] != nil {
			if *dst, _, err = codec.DecodeJSON(mdFields[i]); err != nil {
				return row, "", internal(err)
			}
		}
	}
	nameStr, _ := name.(string)
	rvStr, _ := rv.(string)
	row.Cells = append(row.Cells, nameStr)
	if len(b.cols) == 0 {
		row.Cells = append(row.Cells, created)
	}
	var obj map[string]any
	if b.decode {
		// Columns never show managedFields, often the biggest part of an
		// object: they are not decoded.
		if obj, err = codec.DecodeObjectWithout(raw, []string{"metadata", "managedFields"}); err != nil {
			return row, "", internal(err)
		}
	}
	for i, c := range b.cols {
		switch {
		case c.Value != nil:
			row.Cells = append(row.Cells, c.Value(obj))
		case obj != nil:
			row.Cells = append(row.Cells, cellValue(b.paths[i].first(obj), c.Type, b.now))
		default:
			st := b.starts[i]
			from := raw
			switch st.level {
			case 1:
				from = top[st.index]
			case 2:
				from = mdFields[st.index]
			}
			var v any
			if from != nil {
				if v, err = st.rest.firstRaw(from); err != nil {
					return row, "", internal(err)
				}
			}
			row.Cells = append(row.Cells, cellValue(v, c.Type, b.now))
		}
	}
	switch b.include {
	case includeNone:
	case includeObject:
		row.Object = withTypeMeta(raw, b.res.Kind, b.res.APIVersion())
	default:
		row.Object = partialObjectMetadataJSON(b.version, md)
	}
	return row, rvStr, nil
}

// withTypeMeta returns the JSON object raw with kind and apiVersion first,
// adding them when it has none (items of built-in lists).
func withTypeMeta(raw []byte, kind, apiVersion string) []byte {
	if k, av, err := codec.TypeMeta(raw); err == nil && k != "" && av != "" {
		return raw
	}
	out := make([]byte, 0, len(raw)+len(kind)+len(apiVersion)+32)
	out = append(out, `{"kind":`...)
	out = appendQuotedJSON(out, kind)
	out = append(out, `,"apiVersion":`...)
	out = appendQuotedJSON(out, apiVersion)
	body := raw[1:] // after '{'
	for len(body) > 0 && (body[0] == ' ' || body[0] == '\n' || body[0] == '\t' || body[0] == '\r') {
		body = body[1:]
	}
	if len(body) > 0 && body[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body...)
}

// cellValue renders a printer column's value as kube-apiserver does for
// custom resources: integers and numbers as numbers, strings as text (other
// values as their JSON), dates as ages; nil for a missing or mistyped value.
func cellValue(v any, typ string, now time.Time) any {
	if v == nil {
		return nil
	}
	switch typ {
	case "integer":
		switch n := v.(type) {
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return i
			}
			if f, err := n.Float64(); err == nil {
				return int64(f)
			}
		case int64:
			return n
		case int:
			return int64(n)
		case float64:
			return int64(n)
		}
		return nil
	case "number":
		switch n := v.(type) {
		case json.Number:
			if f, err := n.Float64(); err == nil {
				return f
			}
		case float64:
			return n
		case int64:
			return float64(n)
		case int:
			return float64(n)
		}
		return nil
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
		return nil
	case "date":
		s, ok := v.(string)
		if !ok {
			return nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return "<invalid>"
		}
		if t.IsZero() {
			return "<unknown>"
		}
		return HumanDuration(now.Sub(t))
	case "string":
		switch s := v.(type) {
		case string:
			return s
		case map[string]any, []any:
			b, err := json.Marshal(s)
			if err != nil {
				return nil
			}
			return string(b)
		}
		return fmt.Sprint(v)
	}
	return nil
}

// ---- JSONPath ------------------------------------------------------------

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
			v, _, err := codec.DecodeJSON(cur)
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
	v, _, err := codec.DecodeJSON(cur)
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

// HumanDuration renders an age the way kubectl and kube-apiserver do
// ("45s", "3m20s", "5h", "12d").
func HumanDuration(d time.Duration) string {
	if s := int(d.Seconds()); s < -1 {
		return "<invalid>"
	} else if s < 0 {
		return "0s"
	} else if s < 60*2 {
		return fmt.Sprintf("%ds", s)
	}
	m := int(d / time.Minute)
	if m < 10 {
		if s := int(d/time.Second) % 60; s != 0 {
			return fmt.Sprintf("%dm%ds", m, s)
		}
		return fmt.Sprintf("%dm", m)
	}
	if m < 60*3 {
		return fmt.Sprintf("%dm", m)
	}
	h := int(d / time.Hour)
	if h < 8 {
		if m := m % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	if h < 48 {
		return fmt.Sprintf("%dh", h)
	}
	if h < 24*8 {
		if hh := h % 24; hh != 0 {
			return fmt.Sprintf("%dd%dh", h/24, hh)
		}
		return fmt.Sprintf("%dd", h/24)
	}
	if h < 24*365*2 {
		return fmt.Sprintf("%dd", h/24)
	}
	if h < 24*365*8 {
		if dy := (h / 24) % 365; dy != 0 {
			return fmt.Sprintf("%dy%dd", h/24/365, dy)
		}
		return fmt.Sprintf("%dy", h/24/365)
	}
	return fmt.Sprintf("%dy", h/24/365)
}
