package patch

import (
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
)

// The store leaves empty labels and a ConfigMap's empty data out of what it
// writes (meta.OmitEmpty): re-applying a configuration that sets them to an
// object stored without them is a no-op, as in kube-apiserver (the
// applier's entry keeps its time), while a configuration without
// SetOmitEmpty's fields would change the object.
func TestApplyNoopOverOmittedEmpties(t *testing.T) {
	for _, omit := range []bool{true, false} {
		fm := NewFieldManager(mustSchema(t, configMapSchema), configMapGVK, false)
		if omit {
			fm.SetOmitEmpty("data", "binaryData")
		}
		cfg := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{}},"data":{},"binaryData":{"k":"dg=="}}`)
		live, err := fm.Apply(nil, cfg, ApplyOptions{Manager: "m", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		meta.OmitEmpty(live, "data", "binaryData") // as the store writes it
		again, err := fm.Apply(live, meta.DeepCopyMap(cfg), ApplyOptions{Manager: "m", Now: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		mf := toJSON(t, again["metadata"].(map[string]any)["managedFields"])
		noop := sameJSON(t, again, toJSON(t, live))
		if omit && !noop {
			t.Fatalf("re-apply over the omitted empties changed the object:\n%s\nwas\n%s", toJSON(t, again), toJSON(t, live))
		}
		if !omit && noop {
			t.Fatalf("without SetOmitEmpty, re-applying data: {} to an object without data was a no-op (managedFields %s)", mf)
		}
	}
}
