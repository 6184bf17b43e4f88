package patch

import (
	"slices"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// mergeList merges the patch list p into the current list cur.
func (m *smp) mergeList(cur, p []any, n node, path *meta.Path) ([]any, error) {
	merge, keys := listStrategy(n.s)
	if !merge {
		v, _ := removeDirectives(meta.DeepCopy(p))
		return v.([]any), nil
	}
	for _, l := range [][]any{cur, p} {
		for _, e := range l {
			if _, ok := e.([]any); ok {
				return nil, invalid("%s: lists of lists are not supported by strategic merge patch", path)
			}
		}
	}
	result, plain, replace, err := applyListDirectives(cur, p, keys, path)
	if err != nil {
		return nil, err
	}
	if replace {
		v, _ := removeDirectives(meta.DeepCopy(plain))
		if v == nil {
			return []any{}, nil
		}
		return v.([]any), nil
	}
	id := func(e any) (string, error) { return elementID(e, keys, path) }
	index := make(map[string]int, len(result))
	for i, e := range result {
		k, err := id(e)
		if err != nil {
			return nil, err
		}
		if _, dup := index[k]; !dup {
			index[k] = i
		}
	}
	inPatch := make(map[string]bool, len(plain))
	var patchOrder []string
	items := m.items(n)
	for _, e := range plain {
		k, err := id(e)
		if err != nil {
			return nil, err
		}
		if !inPatch[k] {
			inPatch[k] = true
			patchOrder = append(patchOrder, k)
		} else if len(keys) == 0 {
			continue // a set lists each value once
		}
		i, found := index[k]
		if !found {
			v, keep := removeDirectives(meta.DeepCopy(e))
			if !keep {
				continue
			}
			index[k] = len(result)
			result = append(result, v)
			continue
		}
		if result[i], err = m.mergeElement(result[i], e, items, path, k); err != nil {
			return nil, err
		}
	}
	// Order: the patch's elements in patch order, the others in their
	// current order, interleaved as the current list had them.
	var others, patched []any
	for _, e := range result {
		k, _ := id(e)
		if !inPatch[k] {
			others = append(others, e)
		}
	}
	for _, k := range patchOrder {
		if i, ok := index[k]; ok {
			patched = append(patched, result[i])
		}
	}
	return interleave(others, patched, cur, id)
}

// applyListDirectives takes the special elements out of the patch list p and
// applies them to a copy of cur: it returns the remaining list, p's other
// (plain) elements, and whether p replaces the list.
func applyListDirectives(cur, p []any, keys []string, path *meta.Path) (result, plain []any, replace bool, err error) {
	// Special elements: {"$patch": "replace"} and {"$patch": "delete", key...}.
	// Deletions are collected and done in one pass over the list (one pass
	// per deletion is quadratic).
	result = slices.Clone(cur)
	var ids []string // result's element ids, from the first keyed deletion on
	delIDs := map[string]bool{}
	delValues := map[string]bool{}
	for _, e := range p {
		em, ok := e.(map[string]any)
		if !ok {
			plain = append(plain, e)
			continue
		}
		d, has := em[directiveMarker]
		if !has {
			plain = append(plain, e)
			continue
		}
		switch d {
		case directiveReplace:
			replace = true
		case directiveDelete:
			if len(keys) == 0 {
				// A set of objects: delete the elements equal to the rest.
				rest := meta.DeepCopyMap(em)
				delete(rest, directiveMarker)
				delValues[meta.CanonicalKey(rest)] = true
				continue
			}
			want, err := elementID(em, keys, path)
			if err != nil {
				return nil, nil, false, err
			}
			if ids == nil {
				ids = make([]string, len(result))
				var kerr error
				for i, x := range result {
					if ids[i], err = elementID(x, keys, path); err != nil {
						kerr = err
					}
				}
				if kerr != nil {
					return nil, nil, false, kerr
				}
			}
			delIDs[want] = true
		case directiveMerge:
			return nil, nil, false, badRequest("%s: %s: merge is not supported in a list", path, directiveMarker)
		default:
			return nil, nil, false, badRequest("%s: unknown patch type %s in %s", path, formatJSON(d), directiveMarker)
		}
	}
	if len(delIDs) > 0 {
		kept := result[:0]
		for i, x := range result {
			if !delIDs[ids[i]] {
				kept = append(kept, x)
			}
		}
		clear(result[len(kept):])
		result = kept
	}
	if len(delValues) > 0 {
		result = slices.DeleteFunc(result, func(x any) bool { return delValues[meta.CanonicalKey(x)] })
	}
	return result, plain, replace, nil
}

// mergeElement merges the patch element e, of id k, into the current element
// c of a merged list.
func (m *smp) mergeElement(c, e any, items node, path *meta.Path, k string) (any, error) {
	em, isMap := e.(map[string]any)
	cm, curIsMap := c.(map[string]any)
	switch {
	case isMap && curIsMap:
		// In place, as in mergeValue: a copy per patch element with the
		// same key is quadratic in them.
		return m.mergeMap(cm, em, items, path.Key(k))
	case isMap:
		v, _ := removeDirectives(meta.DeepCopyMap(em))
		return v, nil
	}
	return e, nil
}

// interleave merges two ordered lists: server-only elements (left, in their
// current order) go before a patch element (right, in patch order) when the
// current list had them before it, as Kubernetes' strategic merge does.
func interleave(left, right []any, cur []any, id func(any) (string, error)) ([]any, error) {
	pos := make(map[string]int, len(cur))
	for i, e := range cur {
		k, err := id(e)
		if err != nil {
			return nil, err
		}
		if _, dup := pos[k]; !dup {
			pos[k] = i
		}
	}
	out := make([]any, 0, len(left)+len(right))
	i, j := 0, 0
	for i < len(left) || j < len(right) {
		switch {
		case i >= len(left):
			out = append(out, right[j])
			j++
		case j >= len(right):
			out = append(out, left[i])
			i++
		default:
			lk, _ := id(left[i])
			rk, _ := id(right[j])
			li, lok := pos[lk]
			ri, rok := pos[rk]
			if lok && rok && li < ri {
				out = append(out, left[i])
				i++
			} else {
				out = append(out, right[j])
				j++
			}
		}
	}
	return out, nil
}

// elementID identifies a list element: its key fields for a merge list of
// objects, its value otherwise.
func elementID(e any, keys []string, path *meta.Path) (string, error) {
	if len(keys) == 0 {
		return meta.CanonicalKey(e), nil
	}
	m, ok := e.(map[string]any)
	if !ok {
		return "", invalid("%s: element %s of a list merged by %s is not an object", path, formatJSON(e), strings.Join(keys, ","))
	}
	var b strings.Builder
	for i, k := range keys {
		v, ok := m[k]
		if !ok {
			if len(keys) > 1 {
				// Map lists may leave out keys that have defaults.
				v = nil
			} else {
				return "", invalid("%s: element %s does not contain the merge key %q", path, formatJSON(e), k)
			}
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(meta.CanonicalKey(v))
	}
	return b.String(), nil
}

// deleteValues removes the values listed in del from a list of scalars.
func deleteValues(cur, del []any) []any {
	drop := make(map[string]bool, len(del))
	for _, d := range del {
		drop[meta.CanonicalKey(d)] = true
	}
	out := make([]any, 0, len(cur))
	for _, v := range cur {
		if !drop[meta.CanonicalKey(v)] {
			out = append(out, v)
		}
	}
	return out
}
