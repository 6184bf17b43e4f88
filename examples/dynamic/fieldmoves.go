package main

import (
	"fmt"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// fieldMove is a checked FieldMove: its paths split into field names.
type fieldMove struct {
	path, hubPath []string
}

// newFieldMove checks m's paths (against the version's schema, and the
// hub's when the hub is a version) and splits them.
func newFieldMove(m FieldMove, versionSchema, hubSchema *schema.Schema) (fieldMove, error) {
	path, err := splitPath(m.Path)
	if err != nil {
		return fieldMove{}, fmt.Errorf("path: %w", err)
	}
	hubPath, err := splitPath(m.HubPath)
	if err != nil {
		return fieldMove{}, fmt.Errorf("hubPath: %w", err)
	}
	at, err := fieldSchema(versionSchema, path)
	if err != nil {
		return fieldMove{}, fmt.Errorf("path %s: %w in the schema of %s", m.Path, err, m.Version)
	}
	if hubSchema != nil {
		hubAt, err := fieldSchema(hubSchema, hubPath)
		if err != nil {
			return fieldMove{}, fmt.Errorf("hubPath %s: %w in the schema of the hub", m.HubPath, err)
		}
		if at != nil && hubAt != nil && at.Type != "" && hubAt.Type != "" && at.Type != hubAt.Type {
			return fieldMove{}, fmt.Errorf("path %s is of type %s, hubPath %s of type %s", m.Path, at.Type, m.HubPath, hubAt.Type)
		}
	}
	return fieldMove{path: path, hubPath: hubPath}, nil
}

// splitPath splits "spec.paint.color" into field names. A path may not
// reach into apiVersion, kind or metadata, which the registry sets.
func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("is required")
	}
	names := strings.Split(p, ".")
	for _, n := range names {
		if n == "" {
			return nil, fmt.Errorf("%q has an empty field name (want field names separated by dots, as spec.paint.color)", p)
		}
	}
	switch names[0] {
	case "apiVersion", "kind", "metadata":
		return nil, fmt.Errorf("%q: %s cannot be moved", p, names[0])
	}
	return names, nil
}

// fieldSchema returns the schema of the field at path, or nil when the
// path goes through fields the schema keeps without describing them
// (x-kubernetes-preserve-unknown-fields); an error when the schema has no
// such field.
func fieldSchema(s *schema.Schema, path []string) (*schema.Schema, error) {
	for i, name := range path {
		switch {
		case s.Properties[name] != nil:
			s = s.Properties[name]
		case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			s = s.AdditionalProperties.Schema
		case s.XPreserveUnknownFields:
			return nil, nil
		default:
			return nil, fmt.Errorf("no field %s", strings.Join(path[:i+1], "."))
		}
	}
	return s, nil
}

// fieldMovesSpoke converts a version's objects to and from the hub by its
// moves (none: the objects have the hub's fields).
func fieldMovesSpoke(moves []fieldMove) registry.Spoke {
	return registry.Spoke{
		ToHub:   func(obj registry.Object) (registry.Object, error) { return moveFields(obj, moves, true) },
		FromHub: func(obj registry.Object) (registry.Object, error) { return moveFields(obj, moves, false) },
	}
}

// moveFields moves the fields of moves in obj, to the hub's paths or back
// from them. Every field is taken out before any is put in place, so that
// moves may swap fields. A field that is absent is not moved.
func moveFields(obj registry.Object, moves []fieldMove, toHub bool) (registry.Object, error) {
	type taken struct {
		to    []string
		value any
	}
	var values []taken
	for _, m := range moves {
		from, to := m.path, m.hubPath
		if !toHub {
			from, to = to, from
		}
		if v, ok := takeField(obj, from); ok {
			values = append(values, taken{to, v})
		}
	}
	for _, t := range values {
		if err := putField(obj, t.to, t.value); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// takeField removes the field at path from obj and returns it, with the
// objects on its path it leaves empty.
func takeField(obj map[string]any, path []string) (any, bool) {
	parent, ok := obj[path[0]]
	if len(path) == 1 {
		delete(obj, path[0])
		return parent, ok
	}
	m, isObject := parent.(map[string]any)
	if !isObject {
		return nil, false
	}
	v, ok := takeField(m, path[1:])
	if ok && len(m) == 0 {
		delete(obj, path[0])
	}
	return v, ok
}

// putField sets the field at path in obj, adding the objects on its path
// that are missing.
func putField(obj map[string]any, path []string, value any) error {
	for i, name := range path[:len(path)-1] {
		next, ok := obj[name]
		if !ok || next == nil {
			m := map[string]any{}
			obj[name] = m
			obj = m
			continue
		}
		m, isObject := next.(map[string]any)
		if !isObject {
			return fmt.Errorf("cannot move a field to %s: %s is not an object", strings.Join(path, "."), strings.Join(path[:i+1], "."))
		}
		obj = m
	}
	obj[path[len(path)-1]] = value
	return nil
}
