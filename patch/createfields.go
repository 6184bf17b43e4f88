package patch

import (
	"encoding/json"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// createManaged sets obj's metadata.managedFields (md is its metadata,
// without managedFields) for a create by Update without managedFields to
// keep: one Update entry of manager owning every field of obj, which is
// what structured-merge-diff computes by comparing an empty object with obj
// (the fields it adds) less the fields kube-apiserver never records and, for
// types with a status subresource, .status. It walks obj once with the
// schema instead of converting it to a typed value and comparing.
//
// It reports false, changing nothing, for an object it does not handle the
// way structured-merge-diff would: one the schema cannot read (a value of
// the wrong type, an undeclared field, a bad list entry, a number out of
// range), a Go value other than kapi's generic JSON ones, or a case whose
// result it does not reproduce exactly. The caller then takes the general
// path, which gives the reference result (the differential fuzz test
// FuzzCreateFields holds the two together).
func (m *FieldManager) createManaged(obj, md map[string]any, manager string, now time.Time) bool {
	if !utf8.ValidString(manager) {
		return false // the manager's name goes through JSON on the general path
	}
	fv, ok := m.createFieldsV1(obj)
	if !ok {
		return false
	}
	if fv == nil {
		return true // nothing to own: no managedFields
	}
	md["managedFields"] = []any{map[string]any{
		"manager":    manager,
		"operation":  OperationUpdate,
		"apiVersion": string(m.apiVersion),
		"fieldsType": "FieldsV1",
		"fieldsV1":   fv,
		"time":       now.UTC().Truncate(time.Second).Format(time.RFC3339),
	}}
	return true
}

// createFieldsV1 is the FieldsV1 object (see fieldsV1Object) of the fields a
// create of obj records, nil when there are none, or false when obj is not
// handled (see createManaged).
func (m *FieldManager) createFieldsV1(obj map[string]any) (map[string]any, bool) {
	sch := m.parser.Schema
	root, ok := sch.Resolve(m.parser.TypeRef)
	if !ok || root.Map == nil || root.Map.ElementRelationship == smdschema.Atomic || len(obj) == 0 {
		return nil, false
	}
	w := fieldsWalker{s: sch}
	// The root is compared with an empty object, so it is not a field
	// itself: its members are. recordUpdate strips apiVersion, kind and
	// metadata (members only: metadata's children stay), and the status
	// filter everything under .status; those are validated only.
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		tr, ok := fieldType(root.Map, k)
		if !ok {
			return nil, false
		}
		var node map[string]any
		switch {
		case k == "metadata":
			node, ok = w.walkMetadata(v, tr)
		case k == "apiVersion" || k == "kind" || (k == "status" && m.status):
			_, ok = w.walk(v, tr, false)
		default:
			node, ok = w.walk(v, tr, true)
		}
		if !ok {
			return nil, false
		}
		if node != nil {
			out["f:"+k] = node
		}
	}
	if len(out) == 0 {
		return nil, true
	}
	return out, true
}

// strippedMetaFields are the metadata fields recordUpdate strips (they are
// in m.stripSet). All are scalars or atomic in ObjectMeta, so stripping them
// leaves no children behind.
var strippedMetaFields = [...]string{"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields", "resourceVersion"}

func strippedMeta(k string) bool { return slices.Contains(strippedMetaFields[:], k) }

// walkMetadata is walk for the object's metadata of type tr, without the
// fields recordUpdate strips: the node of its other fields, nil when there
// are none.
func (w fieldsWalker) walkMetadata(v any, tr smdschema.TypeRef) (map[string]any, bool) {
	md, isMap := v.(map[string]any)
	a, ok := w.s.Resolve(tr)
	if !isMap || !ok || a.Map == nil || a.Map.ElementRelationship == smdschema.Atomic {
		// Not the ObjectMeta of SMDSchema: validate, and take the general
		// path unless it is a leaf (which is stripped).
		node, ok := w.walk(v, tr, true)
		return nil, ok && len(node) == 0
	}
	var node map[string]any
	for k, c := range md {
		ctr, ok := fieldType(a.Map, k)
		if !ok {
			return nil, false
		}
		if strippedMeta(k) {
			// Validated only; a compound value (never valid for these
			// fields) is checked to be a leaf.
			_, isMap := c.(map[string]any)
			_, isList := c.([]any)
			cn, ok := w.walk(c, ctr, isMap || isList)
			if !ok || len(cn) != 0 {
				return nil, false
			}
			continue
		}
		cn, ok := w.walk(c, ctr, true)
		if !ok {
			return nil, false
		}
		if node == nil {
			node = make(map[string]any, len(md))
		}
		node["f:"+k] = cn
	}
	return node, true
}

// fieldType is the type of field key of map type t, false when the schema
// does not declare it.
func fieldType(t *smdschema.Map, key string) (smdschema.TypeRef, bool) {
	if sf, ok := t.FindField(key); ok {
		return sf.Type, true
	}
	if (t.ElementType == smdschema.TypeRef{}) {
		return smdschema.TypeRef{}, false
	}
	return t.ElementType, true
}

// fieldsWalker walks a value with a structured-merge-diff schema as its
// validation (typed.AllowDuplicates) and its comparison with nothing do.
type fieldsWalker struct {
	s *smdschema.Schema
}

// Kinds of generic JSON values.
const (
	kindNull = iota
	kindString
	kindBool
	kindNumber
	kindMap
	kindList
)

// kindOf is the kind of v as structured-merge-diff reads it after toSMD,
// false for values toSMD rejects or converts through JSON.
func kindOf(v any) (int, bool) {
	switch t := v.(type) {
	case nil:
		return kindNull, true
	case string:
		return kindString, true
	case bool:
		return kindBool, true
	case map[string]any:
		return kindMap, true
	case []any:
		return kindList, true
	case int64:
		return kindNumber, true
	case float64:
		return kindNumber, !math.IsNaN(t) && !math.IsInf(t, 0)
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return kindNumber, true
		}
		f, err := t.Float64()
		return kindNumber, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false
}

// leafNode is the FieldsV1 node of a field without children.
func leafNode(emit bool) map[string]any {
	if !emit {
		return nil
	}
	return map[string]any{}
}

// walk validates v as a value of type tr and, when emit is set, returns its
// FieldsV1 node: {} for a leaf (a scalar, null, an empty or atomic map or
// list), else {".": {}} with the nodes of its children. False: not
// handled.
func (w fieldsWalker) walk(v any, tr smdschema.TypeRef, emit bool) (map[string]any, bool) {
	a, ok := w.s.Resolve(tr)
	if !ok {
		return nil, false
	}
	kind, ok := kindOf(v)
	if !ok {
		return nil, false
	}
	switch kind {
	case kindNull:
		if a.Map == nil && a.Scalar == nil && a.List == nil {
			return nil, false
		}
		return leafNode(emit), true
	case kindString, kindBool, kindNumber:
		if a.Scalar == nil {
			return nil, false
		}
		switch *a.Scalar {
		case smdschema.Numeric:
			ok = kind == kindNumber
		case smdschema.String:
			ok = kind == kindString
		case smdschema.Boolean:
			ok = kind == kindBool
		case smdschema.Untyped:
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
		return leafNode(emit), true
	case kindMap:
		if a.Map == nil {
			return nil, false
		}
		return w.walkMap(v.(map[string]any), a.Map, emit)
	default:
		if a.List == nil {
			return nil, false
		}
		return w.walkList(v.([]any), a.List, emit)
	}
}

func (w fieldsWalker) walkMap(mv map[string]any, t *smdschema.Map, emit bool) (map[string]any, bool) {
	leaf := t.ElementRelationship == smdschema.Atomic || len(mv) == 0
	var node map[string]any
	if emit && !leaf {
		node = make(map[string]any, len(mv)+1)
		node["."] = map[string]any{}
	}
	for k, c := range mv {
		tr, ok := fieldType(t, k)
		if !ok {
			return nil, false
		}
		cn, ok := w.walk(c, tr, node != nil)
		if !ok {
			return nil, false
		}
		if node != nil {
			node["f:"+k] = cn
		}
	}
	if leaf {
		return leafNode(emit), true
	}
	return node, true
}

func (w fieldsWalker) walkList(l []any, t *smdschema.List, emit bool) (map[string]any, bool) {
	switch t.ElementRelationship {
	case smdschema.Associative:
	case smdschema.Atomic:
		for _, c := range l {
			if _, ok := w.walk(c, t.ElementType, false); !ok {
				return nil, false
			}
		}
		return leafNode(emit), true
	default:
		return nil, false // the comparison fails on such lists
	}
	if len(l) == 0 {
		return leafNode(emit), true
	}
	// The entries by path element, in order of first appearance; an element
	// that appears more than once is owned as a whole.
	type group struct {
		pe    fieldpath.PathElement
		first int
		n     int
	}
	groups := make([]group, 0, len(l))
	of := make([]int, len(l)) // the group of each entry
	index := fieldpath.MakePathElementMap(len(l))
	for i, c := range l {
		pe, ok := w.listElement(t, c)
		if !ok {
			return nil, false
		}
		if g, found := index.Get(pe); found {
			of[i] = g.(int)
			groups[of[i]].n++
		} else {
			of[i] = len(groups)
			index.Insert(pe, len(groups))
			groups = append(groups, group{pe: pe, first: i, n: 1})
		}
	}
	var node map[string]any
	if emit {
		node = make(map[string]any, len(groups)+1)
		node["."] = map[string]any{}
	}
	if !emit {
		for _, c := range l {
			if _, ok := w.walk(c, t.ElementType, false); !ok {
				return nil, false
			}
		}
		return nil, true
	}
	for _, g := range groups {
		key, err := fieldpath.SerializePathElement(g.pe)
		if err != nil {
			return nil, false
		}
		if _, dup := node[key]; dup {
			return nil, false // distinct elements with one serialization
		}
		if g.n > 1 {
			node[key] = map[string]any{}
			continue
		}
		cn, ok := w.walk(l[g.first], t.ElementType, true)
		if !ok {
			return nil, false
		}
		node[key] = cn
	}
	if len(groups) != len(l) {
		// The entries of a duplicated element are validated only.
		for i, c := range l {
			if groups[of[i]].n == 1 {
				continue
			}
			if _, ok := w.walk(c, t.ElementType, false); !ok {
				return nil, false
			}
		}
	}
	return node, true
}

// listElement is the path element of entry c of associative list t, as
// structured-merge-diff's listItemToPathElement makes it.
func (w fieldsWalker) listElement(t *smdschema.List, c any) (fieldpath.PathElement, bool) {
	if len(t.Keys) == 0 {
		switch kind, ok := kindOf(c); {
		case !ok || kind == kindNull || kind == kindMap || kind == kindList:
			return fieldpath.PathElement{}, false
		}
		sv, err := toSMD(c)
		if err != nil {
			return fieldpath.PathElement{}, false
		}
		v := value.NewValueInterface(sv)
		return fieldpath.PathElement{Value: &v}, true
	}
	cm, ok := c.(map[string]any)
	if !ok {
		return fieldpath.PathElement{}, false
	}
	keys := make(value.FieldList, 0, len(t.Keys))
	for _, name := range t.Keys {
		kv, ok := cm[name]
		if !ok {
			// A missing key with a default is not reproduced.
			ea, ok := w.s.Resolve(t.ElementType)
			if !ok || ea.Map == nil {
				return fieldpath.PathElement{}, false
			}
			if f, _ := ea.Map.FindField(name); f.Default != nil {
				return fieldpath.PathElement{}, false
			}
			continue
		}
		if _, ok := kindOf(kv); !ok {
			return fieldpath.PathElement{}, false
		}
		sv, err := toSMD(kv)
		if err != nil {
			return fieldpath.PathElement{}, false
		}
		keys = append(keys, value.Field{Name: name, Value: value.NewValueInterface(sv)})
	}
	if len(keys) == 0 {
		return fieldpath.PathElement{}, false
	}
	keys.Sort()
	return fieldpath.PathElement{Key: &keys}, true
}
