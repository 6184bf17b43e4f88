package patch

import (
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// VersionConverter converts the objects of one type between its versions.
type VersionConverter interface {
	// ConvertVersion converts obj, a generic object of apiVersion from,
	// into apiVersion to (both "<group>/<version>"). It may modify obj.
	ConvertVersion(obj map[string]any, from, to string) (map[string]any, error)
}

// TypeVersion is one version of a type served in several versions.
type TypeVersion struct {
	GVK    meta.GroupVersionKind
	Schema *schema.Schema
	// StatusSubresource says this version has a /status subresource.
	StatusSubresource bool
}

// NewFieldManagers returns the field managers of a type served in several
// versions, one per version in the order given. Each records the entries
// of its writes in its own apiVersion, and computes what the managers whose
// entries were recorded in another version own, lose and conflict on by
// converting the objects into that version with conv, as kube-apiserver
// does: a field renamed between versions is one field. An entry in an
// apiVersion that is not among versions is dropped by the next write.
func NewFieldManagers(versions []TypeVersion, conv VersionConverter) []*FieldManager {
	t := &versionTable{conv: conv, byVersion: map[fieldpath.APIVersion]*typeVersion{}}
	mainF := fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
	statusF := fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))
	t.mainFilters = map[fieldpath.APIVersion]fieldpath.Filter{}
	t.statusFilters = map[fieldpath.APIVersion]fieldpath.Filter{}
	out := make([]*FieldManager, len(versions))
	for i, v := range versions {
		av := fieldpath.APIVersion(v.GVK.GroupVersion().String())
		t.byVersion[av] = &typeVersion{src: v.Schema}
		if v.StatusSubresource {
			t.mainFilters[av], t.statusFilters[av] = mainF, statusF
		}
		out[i] = NewFieldManager(v.Schema, v.GVK, v.StatusSubresource)
		out[i].versions = t
	}
	return out
}

// versionTable is the versions of one type, shared by their field managers:
// each version's structured-merge-diff type, converted from its schema on
// first use, and the conversion between them.
type versionTable struct {
	conv      VersionConverter
	byVersion map[fieldpath.APIVersion]*typeVersion
	// The reset-field filters of writes to the object and to /status, by
	// apiVersion (versions with a status subresource).
	mainFilters, statusFilters map[fieldpath.APIVersion]fieldpath.Filter
}

type typeVersion struct {
	src    *schema.Schema
	once   sync.Once
	parser typed.ParseableType
}

// parser returns the structured-merge-diff type of version av.
func (t *versionTable) parser(av fieldpath.APIVersion) (typed.ParseableType, bool) {
	tv, ok := t.byVersion[av]
	if !ok {
		return typed.ParseableType{}, false
	}
	tv.once.Do(func() { tv.parser = typed.ParseableType{Schema: SMDSchema(tv.src), TypeRef: named(rootTypeName)} })
	return tv.parser, true
}

// updater returns an updater for one write by the field manager of version
// home: its converter remembers the conversions of the write, which
// structured-merge-diff asks for more than once (once per manager).
func (t *versionTable) updater(home fieldpath.APIVersion, subresource string) *merge.Updater {
	b := merge.UpdaterBuilder{Converter: &convertingWrite{t: t, home: home}}
	switch subresource {
	case "":
		b.IgnoreFilter = t.mainFilters
	case "status":
		b.IgnoreFilter = t.statusFilters
	}
	return b.BuildUpdater()
}

// missingVersionError is a conversion into an apiVersion the type does not
// have: structured-merge-diff then drops the entries recorded in it.
type missingVersionError struct{ version fieldpath.APIVersion }

func (e *missingVersionError) Error() string {
	return fmt.Sprintf("the type has no version %q", string(e.version))
}

type convertKey struct {
	v  *typed.TypedValue
	to fieldpath.APIVersion
}

// convertingWrite is the merge.Converter of one write: it converts typed
// values between the versions of a type through the type's conversion.
type convertingWrite struct {
	t    *versionTable
	home fieldpath.APIVersion             // the version of values without an apiVersion
	memo map[convertKey]*typed.TypedValue // made on the first conversion
}

func (c *convertingWrite) IsMissingVersionError(err error) bool {
	var mv *missingVersionError
	return errors.As(err, &mv)
}

// Convert converts v into version to. A value's version is its apiVersion
// (home when it has none); an object with no fields besides apiVersion and
// kind is the empty object of every version.
func (c *convertingWrite) Convert(v *typed.TypedValue, to fieldpath.APIVersion) (*typed.TypedValue, error) {
	p, ok := c.t.parser(to)
	if !ok {
		return nil, &missingVersionError{version: to}
	}
	key := convertKey{v, to}
	if out, ok := c.memo[key]; ok {
		return out, nil
	}
	val := v.AsValue()
	if !val.IsMap() {
		return nil, errors.New("converting: the value is not an object")
	}
	from := c.home
	if av, ok := val.AsMap().Get("apiVersion"); ok && av.IsString() && av.AsString() != "" {
		from = fieldpath.APIVersion(av.AsString())
	}
	if from == to {
		return v, nil
	}
	obj, ok := val.Unstructured().(map[string]any)
	if !ok {
		return nil, errors.New("converting: the value is not an object")
	}
	var conv map[string]any
	if isEmptyObject(obj) {
		conv = map[string]any{"apiVersion": string(to)}
	} else {
		cp, err := toSMD(obj)
		if err != nil {
			return nil, err
		}
		in := fromSMD(cp).(map[string]any)
		in["apiVersion"] = string(from)
		if conv, err = c.t.conv.ConvertVersion(in, string(from), string(to)); err != nil {
			return nil, err
		}
	}
	sv, err := toSMD(conv)
	if err != nil {
		return nil, fmt.Errorf("converting to %s: %w", string(to), err)
	}
	out, err := typed.AsTyped(newOrderedValue(sv), p.Schema, p.TypeRef, typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("the object converted to %s does not match that version's schema: %w", string(to), err)
	}
	if c.memo == nil {
		c.memo = map[convertKey]*typed.TypedValue{}
	}
	c.memo[key] = out
	return out, nil
}

// isEmptyObject reports an object with no fields but apiVersion and kind.
func isEmptyObject(obj map[string]any) bool {
	for k := range obj {
		if k != "apiVersion" && k != "kind" {
			return false
		}
	}
	return true
}
