package patch

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

const fuzzDoc = `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u","labels":{"a":"b"},"finalizers":["f"]},
 "spec":{"size":1,"color":"red","tags":["x","y"],"args":["a"],"labels":{"k":"v"},"selector":{"s":"1"},"extra":{"n":{"m":[1,2]}},
  "ports":[{"name":"http","port":80},{"name":"https","port":443,"protocol":"TCP"}]},"status":{"phase":"Ready"}}`

// checkPatchError fails unless err is nil or a *Error with a client status.
func checkPatchError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error is not a *patch.Error: %T %v", err, err)
	}
	switch pe.Code {
	case 400, 413, 422:
	default:
		t.Fatalf("error code %d: %v", pe.Code, err)
	}
}

func FuzzJSONPatch(f *testing.F) {
	for _, s := range []string{
		`[{"op":"add","path":"/spec/tags/-","value":"z"}]`,
		`[{"op":"test","path":"/spec/size","value":1},{"op":"remove","path":"/spec/color"}]`,
		`[{"op":"copy","from":"/spec","path":"/status/copy"},{"op":"move","from":"/spec/ports/0","path":"/spec/ports/1"}]`,
		`[{"op":"replace","path":"/metadata/labels/a~1b","value":null}]`,
		`{"op":"add"}`, `[]`, `[1]`, `[{"op":"add","path":"","value":{}}]`,
	} {
		f.Add([]byte(s))
	}
	doc := []byte(fuzzDoc)
	f.Fuzz(func(t *testing.T, p []byte) {
		out, _, err := JSONPatch(doc, p, 1<<20)
		checkPatchError(t, err)
		if err == nil && !json.Valid(out) {
			t.Fatalf("patched document is not JSON: %q", out)
		}
	})
}

func FuzzMergePatch(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"size":2,"color":null}}`, `{"metadata":{"labels":{"a":null,"c":"d"}}}`, `{}`, `null`, `[1]`, `{"a":{"a":{"a":1}},"a":2}`,
	} {
		f.Add([]byte(s))
	}
	doc := []byte(fuzzDoc)
	f.Fuzz(func(t *testing.T, p []byte) {
		out, _, err := MergePatch(doc, p)
		checkPatchError(t, err)
		if err == nil && !json.Valid(out) {
			t.Fatalf("patched document is not JSON: %q", out)
		}
	})
}

func FuzzStrategic(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"ports":[{"name":"http","$patch":"delete"},{"name":"admin","port":1}]}}`,
		`{"spec":{"$setElementOrder/ports":[{"name":"https"},{"name":"http"}],"$deleteFromPrimitiveList/tags":["x"]}}`,
		`{"spec":{"containers":[{"name":"c1","env":[{"name":"B","$patch":"delete"}]}],"$patch":"merge"}}`,
		`{"spec":{"source":{"$retainKeys":["type"],"type":"http"}}}`,
		`{"metadata":{"finalizers":["g"],"$deleteFromPrimitiveList/finalizers":["f"]}}`,
		`{"$patch":"replace","spec":{}}`, `{"spec":{"matrix":[["a"]]}}`,
	} {
		f.Add([]byte(s))
	}
	s := mustSchema(f, smpSchema)
	base := obj(f, fuzzDoc)
	f.Fuzz(func(t *testing.T, p []byte) {
		v, _, err := codec.DecodeJSON(p)
		if err != nil {
			return
		}
		pm, ok := v.(map[string]any)
		if !ok {
			return
		}
		before := toJSON(t, base)
		pBefore := toJSON(t, pm)
		out, err := Strategic(base, pm, s)
		checkPatchError(t, err)
		if toJSON(t, base) != before || toJSON(t, pm) != pBefore {
			t.Fatal("Strategic modified its arguments")
		}
		if err == nil {
			if out == nil {
				t.Fatal("nil result without an error")
			}
			// Deterministic.
			again, err := Strategic(base, pm, s)
			if err != nil || toJSON(t, again) != toJSON(t, out) {
				t.Fatalf("second run differs: %v", err)
			}
		}
	})
}

func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"ports":[{"name":"admin","port":9}]}}`,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{"x":"y"}},"spec":{"tags":["z"],"extra":{"q":[{"a":1}]}}}`,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"ports":[{"name":"a"},{"name":"a"}]}}`,
		`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":null}}`,
		`{"apiVersion":"v1","kind":"Widget"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	fm := NewFieldManager(mustSchema(f, widgetSchema), widgetGVK, true)
	live := obj(f, fuzzDoc)
	if err := fm.Update(nil, live, "creator", "", t0); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p []byte, mode uint8) {
		v, _, err := codec.DecodeJSON(p)
		if err != nil {
			return
		}
		cfg, ok := v.(map[string]any)
		if !ok {
			return
		}
		opts := ApplyOptions{Manager: "fuzzer", Force: mode&1 == 1, Now: t0}
		if mode&2 == 2 {
			opts.Subresource = "status"
		}
		var cur map[string]any
		if mode&4 == 0 {
			cur = meta.DeepCopyMap(live)
		}
		before := toJSON(t, cur)
		checkSurelyChanges(t, fm, cur, cfg)
		out, err := fm.Apply(cur, cfg, opts)
		if err != nil {
			if se, ok := meta.AsStatusError(err); ok {
				if se.Code() != 409 {
					t.Fatalf("status error %d: %v", se.Code(), err)
				}
			} else {
				checkPatchError(t, err)
			}
			return
		}
		if toJSON(t, cur) != before {
			t.Fatal("Apply modified the live object")
		}
		// The result's managedFields decode, and a no-op re-apply by the
		// same manager leaves the object as it is.
		if _, err := decodeManaged(out["metadata"].(map[string]any)["managedFields"]); err != nil {
			t.Fatalf("managedFields do not decode: %v", err)
		}
		again, err := fm.Apply(out, cfg, ApplyOptions{Manager: "fuzzer", Force: true, Subresource: opts.Subresource, Now: t0})
		if err != nil {
			t.Fatalf("re-apply: %v", err)
		}
		if !meta.DeepEqual(copyWithoutManagedFields(again), copyWithoutManagedFields(out)) {
			t.Fatalf("re-apply changed the object:\n%s\n%s", toJSON(t, again), toJSON(t, out))
		}
	})
}

// checkSurelyChanges checks isNoop's shortcut against the merge it stands
// for: where surelyChanges says so, merging cfg into live changes it.
func checkSurelyChanges(t *testing.T, fm *FieldManager, live, cfg map[string]any) {
	t.Helper()
	cfgTV, err := fm.typedObject(cfg, false)
	if err != nil {
		return
	}
	liveTV, err := fm.typedObject(live, true)
	if err != nil {
		return
	}
	c, _ := cfgTV.AsValue().Unstructured().(map[string]any)
	l, _ := liveTV.AsValue().Unstructured().(map[string]any)
	if c == nil || l == nil || !surelyChanges(c, l) {
		return
	}
	merged, err := liveTV.Merge(cfgTV)
	if err != nil {
		return
	}
	if value.Equals(merged.AsValue(), liveTV.AsValue()) {
		t.Fatalf("surelyChanges, but the merge leaves the object as it is:\nlive %s\nconfig %s", toJSON(t, live), toJSON(t, cfg))
	}
}
