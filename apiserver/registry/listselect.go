package registry

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// matches evaluates the label and field selectors of opts on a stored object.
func (s *Store) matches(so storedObject, rev int64, opts ListOptions) (bool, error) {
	var head struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(so.json, &head); err != nil {
		return false, meta.NewInternalError(err)
	}
	if opts.Labels != nil && !opts.Labels.Matches(head.Metadata.Labels) {
		return false, nil
	}
	if opts.Fields == nil {
		return true, nil
	}
	var full Object
	get := func(field string) (string, bool) {
		switch field {
		case "metadata.name":
			return head.Metadata.Name, true
		case "metadata.namespace":
			return head.Metadata.Namespace, true
		}
		path, ok := s.res.fieldPaths[field]
		if !ok {
			return "", false
		}
		if full == nil {
			var err error
			if full, err = decodeObject(so.json); err != nil {
				return "", false
			}
		}
		v, ok := lookupPath(full, path)
		if !ok {
			return "", true
		}
		return scalarString(v), true
	}
	return opts.Fields.Matches(get), nil
}

// Count returns the number of stored objects of the type.
func (s *Store) Count(ctx context.Context) (int64, error) {
	page, err := s.storage.List(ctx, storage.ListOptions{Prefix: s.prefix, Limit: 1, KeysOnly: true})
	if err != nil {
		return 0, err
	}
	return int64(len(page.Items)) + max(page.Remaining, 0), nil
}

// SelectableFieldList renders the fields a field selector may use, quoted
// and comma-separated, for error messages.
func (s *Store) SelectableFieldList() string {
	labels := make([]string, 0, len(s.res.fieldPaths))
	for l := range s.res.fieldPaths {
		labels = append(labels, strconv.Quote(l))
	}
	sort.Strings(labels)
	return strings.Join(append([]string{`"metadata.name"`, `"metadata.namespace"`}, labels...), ", ")
}

// SupportsField reports whether field may be used in a field selector.
func (s *Store) SupportsField(field string) bool {
	_, ok := s.res.fieldPaths[field]
	return ok || field == "metadata.name" || field == "metadata.namespace"
}

func lookupPath(obj any, path []string) (any, bool) {
	cur := obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case nil:
		return ""
	}
	if n, ok := numberString(v); ok {
		return n
	}
	b, _ := json.Marshal(v)
	return string(b)
}
