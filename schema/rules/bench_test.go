package rules

import (
	"context"
	"testing"
)

// benchSchema is a spec with five typical rules: two cross-field checks,
// a string check, a list size and an optional field.
var benchSchema = spec(`{"minReplicas":{"type":"integer"},"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"},
	"name":{"type":"string","maxLength":63,"x-kubernetes-validations":[{"rule":"self.startsWith('w')"}]},
	"tags":{"type":"array","maxItems":16,"items":{"type":"string","maxLength":32},"x-kubernetes-validations":[{"rule":"self.size() <= 8"}]},
	"note":{"type":"string","maxLength":256}}`,
	`[{"rule":"self.minReplicas <= self.replicas"},{"rule":"self.replicas <= self.maxReplicas"},{"rule":"!has(self.note) || self.note != ''"}]`)

const benchObject = `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default"},
	"spec":{"minReplicas":1,"replicas":2,"maxReplicas":3,"name":"wonder","tags":["a","b","c"],"note":"hello"}}`

// BenchmarkValidate is the cost of the rules of a create: five typical
// rules against none (the figure the registry adds to a create); and of a
// spec update of an object whose five rules are all on its unchanged
// status, which kube-apiserver evaluates too (for ratcheting warnings).
func BenchmarkValidate(b *testing.B) {
	obj := mustObj(b, benchObject)
	for _, bc := range []struct{ name, schema string }{
		{"none", spec(`{"replicas":{"type":"integer"}}`, ``)},
		{"five-rules", benchSchema},
	} {
		v, err := Compile(mustSchema(b, bc.schema), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs, _ := v.Validate(context.Background(), obj, nil); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
	status := `{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer"}}},
		"status":{"type":"object","properties":{"minReplicas":{"type":"integer"},"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"},
			"name":{"type":"string","maxLength":63,"x-kubernetes-validations":[{"rule":"self.startsWith('w')"}]},
			"tags":{"type":"array","maxItems":16,"items":{"type":"string","maxLength":32},"x-kubernetes-validations":[{"rule":"self.size() <= 8"}]},
			"note":{"type":"string","maxLength":256}},
			"x-kubernetes-validations":[{"rule":"self.minReplicas <= self.replicas"},{"rule":"self.replicas <= self.maxReplicas"},{"rule":"!has(self.note) || self.note != ''"}]}}}`
	sv, err := Compile(mustSchema(b, status), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	st := mustObj(b, benchObject)["spec"]
	old := map[string]any{"spec": map[string]any{"replicas": 1}, "status": st}
	upd := map[string]any{"spec": map[string]any{"replicas": 2}, "status": st}
	b.Run("update-status-rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs, _ := sv.Validate(context.Background(), upd, old); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}
