package patch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kapi-dev/kapi/codec"
)

// createManaged sets obj's metadata.managedFields (md is its metadata,
// without managedFields) for a create by Update without managedFields to
// keep: one Update entry of manager owning every field of obj (its
// fieldsV1 a json.RawMessage, as Kubernetes' FieldsV1 holds raw JSON), which is
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
		"time":       m.stamps.Value(now),
	}}
	return true
}

// createFieldsV1 is the FieldsV1 (see fieldsV1Object) of the fields a create
// of obj records, as JSON: the object structured-merge-diff's map form
// encodes to (keys sorted, strings escaped as encoding/json does), nil when
// there are none; false when obj is not handled (see createManaged).
func (m *FieldManager) createFieldsV1(obj map[string]any) (json.RawMessage, bool) {
	sch := m.parser.Schema
	root, ok := sch.Resolve(m.parser.TypeRef)
	if !ok || root.Map == nil || root.Map.ElementRelationship == smdschema.Atomic || len(obj) == 0 {
		return nil, false
	}
	w := fieldsWalker{s: sch, buf: make([]byte, 0, 256), keys: make([]string, 0, 32)}
	// The root is compared with an empty object, so it is not a field
	// itself: its members are. recordUpdate strips apiVersion, kind and
	// metadata (members only: metadata's children stay), and the status
	// filter everything under .status; those are validated only.
	// Each member is emitted after a comma; the first comma becomes the
	// object's opening brace.
	keys := w.pushKeys(obj)
	for _, k := range keys {
		tr, ok := fieldType(root.Map, k)
		if !ok {
			return nil, false
		}
		switch {
		case k == "metadata":
			ok = w.walkMetadata(obj[k], tr)
		case k == "apiVersion" || k == "kind" || (k == "status" && m.status):
			ok = w.walk(obj[k], tr, false)
		default:
			w.field(k)
			ok = w.walk(obj[k], tr, true)
		}
		if !ok {
			return nil, false
		}
	}
	w.popKeys(keys)
	if len(w.buf) == 0 {
		return nil, true
	}
	w.buf[0] = '{'
	return append(w.buf, '}'), true
}

// strippedMetaFields are the metadata fields recordUpdate strips (they are
// in m.stripSet). All are scalars or atomic in ObjectMeta, so stripping them
// leaves no children behind.
var strippedMetaFields = [...]string{"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields", "resourceVersion"}

func strippedMeta(k string) bool { return slices.Contains(strippedMetaFields[:], k) }

// walkMetadata is walk for the object's metadata of type tr, without the
// fields recordUpdate strips: it emits the member "f:metadata" with the
// node of its other fields, nothing when there are none.
func (w *fieldsWalker) walkMetadata(v any, tr smdschema.TypeRef) bool {
	md, isMap := v.(map[string]any)
	a, ok := w.s.Resolve(tr)
	if !isMap || !ok || a.Map == nil || a.Map.ElementRelationship == smdschema.Atomic {
		// Not the ObjectMeta of SMDSchema: validate, and take the general
		// path unless it is a leaf (which is stripped).
		mark := len(w.buf)
		ok := w.walk(v, tr, true)
		leaf := string(w.buf[mark:]) == "{}"
		w.buf = w.buf[:mark]
		return ok && leaf
	}
	mark := len(w.buf)
	w.field("metadata")
	body := len(w.buf)
	keys := w.pushKeys(md)
	defer w.popKeys(keys)
	for _, k := range keys {
		c := md[k]
		ctr, ok := fieldType(a.Map, k)
		if !ok {
			return false
		}
		if strippedMeta(k) {
			// Validated only; a compound value (never valid for these
			// fields) is checked to be a leaf.
			_, isMap := c.(map[string]any)
			_, isList := c.([]any)
			at := len(w.buf)
			if !w.walk(c, ctr, isMap || isList) || (len(w.buf) > at && string(w.buf[at:]) != "{}") {
				return false
			}
			w.buf = w.buf[:at]
			continue
		}
		w.buf = append(w.buf, ',')
		w.member("f:", k)
		if !w.walk(c, ctr, true) {
			return false
		}
	}
	if len(w.buf) == body {
		w.buf = w.buf[:mark] // no fields: no member
		return true
	}
	w.buf[body] = '{' // the first member's comma, as in createFieldsV1
	w.buf = append(w.buf, '}')
	return true
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
// validation (typed.AllowDuplicates) and its comparison with nothing do,
// emitting the FieldsV1 JSON of what it walks with emit set into buf.
type fieldsWalker struct {
	s    *smdschema.Schema
	buf  []byte
	keys []string // a stack of the keys being walked (pushKeys, popKeys)
}

// field appends ,"f:name": to buf (the comma of a member after another).
func (w *fieldsWalker) field(name string) {
	w.buf = append(w.buf, ',')
	w.member("f:", name)
}

// member appends the key prefix+name and its colon, escaped as
// encoding/json escapes strings (prefix is plain ASCII: "f:" or "").
func (w *fieldsWalker) member(prefix, name string) {
	w.buf = append(append(w.buf, '"'), prefix...)
	at := len(w.buf)
	w.buf = codec.AppendJSONString(w.buf, name)
	// The name's own opening quote goes: the prefix stands before it.
	copy(w.buf[at:], w.buf[at+1:])
	w.buf = append(w.buf[:len(w.buf)-1], ':')
}

// pushKeys pushes m's keys, sorted, onto w.keys and returns them. The
// caller pops them (popKeys) once done: walks below it push theirs after.
func (w *fieldsWalker) pushKeys(m map[string]any) []string {
	start := len(w.keys)
	for k := range m {
		w.keys = append(w.keys, k)
	}
	keys := w.keys[start:]
	slices.Sort(keys)
	return keys
}

func (w *fieldsWalker) popKeys(keys []string) { w.keys = w.keys[:len(w.keys)-len(keys)] }

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

// leaf emits the node of a field without children, {}, when emit is set.
func (w *fieldsWalker) leaf(emit bool) {
	if emit {
		w.buf = append(w.buf, '{', '}')
	}
}

// walk validates v as a value of type tr and, when emit is set, emits its
// FieldsV1 node: {} for a leaf (a scalar, null, an empty or atomic map or
// list), else {".":{}} with the nodes of its children. False: not
// handled (what was emitted is then of no use).
func (w *fieldsWalker) walk(v any, tr smdschema.TypeRef, emit bool) bool {
	a, ok := w.s.Resolve(tr)
	if !ok {
		return false
	}
	kind, ok := kindOf(v)
	if !ok {
		return false
	}
	switch kind {
	case kindNull:
		if a.Map == nil && a.Scalar == nil && a.List == nil {
			return false
		}
		w.leaf(emit)
		return true
	case kindString, kindBool, kindNumber:
		if a.Scalar == nil {
			return false
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
			return false
		}
		w.leaf(emit)
		return true
	case kindMap:
		if a.Map == nil {
			return false
		}
		return w.walkMap(v.(map[string]any), a.Map, emit)
	default:
		if a.List == nil {
			return false
		}
		return w.walkList(v.([]any), a.List, emit)
	}
}

func (w *fieldsWalker) walkMap(mv map[string]any, t *smdschema.Map, emit bool) bool {
	if !emit || t.ElementRelationship == smdschema.Atomic || len(mv) == 0 {
		for k, c := range mv {
			tr, ok := fieldType(t, k)
			if !ok || !w.walk(c, tr, false) {
				return false
			}
		}
		w.leaf(emit)
		return true
	}
	w.buf = append(w.buf, `{".":{}`...)
	keys := w.pushKeys(mv)
	for _, k := range keys {
		tr, ok := fieldType(t, k)
		if !ok {
			return false
		}
		w.field(k)
		if !w.walk(mv[k], tr, true) {
			return false
		}
	}
	w.popKeys(keys)
	w.buf = append(w.buf, '}')
	return true
}

func (w *fieldsWalker) walkList(l []any, t *smdschema.List, emit bool) bool {
	switch t.ElementRelationship {
	case smdschema.Associative:
	case smdschema.Atomic:
		for _, c := range l {
			if !w.walk(c, t.ElementType, false) {
				return false
			}
		}
		w.leaf(emit)
		return true
	default:
		return false // the comparison fails on such lists
	}
	if len(l) == 0 {
		w.leaf(emit)
		return true
	}
	groups, of, ok := w.groupListEntries(l, t)
	if !ok {
		return false
	}
	if !emit {
		for _, c := range l {
			if !w.walk(c, t.ElementType, false) {
				return false
			}
		}
		return true
	}
	if len(groups) != len(l) {
		// The entries of a duplicated element are validated only.
		for i, c := range l {
			if groups[of[i]].n > 1 && !w.walk(c, t.ElementType, false) {
				return false
			}
		}
	}
	for i := range groups {
		key, err := fieldpath.SerializePathElement(groups[i].pe)
		if err != nil {
			return false
		}
		groups[i].key = key
	}
	slices.SortFunc(groups, func(a, b listGroup) int { return strings.Compare(a.key, b.key) })
	w.buf = append(w.buf, `{".":{}`...)
	for i, g := range groups {
		if i > 0 && g.key == groups[i-1].key {
			return false // distinct elements with one serialization
		}
		w.buf = append(w.buf, ',')
		w.member("", g.key)
		if g.n > 1 {
			w.buf = append(w.buf, '{', '}')
			continue
		}
		if !w.walk(l[g.first], t.ElementType, true) {
			return false
		}
	}
	w.buf = append(w.buf, '}')
	return true
}

// listGroup is an element of an associative list: its path element, and
// its entries (the index of the first, how many).
type listGroup struct {
	pe    fieldpath.PathElement
	key   string // pe serialized
	first int
	n     int
}

// groupListEntries returns the elements of associative list l, one group per
// path element, and the group of each entry (an element that appears more
// than once is owned as a whole); false when an entry has no path element.
func (w *fieldsWalker) groupListEntries(l []any, t *smdschema.List) (groups []listGroup, of []int, ok bool) {
	// Entries are grouped by sorting them (fieldpath's maps insert one by
	// one, which is quadratic for entries out of order).
	type entry struct {
		pe fieldpath.PathElement
		i  int
	}
	entries := make([]entry, len(l))
	for i, c := range l {
		pe, ok := w.listElement(t, c)
		if !ok {
			return nil, nil, false
		}
		entries[i] = entry{pe, i}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := a.pe.Compare(b.pe); c != 0 {
			return c
		}
		return a.i - b.i
	})
	groups = make([]listGroup, 0, len(l))
	of = make([]int, len(l)) // the group of each entry
	for j, e := range entries {
		if j > 0 && e.pe.Compare(entries[j-1].pe) == 0 {
			of[e.i] = len(groups) - 1
			groups[len(groups)-1].n++
			continue
		}
		of[e.i] = len(groups)
		groups = append(groups, listGroup{pe: e.pe, first: e.i, n: 1})
	}
	return groups, of, true
}

// listElement is the path element of entry c of associative list t, as
// structured-merge-diff's listItemToPathElement makes it.
func (w *fieldsWalker) listElement(t *smdschema.List, c any) (fieldpath.PathElement, bool) {
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
