package patch

import (
	"slices"
	"strings"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// Strategic merge patch directives.
const (
	directiveMarker         = "$patch"
	retainKeysDirective     = "$retainKeys"
	deleteFromPrimitivePfx  = "$deleteFromPrimitiveList/"
	setElementOrderPfx      = "$setElementOrder/"
	directiveReplace        = "replace"
	directiveDelete         = "delete"
	directiveMerge          = "merge"
	patchStrategyRetainKeys = "retainKeys"
)

// DeclaresStrategicMerge reports whether a schema declares strategic merge
// metadata anywhere: an x-kubernetes-patch-strategy or an
// x-kubernetes-patch-merge-key. kube-apiserver serves strategic merge patch
// only for its built-in types; kapi serves it for built-in types and for
// custom types that declare this metadata, and answers other custom types
// with kube-apiserver's 415.
func DeclaresStrategicMerge(s *schema.Schema) bool {
	if s == nil {
		return false
	}
	if s.XPatchStrategy != "" || s.XPatchMergeKey != "" {
		return true
	}
	for _, p := range s.Properties {
		if DeclaresStrategicMerge(p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && DeclaresStrategicMerge(s.AdditionalProperties.Schema) {
		return true
	}
	return DeclaresStrategicMerge(s.Items)
}

// Strategic applies a strategic merge patch to original and returns the
// patched object; original and patch are not modified. The merge follows
// Kubernetes' strategic merge patch, with each list's strategy taken from s:
//
//   - a list with x-kubernetes-patch-strategy "merge" and a
//     x-kubernetes-patch-merge-key, or with x-kubernetes-list-type "map" (its
//     x-kubernetes-list-map-keys identify elements), merges element by
//     element; "merge" or list type "set" on a list of scalars merges as a
//     set; other lists (atomic, or x-kubernetes-patch-strategy "replace") are
//     replaced;
//   - objects merge key by key (null deletes a key) unless their
//     x-kubernetes-patch-strategy is "replace";
//   - metadata follows ObjectMeta's rules (finalizers merge as a set,
//     ownerReferences by uid, labels and annotations key by key);
//   - the directives $patch (replace, delete, merge), $retainKeys,
//     $deleteFromPrimitiveList/<list> and $setElementOrder/<list> work as in
//     Kubernetes.
//
// A malformed directive is a 400 Error; a patch that cannot apply (a merge
// list element without its key, a list of lists) is a 422 Error.
func Strategic(original, patch map[string]any, s *schema.Schema) (map[string]any, error) {
	m := &smp{meta: objectMetaSMPSchema()}
	out, err := m.mergeMap(meta.DeepCopyMap(original), patch, node{s: s, resource: true}, meta.NewPath("patch"))
	if err != nil {
		return nil, err
	}
	return out, nil
}

type smp struct {
	meta *schema.Schema // the strategic merge rules of ObjectMeta
}

// node is a position in the schema; resource is true where the value is a
// Kubernetes object (apiVersion, kind, metadata).
type node struct {
	s        *schema.Schema
	resource bool
}

func (m *smp) child(n node, key string) node {
	if n.resource && key == "metadata" {
		return node{s: m.meta}
	}
	if n.s == nil {
		return node{}
	}
	var c *schema.Schema
	if p, ok := n.s.Properties[key]; ok {
		c = p
	} else if n.s.AdditionalProperties != nil {
		c = n.s.AdditionalProperties.Schema
	}
	return node{s: c, resource: c != nil && c.XEmbeddedResource}
}

func (m *smp) items(n node) node {
	if n.s == nil || n.s.Items == nil {
		return node{}
	}
	return node{s: n.s.Items, resource: n.s.Items.XEmbeddedResource}
}

func strategies(s *schema.Schema) []string {
	if s == nil || s.XPatchStrategy == "" {
		return nil
	}
	return strings.Split(s.XPatchStrategy, ",")
}

// listStrategy returns how a list merges: merge (true) with its element keys
// (nil for a list of scalars), or replace (false).
func listStrategy(s *schema.Schema) (merge bool, keys []string) {
	if s == nil {
		return false, nil
	}
	st := strategies(s)
	if slices.Contains(st, directiveReplace) {
		return false, nil
	}
	if slices.Contains(st, directiveMerge) {
		if s.XPatchMergeKey != "" {
			return true, []string{s.XPatchMergeKey}
		}
		return true, s.ListMapKeys()
	}
	switch s.ListType() {
	case schema.ListTypeMap:
		return true, s.ListMapKeys()
	case schema.ListTypeSet:
		return true, nil
	}
	return false, nil
}

func replacesMap(s *schema.Schema) bool {
	return slices.Contains(strategies(s), directiveReplace)
}

// mergeMap merges patch into orig, which it owns and may modify.
func (m *smp) mergeMap(orig, patch map[string]any, n node, path *meta.Path) (map[string]any, error) {
	if d, ok := patch[directiveMarker]; ok {
		switch d {
		case directiveReplace:
			c := meta.DeepCopyMap(patch)
			delete(c, directiveMarker)
			out, _ := removeDirectives(c)
			return out.(map[string]any), nil
		case directiveDelete:
			return map[string]any{}, nil
		case directiveMerge:
		default:
			return nil, badRequest("%s: unknown patch type %s in %s", path, formatJSON(d), directiveMarker)
		}
	}
	if orig == nil {
		orig = map[string]any{}
	}
	if rk, ok := patch[retainKeysDirective]; ok {
		if err := retainKeys(orig, patch, rk, path); err != nil {
			return nil, err
		}
	}
	// Lists with an explicit order.
	ordered := map[string]bool{}
	for _, k := range sortedKeys(patch) {
		if !strings.HasPrefix(k, setElementOrderPfx) {
			continue
		}
		field := strings.TrimPrefix(k, setElementOrderPfx)
		order, ok := patch[k].([]any)
		if !ok || field == "" {
			return nil, badRequest("%s: invalid %s: the value must be a list", path, k)
		}
		if err := m.setElementOrder(orig, patch, field, order, n, path); err != nil {
			return nil, err
		}
		ordered[field] = true
	}
	for _, k := range sortedKeys(patch) {
		pv := patch[k]
		switch {
		case k == directiveMarker || k == retainKeysDirective || strings.HasPrefix(k, setElementOrderPfx):
			continue
		case strings.HasPrefix(k, deleteFromPrimitivePfx):
			field := strings.TrimPrefix(k, deleteFromPrimitivePfx)
			del, ok := pv.([]any)
			if !ok || field == "" {
				return nil, badRequest("%s: invalid %s: the value must be a list", path, k)
			}
			if cur, ok := orig[field].([]any); ok {
				orig[field] = deleteValues(cur, del)
			}
			continue
		case ordered[k]:
			continue
		}
		v, keep, err := m.mergeValue(orig[k], pv, m.child(n, k), path.Child(k))
		if err != nil {
			return nil, err
		}
		if keep {
			orig[k] = v
		} else {
			delete(orig, k)
		}
	}
	return orig, nil
}

// mergeValue merges the patch value pv of a field into its current value cur
// (nil when absent); keep is false when the field goes.
func (m *smp) mergeValue(cur, pv any, n node, path *meta.Path) (any, bool, error) {
	if pv == nil {
		return nil, false, nil
	}
	switch p := pv.(type) {
	case map[string]any:
		if c, ok := cur.(map[string]any); ok && !replacesMap(n.s) {
			// cur is part of Strategic's copy of the object: merged in place
			// (a copy per level is quadratic in the depth).
			out, err := m.mergeMap(c, p, n, path)
			return out, true, err
		}
		// A new map, or one that replaces the current value.
		switch d, has := p[directiveMarker]; {
		case !has, d == directiveReplace, d == directiveMerge:
		case d == directiveDelete:
			return nil, false, nil
		default:
			return nil, false, badRequest("%s: unknown patch type %s in %s", path, formatJSON(d), directiveMarker)
		}
		c := meta.DeepCopyMap(p)
		delete(c, directiveMarker)
		v, keep := removeDirectives(c)
		return v, keep, nil
	case []any:
		c, ok := cur.([]any)
		if !ok {
			v, keep := removeDirectives(meta.DeepCopy(p))
			return v, keep, nil
		}
		out, err := m.mergeList(c, p, n, path)
		return out, true, err
	default:
		return pv, true, nil
	}
}

// retainKeys applies $retainKeys: keys of orig not listed go. Every field the
// patch sets must be listed.
func retainKeys(orig, patch map[string]any, rk any, path *meta.Path) error {
	list, ok := rk.([]any)
	if !ok {
		return badRequest("%s: invalid %s: the value must be a list of field names", path, retainKeysDirective)
	}
	keep := make(map[string]bool, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return badRequest("%s: invalid %s: the value must be a list of field names", path, retainKeysDirective)
		}
		keep[s] = true
	}
	for k, v := range patch {
		if v == nil || strings.HasPrefix(k, "$") {
			continue
		}
		if !keep[k] {
			return badRequest("%s: the patch sets %q, which %s does not list", path, k, retainKeysDirective)
		}
	}
	for k := range orig {
		if !keep[k] {
			delete(orig, k)
		}
	}
	return nil
}

// setElementOrder merges the list field (if the patch has it) and orders the
// result as $setElementOrder/<field> says; elements not in the order list
// keep their place relative to the others as in orig.
func (m *smp) setElementOrder(orig, patch map[string]any, field string, order []any, n node, path *meta.Path) error {
	cn := m.child(n, field)
	_, keys := listStrategy(cn.s)
	cur, hasCur := orig[field].([]any)
	pv, hasPatch := patch[field]
	var merged []any
	switch {
	case hasPatch && pv == nil:
		delete(orig, field)
		return nil
	case hasPatch:
		pl, ok := pv.([]any)
		if !ok {
			v, keep, err := m.mergeValue(orig[field], pv, cn, path.Child(field))
			if err != nil {
				return err
			}
			if keep {
				orig[field] = v
			}
			return nil
		}
		if hasCur {
			var err error
			if merged, err = m.mergeList(cur, pl, cn, path.Child(field)); err != nil {
				return err
			}
		} else {
			v, _ := removeDirectives(meta.DeepCopy(pl))
			merged = v.([]any)
		}
	case hasCur:
		merged = cur
	default:
		return nil
	}
	id := func(e any) (string, error) { return elementID(e, keys, path.Child(field)) }
	inOrder := make(map[string]int, len(order))
	for i, o := range order {
		k, err := id(o)
		if err != nil {
			return err
		}
		inOrder[k] = i
	}
	var listed, others []any
	for _, e := range merged {
		k, err := id(e)
		if err != nil {
			return err
		}
		if _, ok := inOrder[k]; ok {
			listed = append(listed, e)
		} else {
			others = append(others, e)
		}
	}
	slices.SortStableFunc(listed, func(a, b any) int {
		ka, _ := id(a)
		kb, _ := id(b)
		return inOrder[ka] - inOrder[kb]
	})
	out, err := interleave(others, listed, cur, id)
	if err != nil {
		return err
	}
	orig[field] = out
	return nil
}

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
	// Special elements: {"$patch": "replace"} and {"$patch": "delete", key...}.
	// Deletions are collected and done in one pass over the list (one pass
	// per deletion is quadratic).
	result := slices.Clone(cur)
	var plain []any
	replace := false
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
				return nil, err
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
					return nil, kerr
				}
			}
			delIDs[want] = true
		case directiveMerge:
			return nil, badRequest("%s: %s: merge is not supported in a list", path, directiveMarker)
		default:
			return nil, badRequest("%s: unknown patch type %s in %s", path, formatJSON(d), directiveMarker)
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
		em, isMap := e.(map[string]any)
		cm, curIsMap := result[i].(map[string]any)
		switch {
		case isMap && curIsMap:
			// In place, as in mergeValue: a copy per patch element with the
			// same key is quadratic in them.
			merged, err := m.mergeMap(cm, em, items, path.Key(k))
			if err != nil {
				return nil, err
			}
			result[i] = merged
		case isMap:
			v, _ := removeDirectives(meta.DeepCopyMap(em))
			result[i] = v
		default:
			result[i] = e
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

// removeDirectives strips patch directives from a value that is copied into
// the object as it is: maps with a $patch directive are dropped (keep is
// false at the top), and $retainKeys, $setElementOrder/ and
// $deleteFromPrimitiveList/ keys are removed. v is modified.
func removeDirectives(v any) (out any, keep bool) {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t[directiveMarker]; ok {
			return nil, false
		}
		for k, e := range t {
			if k == retainKeysDirective || strings.HasPrefix(k, setElementOrderPfx) || strings.HasPrefix(k, deleteFromPrimitivePfx) {
				delete(t, k)
				continue
			}
			ne, keep := removeDirectives(e)
			if keep {
				t[k] = ne
			} else {
				delete(t, k)
			}
		}
		return t, true
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			if ne, keep := removeDirectives(e); keep {
				out = append(out, ne)
			}
		}
		return out, true
	}
	return v, true
}

// formatJSON renders a value for a message, shortened.
func formatJSON(v any) string {
	s := meta.CanonicalKey(v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// objectMetaSMPSchema returns the strategic merge rules of ObjectMeta, as
// Kubernetes declares them: finalizers merge as a set, ownerReferences by
// uid, labels and annotations key by key, managedFields atomically.
func objectMetaSMPSchema() *schema.Schema {
	str := &schema.Schema{Type: schema.TypeString}
	return &schema.Schema{
		Type: schema.TypeObject,
		Properties: map[string]*schema.Schema{
			"labels":      {Type: schema.TypeObject, AdditionalProperties: &schema.SchemaOrBool{Allows: true, Schema: str}},
			"annotations": {Type: schema.TypeObject, AdditionalProperties: &schema.SchemaOrBool{Allows: true, Schema: str}},
			"finalizers":  {Type: schema.TypeArray, Items: str, XListType: schema.ListTypeSet, XPatchStrategy: directiveMerge},
			"ownerReferences": {Type: schema.TypeArray, XListType: schema.ListTypeMap, XListMapKeys: []string{"uid"},
				XPatchStrategy: directiveMerge, XPatchMergeKey: "uid", Items: &schema.Schema{Type: schema.TypeObject}},
			"managedFields": {Type: schema.TypeArray, XListType: schema.ListTypeAtomic, Items: &schema.Schema{Type: schema.TypeObject}},
		},
	}
}
