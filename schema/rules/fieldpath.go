package rules

import (
	"fmt"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// pathStep is one step of a rule's fieldPath: a field, or a map key.
type pathStep struct {
	name string
	key  bool
}

// appendPath is path followed by steps.
func appendPath(path *meta.Path, steps []pathStep) *meta.Path {
	for _, s := range steps {
		if s.key {
			path = path.Key(s.name)
		} else {
			path = path.Child(s.name)
		}
	}
	return path
}

// parseFieldPath parses a rule's fieldPath (".spec.replicas",
// ".labels['app.kubernetes.io/name']") relative to level n at path and
// checks that the schema has it.
func parseFieldPath(fp string, n *node, path *meta.Path) ([]pathStep, error) {
	var steps []pathStep
	rest := fp
	for rest != "" {
		switch {
		case rest[0] == '.':
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			name := rest[1 : end+1]
			if name == "" {
				return nil, fmt.Errorf("empty field name")
			}
			if n.fields == nil {
				return nil, fmt.Errorf("%s has no field %q", pathString(path), name)
			}
			f := fieldByJSON(n, name)
			if f == nil {
				return nil, fmt.Errorf("does not refer to a valid field: %q is not a field of %s", name, pathString(path))
			}
			n, path, rest = f.n, path.Child(name), rest[end+1:]
			steps = append(steps, pathStep{name: name})
		case strings.HasPrefix(rest, "['"):
			end := strings.Index(rest, "']")
			if end < 0 {
				return nil, fmt.Errorf("unterminated key")
			}
			key := rest[2:end]
			switch {
			case n.fields != nil:
				f := fieldByJSON(n, key)
				if f == nil {
					return nil, fmt.Errorf("does not refer to a valid field: %q is not a field of %s", key, pathString(path))
				}
				n, path = f.n, path.Child(key)
				steps = append(steps, pathStep{name: key})
			case n.elem != nil && n.s.AdditionalProperties != nil:
				n, path = n.elem, path.Key(key)
				steps = append(steps, pathStep{name: key, key: true})
			default:
				return nil, fmt.Errorf("%s is not an object or a map", pathString(path))
			}
			rest = rest[end+2:]
		default:
			return nil, fmt.Errorf("expected a field (.name) or a key (['name']) at %q; list indexes are not supported", rest)
		}
	}
	return steps, nil
}

// fieldByJSON is the field of object level n with JSON name name.
func fieldByJSON(n *node, name string) *field {
	for _, f := range n.fields {
		if f.json == name {
			return f
		}
	}
	return nil
}
