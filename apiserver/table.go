package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
)

type tableColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
}

type tableRow struct {
	Cells  []any           `json:"cells"`
	Object json.RawMessage `json:"object,omitempty"`
}

type table struct {
	Kind              string        `json:"kind"`
	APIVersion        string        `json:"apiVersion"`
	Metadata          meta.ListMeta `json:"metadata"`
	ColumnDefinitions []tableColumn `json:"columnDefinitions"`
	Rows              []tableRow    `json:"rows"`
}

const nameDescription = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"

// writeTable answers a get or list with a meta.k8s.io Table: the Name column,
// then the type's printer columns (or "Created At" when it has none).
func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, st *registry.Store, version string, items [][]byte, lm meta.ListMeta, single bool) {
	res := st.Resource()
	include := r.URL.Query().Get("includeObject")
	switch include {
	case "", "Metadata", "None", "Object":
	default:
		s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("includeObject: unsupported value %q: supported values are None, Metadata and Object", include)))
		return
	}
	t := table{Kind: "Table", APIVersion: "meta.k8s.io/" + version, Metadata: lm, Rows: []tableRow{}}
	t.ColumnDefinitions = append(t.ColumnDefinitions, tableColumn{Name: "Name", Type: "string", Format: "name", Description: nameDescription})
	cols := res.PrinterColumns
	if len(cols) == 0 {
		t.ColumnDefinitions = append(t.ColumnDefinitions, tableColumn{Name: "Created At", Type: "date", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."})
	}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, tableColumn{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority})
	}
	now := time.Now()
	for _, raw := range items {
		v, _, err := codec.DecodeJSON(raw)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			s.writeError(w, r, meta.NewInternalError(fmt.Errorf("decoding stored object: %v", err)))
			return
		}
		row := tableRow{Cells: []any{meta.GetName(obj)}}
		if len(cols) == 0 {
			ts, _ := lookup(obj, ".metadata.creationTimestamp")
			row.Cells = append(row.Cells, ts)
		}
		for _, c := range cols {
			row.Cells = append(row.Cells, cellValue(obj, c, now))
		}
		switch include {
		case "None":
		case "Object":
			if _, ok := obj["kind"]; !ok {
				obj["kind"] = res.Kind
				obj["apiVersion"] = res.APIVersion()
				raw, _ = json.Marshal(obj)
			}
			row.Object = raw
		default:
			pom := map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
			row.Object, _ = json.Marshal(pom)
		}
		t.Rows = append(t.Rows, row)
	}
	if single {
		t.Metadata = meta.ListMeta{ResourceVersion: meta.GetResourceVersion(mustObject(items[0]))}
	}
	body, err := json.Marshal(t)
	if err != nil {
		s.writeError(w, r, meta.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func mustObject(raw []byte) map[string]any {
	v, _, _ := codec.DecodeJSON(raw)
	m, _ := v.(map[string]any)
	return m
}

// cellValue evaluates one printer column on an object, as kube-apiserver
// does for custom resources: missing values are nil, dates are ages.
func cellValue(obj map[string]any, c registry.Column, now time.Time) any {
	if c.Value != nil {
		return c.Value(obj)
	}
	v, ok := lookup(obj, c.JSONPath)
	if !ok || v == nil {
		return nil
	}
	switch c.Type {
	case "date":
		s, ok := v.(string)
		if !ok {
			return "<invalid>"
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return "<invalid>"
		}
		return HumanDuration(now.Sub(t))
	case "string":
		if s, ok := v.(string); ok {
			return s
		}
		return fmt.Sprint(v)
	case "integer", "number":
		if n, ok := v.(json.Number); ok {
			return n
		}
		return v
	case "boolean":
		return v
	}
	return v
}

// lookup evaluates a simple JSON path (".a.b", ".a[0].b", ".a['x.y']").
func lookup(obj any, path string) (any, bool) {
	path = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(path, "{"), "}"), ".")
	cur := obj
	for path != "" {
		var key string
		var idx = -1
		switch {
		case strings.HasPrefix(path, "['") || strings.HasPrefix(path, `["`):
			end := strings.Index(path[2:], path[1:2]+"]")
			if end < 0 {
				return nil, false
			}
			key = path[2 : 2+end]
			path = path[2+end+2:]
		case strings.HasPrefix(path, "["):
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			n, err := strconv.Atoi(path[1:end])
			if err != nil {
				return nil, false
			}
			idx = n
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			key = path[:end]
			path = path[end:]
		}
		path = strings.TrimPrefix(path, ".")
		if idx >= 0 {
			arr, ok := cur.([]any)
			if !ok || idx >= len(arr) {
				return nil, false
			}
			cur = arr[idx]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// HumanDuration renders an age the way kubectl and kube-apiserver do
// ("45s", "3m20s", "5h", "12d").
func HumanDuration(d time.Duration) string {
	if d < -time.Second {
		return "<invalid>"
	}
	if d < 0 {
		return "0s"
	}
	if s := int(d.Seconds()); s < 60*2 {
		return fmt.Sprintf("%ds", s)
	}
	m := int(d.Minutes())
	if m < 10 {
		if s := int(d.Seconds()) % 60; s != 0 {
			return fmt.Sprintf("%dm%ds", m, s)
		}
		return fmt.Sprintf("%dm", m)
	}
	if m < 60*3 {
		return fmt.Sprintf("%dm", m)
	}
	h := int(d.Hours())
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
