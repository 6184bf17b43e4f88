package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
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
	// placedName says a column of format "name" places the name: the
	// Name column does not come first.
	placedName bool
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
	b.placedName = slices.ContainsFunc(b.cols, func(c registry.Column) bool { return c.Format == "name" })
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
	if b.placedName {
		out = out[:0]
	}
	if len(b.cols) == 0 {
		return append(out, tableColumn{Name: "Created At", Type: "date", Description: creationTimestampDescription})
	}
	for _, c := range b.cols {
		desc := c.Description
		if desc == "" && c.Value == nil {
			desc = "Custom resource definition column (in JSONPath format): " + c.JSONPath
		}
		typ := c.Type
		if c.DefinitionType != "" {
			typ = c.DefinitionType
		}
		out = append(out, tableColumn{Name: c.Name, Type: typ, Format: c.Format, Description: desc, Priority: c.Priority})
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
			if *dst, _, err = codec.DecodeStoredJSON(mdFields[i]); err != nil {
				return row, "", internal(err)
			}
		}
	}
	nameStr, _ := name.(string)
	rvStr, _ := rv.(string)
	if !b.placedName {
		row.Cells = append(row.Cells, nameStr)
	}
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
			row.Cells = append(row.Cells, dateCell(c.Value(obj), c.Type, b.now))
		case obj != nil:
			row.Cells = append(row.Cells, orMissing(cellValue(b.paths[i].first(obj), c.Type, b.now), c))
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
			row.Cells = append(row.Cells, orMissing(cellValue(v, c.Type, b.now), c))
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

// orMissing is cell, or the column's Missing when the JSONPath found no
// value of the column's type.
func orMissing(cell any, c registry.Column) any {
	if cell == nil && c.Missing != nil {
		return c.Missing
	}
	return cell
}

// dateCell renders a Value column's timestamp (an RFC 3339 string or a
// time.Time) as an age when the column is a date, as JSONPath date columns
// are; other values, such as an age the function computed, are kept.
func dateCell(v any, typ string, now time.Time) any {
	if typ != "date" {
		return v
	}
	switch t := v.(type) {
	case time.Time:
		if t.IsZero() {
			return "<unknown>"
		}
		return HumanDuration(now.Sub(t))
	case string:
		if _, err := time.Parse(time.RFC3339, t); err == nil {
			return cellValue(t, "date", now)
		}
	}
	return v
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
