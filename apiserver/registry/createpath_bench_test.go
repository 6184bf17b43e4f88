package registry

import (
	"math/rand"
	"strconv"
	"testing"

	"github.com/kapi-dev/kapi/codec"
)

// kbenchBody is a configmap like the ones kbench's create workload sends:
// two labels and a 2 KiB random payload.
func kbenchBody(i int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rng := rand.New(rand.NewSource(int64(i)))
	p := make([]byte, 2048)
	for j := range p {
		p[j] = alphabet[rng.Intn(len(alphabet))]
	}
	return []byte(`{"apiVersion":"v1","data":{"idx":"` + strconv.Itoa(i) + `","payload":"` + string(p) +
		`"},"kind":"ConfigMap","metadata":{"labels":{"app":"kbench","shard":"` + strconv.Itoa(i%16) +
		`"},"name":"cm-` + strconv.Itoa(i) + `","namespace":"kbench-` + strconv.Itoa(i%10) + `"}}`)
}

func BenchmarkCreatePathDecode(b *testing.B) {
	body := kbenchBody(7)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := codec.DecodeJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreatePathEncodeStored(b *testing.B) {
	body := kbenchBody(7)
	v, _, err := codec.DecodeJSON(body)
	if err != nil {
		b.Fatal(err)
	}
	obj := v.(map[string]any)
	md := obj["metadata"].(map[string]any)
	md["uid"] = "0b8e5f36-4c1e-4a57-9d0e-3b1a7f2b9c11"
	md["creationTimestamp"] = "2026-11-22T10:00:00Z"
	md["generation"] = int64(1)
	md["managedFields"] = []any{map[string]any{"manager": "kbench", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
		"time": "2026-11-22T10:00:00Z", "fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:idx": map[string]any{}, "f:payload": map[string]any{}},
			"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}, "f:shard": map[string]any{}}}}}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeStored(obj); err != nil {
			b.Fatal(err)
		}
	}
}
