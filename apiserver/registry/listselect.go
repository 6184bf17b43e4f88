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

// matches evaluates the label and field selectors of opts on a stored
// object; the object is decoded whole only when a selectable field (other
// than name and namespace) is asked for.
func (s *Store) matches(so storedObject, rev int64, opts ListOptions) (bool, error) {
	head, err := readSelectorHead(so.json)
	if err != nil {
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
		if _, ok := s.res.fieldPaths[field]; !ok {
			return "", false
		}
		if full == nil {
			var err error
			if full, err = decodeObject(so.json); err != nil {
				return "", false
			}
		}
		return s.fieldValue(full, field), true
	}
	return opts.Fields.Matches(get), nil
}

// selectorHead is what selectors read of every object: name, namespace and
// labels.
type selectorHead struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

func readSelectorHead(js []byte) (selectorHead, error) {
	var head selectorHead
	err := json.Unmarshal(js, &head)
	return head, err
}

// fieldValue is the value of selectable field label (Resource.fieldPaths)
// in full as field selectors compare it: "" when the object has none.
func (s *Store) fieldValue(full Object, label string) string {
	v, ok := lookupPath(full, s.res.fieldPaths[label])
	if !ok {
		return ""
	}
	return scalarString(v)
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
