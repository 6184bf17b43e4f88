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
	for _, k := range meta.SortedKeys(patch) {
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
	for _, k := range meta.SortedKeys(patch) {
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
