package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
)

// Versions is one resource served in several versions: the same objects,
// read and written in each version's form, stored in one of them. See
// Registry.RegisterVersions.
type Versions struct {
	// Versions are the type in each of its versions. They share Group,
	// Resource, Kind, ListKind, Singular, Namespaced, ShortNames and
	// Categories, and each has its own Version, Schema, PrinterColumns,
	// SelectableFields, Subresources, Protobuf, Strategy, Admission,
	// Deprecated and Unserved. StoredAs and Virtual do not apply.
	Versions []Resource
	// Storage is the version new and updated objects are written in.
	// Objects written in an earlier storage version stay readable through
	// every version (they are converted on read) until a migration
	// rewrites them.
	Storage string
	// Conversion converts objects between the versions.
	Conversion Conversion
}

// Conversion says how objects are converted between the versions of a
// type: either None, or hub and spokes, every conversion passing through
// the hub.
type Conversion struct {
	// None converts by rewriting apiVersion only, as a CRD's "None"
	// strategy does: for versions whose objects have the same fields.
	None bool
	// Hub names the form every conversion passes through: "" (the storage
	// version), another of the versions, or an internal form that is never
	// served or stored (any other name; its objects carry
	// apiVersion "<group>/<Hub>" between the two steps).
	Hub string
	// Spokes convert each version other than the hub to and from it, by
	// version name. A version without a spoke is refused.
	Spokes map[string]Spoke
}

// Spoke converts one version's objects to and from the hub. Each function
// receives an object it may modify and return; it converts the fields,
// and the registry sets apiVersion and kind. metadata is the same in every
// version: of what a function returns, only metadata.labels and
// metadata.annotations are kept (a conversion that loses information may
// keep it in an annotation, so that a round trip loses nothing), and the
// rest of metadata is the input's. A function that fails or panics fails
// the read or write it serves with a 500 that names the type and versions.
type Spoke struct {
	ToHub   func(obj Object) (Object, error)
	FromHub func(obj Object) (Object, error)
}

// TypedSpoke is a Spoke from functions on the Go types of a version (S)
// and of the hub (H): each object goes through JSON into the typed value
// and back. Integral numbers written as floats ("1.0", "1e3"), which the
// schema accepts as integers, are decoded as integers, and the result keeps
// every number exact.
func TypedSpoke[S, H any](toHub func(src *S, dst *H) error, fromHub func(src *H, dst *S) error) Spoke {
	return Spoke{
		ToHub:   func(obj Object) (Object, error) { return convertTyped(obj, toHub) },
		FromHub: func(obj Object) (Object, error) { return convertTyped(obj, fromHub) },
	}
}

func convertTyped[A, B any](obj Object, fn func(*A, *B) error) (Object, error) {
	var a A
	var b B
	if err := viaJSON(integralNumbers(obj), &a); err != nil {
		return nil, fmt.Errorf("decoding into %T: %w", a, err)
	}
	if err := fn(&a, &b); err != nil {
		return nil, err
	}
	enc, err := json.Marshal(&b)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", b, err)
	}
	// Not encoding/json: it would make every number a float64.
	out, err := decodeObject(enc)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", b, err)
	}
	return out, nil
}

// integralNumbers rewrites, in place, the json.Numbers of v that are
// integral but not written as integers ("1.0", "1e3", within ±2^53, the
// values the schema accepts as integers) as integers, so that they decode
// into Go integer fields.
func integralNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integralNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integralNumbers(e)
		}
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err != nil {
			if i, ok := meta.AsInt64(x); ok {
				return json.Number(strconv.FormatInt(i, 10))
			}
		}
	}
	return v
}

// viaJSON sets out from in's JSON encoding.
func viaJSON(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// ConversionError is a conversion that failed (the function returned an
// error or panicked); the API answers it as a 500 Status naming the type,
// the versions and the object.
type ConversionError struct {
	Group, Kind string
	From, To    string // versions
	Object      string // "namespace/name" or "name"
	Err         error
}

func (e *ConversionError) Error() string {
	gv := func(v string) string { return meta.GroupVersion{Group: e.Group, Version: v}.String() }
	return fmt.Sprintf("converting %s %s %q to %s: %v", gv(e.From), e.Kind, e.Object, gv(e.To), e.Err)
}

func (e *ConversionError) Unwrap() error { return e.Err }

// versionSet is a registered Versions: its completed resources by version,
// and the conversions between them.
type versionSet struct {
	def      Versions
	group    string
	kind     string
	storage  string
	hub      string
	none     bool
	byName   map[string]*Resource
	spokes   map[string]Spoke
	prefixes map[string]string // version → `{"apiVersion":"<group/version>",` (a stored value's start)
	stores   map[string]*Store // by version, served or not

	// guard guards the writes of the set's stores (see writeGuard).
	guard *writeGuard
}

// newVersionSet checks def (each resource already completed) and builds
// its set.
func newVersionSet(def Versions) (*versionSet, error) {
	if len(def.Versions) == 0 {
		return nil, fmt.Errorf("registry: Versions has no versions")
	}
	first := &def.Versions[0]
	gr := first.GroupResource()
	vs := &versionSet{def: def, group: first.Group, kind: first.Kind, storage: def.Storage, guard: &writeGuard{},
		byName: map[string]*Resource{}, prefixes: map[string]string{}, none: def.Conversion.None}
	for i := range def.Versions {
		r := &def.Versions[i]
		if r.Group != first.Group || r.Resource != first.Resource {
			return nil, fmt.Errorf("registry: Versions mixes %s and %s", gr, r.GroupResource())
		}
		if r.Kind != first.Kind || r.ListKind != first.ListKind || r.Singular != first.Singular || r.Namespaced != first.Namespaced ||
			!slices.Equal(r.ShortNames, first.ShortNames) || !slices.Equal(r.Categories, first.Categories) {
			return nil, fmt.Errorf("registry: %s: versions %s and %s differ in kind, list kind, singular name, scope, short names or categories", gr, first.Version, r.Version)
		}
		if r.StoredAs != nil || r.Virtual != nil {
			return nil, fmt.Errorf("registry: %s %s: a version cannot be a view or virtual", gr, r.Version)
		}
		if vs.byName[r.Version] != nil {
			return nil, fmt.Errorf("registry: %s: version %s is listed twice", gr, r.Version)
		}
		vs.byName[r.Version] = r
		vs.prefixes[r.Version] = `{"apiVersion":"` + r.APIVersion() + `",`
	}
	if def.Storage == "" || vs.byName[def.Storage] == nil {
		return nil, fmt.Errorf("registry: %s: the storage version %q must be one of the versions", gr, def.Storage)
	}
	if err := vs.completeConversion(gr); err != nil {
		return nil, err
	}
	return vs, nil
}

// completeConversion checks that every version has a way to and from the
// hub.
func (vs *versionSet) completeConversion(gr meta.GroupResource) error {
	c := vs.def.Conversion
	if c.None {
		if c.Hub != "" || len(c.Spokes) > 0 {
			return fmt.Errorf("registry: %s: conversion None takes no hub or spokes", gr)
		}
		return nil
	}
	vs.hub = c.Hub
	if vs.hub == "" {
		vs.hub = vs.storage
	}
	if !dnsLabelRE.MatchString(vs.hub) {
		return fmt.Errorf("registry: %s: invalid hub version %q", gr, vs.hub)
	}
	vs.spokes = map[string]Spoke{}
	for v, sp := range c.Spokes {
		if vs.byName[v] == nil || v == vs.hub {
			return fmt.Errorf("registry: %s: a spoke for %q, which is not a version other than the hub %s", gr, v, vs.hub)
		}
		vs.spokes[v] = sp
	}
	for v := range vs.byName {
		if v == vs.hub {
			continue
		}
		if sp, ok := vs.spokes[v]; !ok || sp.ToHub == nil || sp.FromHub == nil {
			return fmt.Errorf("registry: %s: version %s has no conversion to and from the hub %s (Conversion.Spokes[%q] needs ToHub and FromHub)", gr, v, vs.hub, v)
		}
	}
	return nil
}

// served returns the versions served over the API.
func (vs *versionSet) served() []*Resource {
	var out []*Resource
	for i := range vs.def.Versions {
		if r := &vs.def.Versions[i]; !r.Unserved {
			out = append(out, r)
		}
	}
	return out
}

// apiVersion returns "<group>/<version>" (or the version in the core group).
func (vs *versionSet) apiVersion(v string) string {
	return meta.GroupVersion{Group: vs.group, Version: v}.String()
}

// convert converts obj, in version from, into version to (a registered
// version), and prunes the result with to's schema; obj may be modified.
// name names the object in errors.
func (vs *versionSet) convert(obj Object, from, to, name string) (Object, error) {
	if from == to {
		return obj, nil
	}
	if vs.byName[from] == nil {
		return nil, &ConversionError{Group: vs.group, Kind: vs.kind, From: from, To: to, Object: name,
			Err: fmt.Errorf("version %s is not registered", from)}
	}
	if vs.none {
		obj["apiVersion"] = vs.apiVersion(to)
		schema.Prune(obj, vs.byName[to].Schema)
		return obj, nil
	}
	var err error
	if from != vs.hub {
		if obj, err = vs.step(obj, vs.spokes[from].ToHub, vs.hub); err != nil {
			return nil, &ConversionError{Group: vs.group, Kind: vs.kind, From: from, To: to, Object: name, Err: err}
		}
	}
	if to != vs.hub {
		if obj, err = vs.step(obj, vs.spokes[to].FromHub, to); err != nil {
			return nil, &ConversionError{Group: vs.group, Kind: vs.kind, From: from, To: to, Object: name, Err: err}
		}
	}
	// What the target version does not describe goes, as kube-apiserver
	// prunes a conversion's result with the target's schema.
	schema.Prune(obj, vs.byName[to].Schema)
	return obj, nil
}

// step runs one conversion function with a recover, then sets the result's
// type fields and its metadata: the input's, with the result's labels and
// annotations when the result has metadata.
func (vs *versionSet) step(obj Object, fn func(Object) (Object, error), to string) (out Object, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("the conversion panicked: %v", p)
		}
	}()
	md, _ := obj["metadata"].(map[string]any)
	md = shallowCopy(md)
	if out, err = fn(obj); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("the conversion returned no object")
	}
	if omd, ok := out["metadata"].(map[string]any); ok {
		for _, k := range [...]string{"labels", "annotations"} {
			if v, ok := omd[k]; ok && v != nil {
				md[k] = v
			} else {
				delete(md, k)
			}
		}
	}
	out["metadata"] = md
	out["apiVersion"] = vs.apiVersion(to)
	out["kind"] = vs.kind
	meta.OmitEmpty(out) // the labels or annotations a conversion left empty
	return out, nil
}

// versionStorage returns the storage the Store of version v reads and
// writes through: values stored in another version are converted into v on
// their way out (values already in v are passed as they are), and values
// written are converted into the storage version.
func (vs *versionSet) versionStorage(st storage.Store, prefix []byte, v string) storage.Store {
	in := func(key, value []byte) ([]byte, error) { return value, nil }
	if v != vs.storage {
		in = func(key, value []byte) ([]byte, error) { return vs.convertStored(key, prefix, value, v, vs.storage) }
	}
	out := func(key, value []byte) ([]byte, error) {
		so, err := parseStored(value)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", key, err)
		}
		if bytes.HasPrefix(so.json, []byte(vs.prefixes[v])) {
			return value, nil
		}
		from, err := vs.storedVersion(so.json)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", key, err)
		}
		return vs.convertStored(key, prefix, value, from, v)
	}
	return newGuardedConvertingStorage(st, out, in, vs.guard)
}

// storedVersion returns the version a stored object was written in.
func (vs *versionSet) storedVersion(stored []byte) (string, error) {
	for v, p := range vs.prefixes {
		if bytes.HasPrefix(stored, []byte(p)) {
			return v, nil
		}
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(stored, &head); err != nil {
		return "", err
	}
	gv, ok := meta.ParseGroupVersion(head.APIVersion)
	if !ok || gv.Group != vs.group {
		return "", fmt.Errorf("the stored object's apiVersion %q is not of group %q", head.APIVersion, vs.group)
	}
	return gv.Version, nil
}

// convertStored converts a stored value from version from into version to.
func (vs *versionSet) convertStored(key, prefix, value []byte, from, to string) ([]byte, error) {
	so, err := parseStored(value)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", key, err)
	}
	obj, err := decodeObject(so.json)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", key, err)
	}
	if obj, err = vs.convert(obj, from, to, string(bytes.TrimPrefix(key, prefix))); err != nil {
		return nil, err
	}
	return encodeStored(obj)
}
