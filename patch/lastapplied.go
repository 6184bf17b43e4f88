package patch

import (
	"encoding/json"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kapi-dev/kapi/meta"
)

// lastAppliedFields returns the fields kubectl's client-side last-applied
// annotation of live sets to their current values, or nil.
func (m *FieldManager) lastAppliedFields(live map[string]any, liveTV *typed.TypedValue) *fieldpath.Set {
	la := lastApplied(live)
	if la == "" {
		return nil
	}
	var obj map[string]any
	d := json.NewDecoder(strings.NewReader(la))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		return nil
	}
	if av, _ := obj["apiVersion"].(string); av != string(m.apiVersion) {
		return nil
	}
	laTV, err := m.typedObject(obj, false)
	if err != nil {
		return nil
	}
	set, err := laTV.ToFieldSet()
	if err != nil {
		return nil
	}
	cmp, err := laTV.Compare(liveTV)
	if err != nil {
		return nil
	}
	return set.Difference(cmp.Modified).Difference(cmp.Added).Difference(cmp.Removed)
}

func lastApplied(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[LastAppliedAnnotation].(string)
	return s
}

// setLastApplied stores config (without the annotation itself) as obj's
// last-applied annotation.
func setLastApplied(obj, config map[string]any) error {
	c := meta.DeepCopyMap(config)
	if md, ok := c["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, LastAppliedAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	// A fresh annotations map: obj may share the live object's.
	old, _ := md["annotations"].(map[string]any)
	ann := make(map[string]any, len(old)+1)
	for k, v := range old {
		ann[k] = v
	}
	ann[LastAppliedAnnotation] = string(b) + "\n"
	md["annotations"] = ann
	return nil
}
