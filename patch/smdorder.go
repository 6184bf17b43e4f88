package patch

import (
	"slices"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// sortAssociative sorts, in place, the entries of every associative list
// (listType set or map) in v, a value of type tr as toSMD returns it, by
// their path elements, keeping the order of entries with the same element.
//
// structured-merge-diff indexes such lists in sorted slices that it fills
// one entry at a time, which costs a move of the slice's tail per entry
// out of order: quadratic in the length of a list in reverse order. Its
// comparison of two objects does not depend on the order of these lists,
// so the comparison of an update runs on sorted copies, whose entries all
// go to the end. A list with an entry that has no path element is left as
// it is (its validation fails at that entry).
func (w *fieldsWalker) sortAssociative(v any, tr smdschema.TypeRef) {
	a, ok := w.s.Resolve(tr)
	if !ok {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if a.Map == nil || a.Map.ElementRelationship == smdschema.Atomic {
			return
		}
		for k, c := range t {
			if ctr, ok := fieldType(a.Map, k); ok {
				w.sortAssociative(c, ctr)
			}
		}
	case []any:
		if a.List == nil || a.List.ElementRelationship != smdschema.Associative {
			return
		}
		type entry struct {
			pe fieldpath.PathElement
			v  any
		}
		entries := make([]entry, len(t))
		sorted := true
		for i, c := range t {
			pe, ok := w.listElement(a.List, c)
			if !ok {
				return
			}
			entries[i] = entry{pe, c}
			if sorted && i > 0 && entries[i-1].pe.Compare(pe) > 0 {
				sorted = false
			}
			w.sortAssociative(c, a.List.ElementType)
		}
		if sorted {
			return
		}
		slices.SortStableFunc(entries, func(x, y entry) int { return x.pe.Compare(y.pe) })
		for i, e := range entries {
			t[i] = e.v
		}
	}
}

// orderedValue is a structured-merge-diff value over a generic JSON value
// whose maps iterate in key order. structured-merge-diff adds each field it
// walks to a sorted field set, one at a time: in Go's map order that moves
// the set's tail for most fields, quadratic in the number of keys of a map;
// in key order every field goes to the end.
type orderedValue struct{ value.Value }

func newOrderedValue(v any) value.Value { return orderedValue{value.NewValueInterface(v)} }

func ordered(v value.Value) value.Value {
	if v == nil {
		return nil
	}
	if _, ok := v.(orderedValue); ok {
		return v
	}
	return orderedValue{v}
}

func (v orderedValue) AsMap() value.Map                       { return orderedMap{v.Value.AsMap()} }
func (v orderedValue) AsMapUsing(value.Allocator) value.Map   { return v.AsMap() }
func (v orderedValue) AsList() value.List                     { return orderedList{v.Value.AsList()} }
func (v orderedValue) AsListUsing(value.Allocator) value.List { return v.AsList() }

// orderedMap is a map whose iterations go in key order and whose values
// are orderedValues.
type orderedMap struct{ value.Map }

// keys returns m's keys, sorted.
func keysOf(m value.Map) []string {
	keys := make([]string, 0, m.Length())
	m.Iterate(func(k string, _ value.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.Sort(keys)
	return keys
}

func (m orderedMap) Get(key string) (value.Value, bool) {
	v, ok := m.Map.Get(key)
	return ordered(v), ok
}

func (m orderedMap) GetUsing(_ value.Allocator, key string) (value.Value, bool) { return m.Get(key) }

func (m orderedMap) Iterate(fn func(string, value.Value) bool) bool {
	for _, k := range keysOf(m.Map) {
		v, _ := m.Get(k)
		if !fn(k, v) {
			return false
		}
	}
	return true
}

func (m orderedMap) IterateUsing(_ value.Allocator, fn func(string, value.Value) bool) bool {
	return m.Iterate(fn)
}

// Zip visits the keys of both maps in key order, whatever order is asked,
// and hands on other's values as orderedValues too: the merged object of an
// apply is a plain value, and a map of it the object does not have yet is
// walked from other's side alone.
func (m orderedMap) Zip(other value.Map, _ value.MapTraverseOrder, fn func(key string, lhs, rhs value.Value) bool) bool {
	lk := keysOf(m.Map)
	var rk []string
	if other != nil {
		rk = keysOf(other)
	}
	for i, j := 0, 0; i < len(lk) || j < len(rk); {
		var key string
		var lv, rv value.Value
		switch {
		case j == len(rk) || (i < len(lk) && lk[i] < rk[j]):
			key = lk[i]
			lv, _ = m.Get(key)
			i++
		case i == len(lk) || rk[j] < lk[i]:
			key = rk[j]
			rv, _ = other.Get(key)
			rv = ordered(rv)
			j++
		default:
			key = lk[i]
			lv, _ = m.Get(key)
			rv, _ = other.Get(key)
			rv = ordered(rv)
			i++
			j++
		}
		if !fn(key, lv, rv) {
			return false
		}
	}
	return true
}

func (m orderedMap) ZipUsing(_ value.Allocator, other value.Map, order value.MapTraverseOrder, fn func(key string, lhs, rhs value.Value) bool) bool {
	return m.Zip(other, order, fn)
}

// orderedList is a list whose items are orderedValues.
type orderedList struct{ value.List }

func (l orderedList) At(i int) value.Value                         { return ordered(l.List.At(i)) }
func (l orderedList) AtUsing(_ value.Allocator, i int) value.Value { return l.At(i) }
func (l orderedList) Range() value.ListRange                       { return &orderedRange{l: l.List, i: -1} }
func (l orderedList) RangeUsing(value.Allocator) value.ListRange   { return l.Range() }

type orderedRange struct {
	l value.List
	i int
}

func (r *orderedRange) Next() bool {
	r.i++
	return r.i < r.l.Length()
}

func (r *orderedRange) Item() (int, value.Value) { return r.i, ordered(r.l.At(r.i)) }

// MaxApplyDisorder bounds how far out of order the associative lists of an
// apply's configuration and of the object it applies to may be: the number
// of pairs of entries of one list in the reverse of their sorted order.
// structured-merge-diff's merge, which keeps the lists' order, moves a
// slice's tail once per such pair; beyond the bound an apply is refused
// (413) before any of that work.
const MaxApplyDisorder = 1 << 25

// disorder is the number of pairs of entries out of order in the
// associative lists of v, of type tr, counting stopped once above limit.
func (w *fieldsWalker) disorder(v any, tr smdschema.TypeRef, limit int) int {
	a, ok := w.s.Resolve(tr)
	if !ok {
		return 0
	}
	n := 0
	switch t := v.(type) {
	case map[string]any:
		if a.Map == nil || a.Map.ElementRelationship == smdschema.Atomic {
			return 0
		}
		for k, c := range t {
			if ctr, ok := fieldType(a.Map, k); ok && n <= limit {
				n += w.disorder(c, ctr, limit-n)
			}
		}
	case []any:
		if a.List == nil || a.List.ElementRelationship != smdschema.Associative {
			return 0
		}
		pes := make([]fieldpath.PathElement, 0, len(t))
		for _, c := range t {
			if pe, ok := w.listElement(a.List, c); ok {
				pes = append(pes, pe)
			}
			if n <= limit {
				n += w.disorder(c, a.List.ElementType, limit-n)
			}
		}
		n += inversions(pes, make([]fieldpath.PathElement, len(pes)))
	}
	return n
}

// inversions sorts pes (a merge sort, tmp its scratch space of the same
// length) and returns the number of pairs that were in reverse order.
func inversions(pes, tmp []fieldpath.PathElement) int {
	if len(pes) < 2 {
		return 0
	}
	mid := len(pes) / 2
	n := inversions(pes[:mid], tmp[:mid]) + inversions(pes[mid:], tmp[mid:])
	i, j, k := 0, mid, 0
	for i < mid && j < len(pes) {
		if pes[j].Compare(pes[i]) < 0 {
			n += mid - i
			tmp[k] = pes[j]
			j++
		} else {
			tmp[k] = pes[i]
			i++
		}
		k++
	}
	k += copy(tmp[k:], pes[i:mid])
	copy(tmp[k:], pes[j:])
	copy(pes, tmp)
	return n
}
