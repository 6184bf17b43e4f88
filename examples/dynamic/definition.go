package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// Definition describes one type, as the essential fields of a CRD. A type
// has either one version (Version and Schema) or several (Versions, with
// Conversion saying how objects convert between them).
type Definition struct {
	Group      string   `json:"group"`
	Plural     string   `json:"plural"`
	Kind       string   `json:"kind"`
	ShortNames []string `json:"shortNames,omitempty"`
	Namespaced bool     `json:"namespaced"`

	// Version and Schema define a type in one version.
	Version string         `json:"version,omitempty"`
	Schema  *schema.Schema `json:"schema,omitempty"`

	// Versions define a type in several versions, exactly one of them the
	// storage version.
	Versions   []VersionDefinition   `json:"versions,omitempty"`
	Conversion *ConversionDefinition `json:"conversion,omitempty"`
}

// VersionDefinition is one version of a type, as a CRD's spec.versions[].
type VersionDefinition struct {
	Name string `json:"name"`
	// Served is required: false keeps the version only to read the objects
	// still stored in it (requests to it answer 404).
	Served *bool `json:"served"`
	// Storage marks the version new and updated objects are written in.
	Storage            bool           `json:"storage"`
	Deprecated         bool           `json:"deprecated,omitempty"`
	DeprecationWarning string         `json:"deprecationWarning,omitempty"`
	Schema             *schema.Schema `json:"schema"`
}

// Conversion strategies.
const (
	// StrategyNone converts by rewriting apiVersion only (a CRD's None):
	// for versions whose objects have the same fields.
	StrategyNone = "None"
	// StrategyFieldMoves converts through a hub by moving fields; fields a
	// move does not name stay where they are.
	StrategyFieldMoves = "FieldMoves"
)

// ConversionDefinition says how objects convert between the versions.
type ConversionDefinition struct {
	// Strategy is None (the default) or FieldMoves.
	Strategy string `json:"strategy,omitempty"`
	// Hub is the form FieldMoves convert through: one of the versions, or
	// another name for a form that is never served or stored.
	Hub string `json:"hub,omitempty"`
	// FieldMoves say where fields of a version are in the hub's form.
	FieldMoves []FieldMove `json:"fieldMoves,omitempty"`
}

// FieldMove moves one field: from Path in Version's objects to HubPath in
// the hub's (converting to the hub), and back (converting from it). Paths
// are field names separated by dots, such as spec.paint.color.
type FieldMove struct {
	Version string `json:"version"`
	Path    string `json:"path"`
	HubPath string `json:"hubPath"`
}

// refusedError is a definition the server cannot serve: the admin API
// answers it with 422.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

func refused(format string, args ...any) error {
	return &refusedError{fmt.Errorf(format, args...)}
}

// versions turns d into a registration of its type in every version.
func (d Definition) versions() (registry.Versions, error) {
	base := registry.Resource{Group: d.Group, Resource: d.Plural, Kind: d.Kind,
		ShortNames: d.ShortNames, Namespaced: d.Namespaced}
	if len(d.Versions) == 0 {
		switch {
		case d.Conversion != nil:
			return registry.Versions{}, refused("conversion applies to a definition with versions")
		case d.Schema == nil:
			return registry.Versions{}, refused("a definition needs a schema (or versions, each with its schema)")
		}
		if err := schema.Check(d.Schema); err != nil {
			return registry.Versions{}, refused("the schema is not structural: %w", err)
		}
		res := base
		res.Version, res.Schema = d.Version, d.Schema
		return registry.Versions{Versions: []registry.Resource{res}, Storage: d.Version, Conversion: registry.Conversion{None: true}}, nil
	}
	if d.Version != "" || d.Schema != nil {
		return registry.Versions{}, refused("a definition has either version and schema, or versions, not both")
	}
	out := registry.Versions{}
	var storage []string
	for i, v := range d.Versions {
		switch {
		case v.Name == "":
			return registry.Versions{}, refused("versions[%d]: name is required", i)
		case v.Served == nil:
			return registry.Versions{}, refused("versions[%d] (%s): served is required (true or false)", i, v.Name)
		case v.Schema == nil:
			return registry.Versions{}, refused("versions[%d] (%s): schema is required", i, v.Name)
		case v.DeprecationWarning != "" && !v.Deprecated:
			return registry.Versions{}, refused("versions[%d] (%s): deprecationWarning can only be set for a deprecated version", i, v.Name)
		}
		if err := schema.Check(v.Schema); err != nil {
			return registry.Versions{}, refused("versions[%d] (%s): the schema is not structural: %w", i, v.Name, err)
		}
		if v.Storage {
			storage = append(storage, v.Name)
		}
		res := base
		res.Version, res.Schema, res.Unserved = v.Name, v.Schema, !*v.Served
		res.Deprecated, res.DeprecationWarning = v.Deprecated, v.DeprecationWarning
		out.Versions = append(out.Versions, res)
	}
	if len(storage) != 1 {
		return registry.Versions{}, refused("versions: must have exactly one version marked as storage version, found %d%s",
			len(storage), listed(storage))
	}
	out.Storage = storage[0]
	conv, err := d.conversion()
	if err != nil {
		return registry.Versions{}, err
	}
	out.Conversion = conv
	return out, nil
}

// listed is " (a, b)" for a non-empty list, "" otherwise.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// conversion builds the registry's conversion from d.Conversion: None, or
// spokes that move fields to and from the hub.
func (d Definition) conversion() (registry.Conversion, error) {
	c := d.Conversion
	if c == nil {
		c = &ConversionDefinition{}
	}
	switch c.Strategy {
	case "", StrategyNone:
		if c.Hub != "" || len(c.FieldMoves) > 0 {
			return registry.Conversion{}, refused("conversion: strategy None takes no hub or fieldMoves")
		}
		return registry.Conversion{None: true}, nil
	case StrategyFieldMoves:
	default:
		return registry.Conversion{}, refused("conversion.strategy: %q is not supported: use %s or %s", c.Strategy, StrategyNone, StrategyFieldMoves)
	}
	if c.Hub == "" {
		return registry.Conversion{}, refused("conversion.hub is required with strategy %s", StrategyFieldMoves)
	}
	schemas := map[string]*schema.Schema{}
	for _, v := range d.Versions {
		schemas[v.Name] = v.Schema
	}
	moves := map[string][]fieldMove{}
	for i, m := range c.FieldMoves {
		at := fmt.Sprintf("conversion.fieldMoves[%d]", i)
		if schemas[m.Version] == nil || m.Version == c.Hub {
			return registry.Conversion{}, refused("%s.version: %q is not one of the versions other than the hub %s", at, m.Version, c.Hub)
		}
		fm, err := newFieldMove(m, schemas[m.Version], schemas[c.Hub])
		if err != nil {
			return registry.Conversion{}, refused("%s: %w", at, err)
		}
		for _, other := range moves[m.Version] {
			if overlap(fm.path, other.path) || overlap(fm.hubPath, other.hubPath) {
				return registry.Conversion{}, refused("%s: overlaps another move of version %s (%s → %s)", at, m.Version,
					strings.Join(other.path, "."), strings.Join(other.hubPath, "."))
			}
		}
		moves[m.Version] = append(moves[m.Version], fm)
	}
	spokes := map[string]registry.Spoke{}
	for _, v := range d.Versions {
		if v.Name != c.Hub {
			spokes[v.Name] = fieldMovesSpoke(moves[v.Name])
		}
	}
	return registry.Conversion{Hub: c.Hub, Spokes: spokes}, nil
}

// overlap reports whether one path is the other or inside it.
func overlap(a, b []string) bool {
	n := min(len(a), len(b))
	return slices.Equal(a[:n], b[:n])
}
