package meta

import "testing"

// BenchmarkValidateObjectMeta validates the metadata of a configmap as a
// create stores it (kbench's labels, server-set fields, one managedFields
// entry).
func BenchmarkValidateObjectMeta(b *testing.B) {
	md := map[string]any{
		"name": "cm-00042", "namespace": "kbench-2", "uid": "0b8e5f36-4c1e-4a57-9d0e-3b1a7f2b9c11",
		"creationTimestamp": "2026-11-22T10:00:00Z", "generation": int64(1),
		"labels": map[string]any{"app": "kbench", "shard": "2"},
		"managedFields": []any{map[string]any{"manager": "kbench", "operation": "Update", "apiVersion": "v1",
			"fieldsType": "FieldsV1", "time": "2026-11-22T10:00:00Z", "fieldsV1": map[string]any{"f:data": map[string]any{}}}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateObjectMeta(md, true, nil, NewPath("metadata")); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}
