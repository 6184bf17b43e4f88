package registry

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// concernsGC is the garbage collector's question, whether a stored object
// has owner references or a deletion timestamp, answered by decoding.
func concernsGC(t testing.TB, v []byte) bool {
	obj, err := decodeStored(v, 1)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := obj["metadata"].(map[string]any)
	_, owners := md["ownerReferences"]
	_, deleting := md["deletionTimestamp"]
	return owners || deleting
}

// mayConcernGC is the garbage collector's question (package controllers)
// answered by StoredMetadataMayHave.
func mayConcernGC(v []byte) bool {
	return StoredMetadataMayHave(v, "ownerReferences", "deletionTimestamp")
}

func gcScanObjects() []Object {
	mf := []any{map[string]any{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:ownerReferences": map[string]any{}, "f:deletionTimestamp": map[string]any{}}}}}
	return []Object{
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "plain"}, "data": map[string]any{"k": "v"}},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "owned", "ownerReferences": []any{map[string]any{"uid": "u", "name": "o", "kind": "K", "apiVersion": "v1"}}}},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "deleting", "deletionTimestamp": "2026-11-22T08:00:00Z", "finalizers": []any{"x"}}},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "both", "deletionTimestamp": "2026-11-22T08:00:00Z", "ownerReferences": []any{}}},
		// The words elsewhere: in data, labels, annotations, managedFields.
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "words", "managedFields": mf,
			"labels":      map[string]any{"ownerReferences": "deletionTimestamp"},
			"annotations": map[string]any{"a": `"ownerReferences":{"deletionTimestamp":1}`, `q"\`: `\"ownerReferences\"`}},
			"data": map[string]any{"ownerReferences": `"deletionTimestamp"`, "deletionTimestamp": "x"}},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": `tricky "\\ name`, "generateName": "}{][,", "labels": map[string]any{"a": "{{{", "b": "]]]"}}, "data": map[string]any{"metadata": `{"ownerReferences":[]}`}},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": "nested", "annotations": map[string]any{"x": "y"}, "ownerReferences": []any{map[string]any{"uid": "u", "controller": true}}}},
	}
}

func TestStoredMetadataMayHaveMatchesDecoding(t *testing.T) {
	for _, obj := range gcScanObjects() {
		v, err := encodeStored(obj)
		if err != nil {
			t.Fatal(err)
		}
		name := obj["metadata"].(map[string]any)["name"]
		if got, want := mayConcernGC(v), concernsGC(t, v); got != want {
			t.Errorf("%v: mayConcernGC = %v, decoding says %v", name, got, want)
		}
	}
	// Not a stored value, or a truncated one: decode and see.
	v, _ := encodeStored(gcScanObjects()[0])
	for _, bad := range [][]byte{nil, []byte("{}"), v[:len(v)/2]} {
		if !mayConcernGC(bad) {
			t.Errorf("mayConcernGC(%q) = false, want true (cannot tell)", bad)
		}
	}
}

// FuzzStoredMetadataMayHave: for any object, StoredMetadataMayHave never says "no" to an
// object that has owner references or a deletion timestamp, and says "yes"
// only when it has them.
func FuzzStoredMetadataMayHave(f *testing.F) {
	for _, obj := range gcScanObjects() {
		b, _ := json.Marshal(obj)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var obj Object
		if json.Unmarshal(b, &obj) != nil {
			return
		}
		md, ok := obj["metadata"].(map[string]any)
		if !ok || len(md) == 0 {
			return
		}
		v, err := encodeStored(obj)
		if err != nil {
			return
		}
		if got, want := mayConcernGC(v), concernsGC(t, v); got != want {
			t.Fatalf("mayConcernGC = %v, decoding says %v for %s", got, want, b)
		}
	})
}

func BenchmarkStoredMetadataMayHave(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	p := make([]byte, 2048)
	for i := range p {
		p[i] = alphabet[rng.Intn(len(alphabet))]
	}
	obj := Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "cm-000123", "namespace": "kb-abc-3", "labels": map[string]any{"app": "kbench", "shard": "3"},
		"uid": "579e4764-b79f-48d4-be53-f9e3c8657a0e", "creationTimestamp": "2026-11-22T08:06:40Z",
		"managedFields": []any{map[string]any{"manager": "kbench", "operation": "Update", "apiVersion": "v1", "time": "2026-11-22T08:06:40Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:idx": map[string]any{}, "f:payload": map[string]any{}}}}},
	}, "data": map[string]any{"idx": "123", "payload": string(p) + strings.Repeat(`"`, 1)}}
	v, err := encodeStored(obj)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if mayConcernGC(v) {
			b.Fatal("concern")
		}
	}
}
