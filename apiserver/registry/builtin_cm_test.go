package registry

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// TestValidateConfigMapFastPath: the check without sorting or paths answers
// exactly when the full validation finds nothing.
func TestValidateConfigMapFastPath(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	keys := []string{"a", "key.name", "KEY_NAME", "key-name", ".", "..", "...", "a/b", "a b", "", "ü", strings.Repeat("k", 253), strings.Repeat("k", 254)}
	for i := range 2000 {
		data := map[string]any{}
		for range rng.Intn(4) {
			var v any = strings.Repeat("v", rng.Intn(8))
			switch rng.Intn(10) {
			case 0:
				v = strings.Repeat("v", maxConfigMapSize/2+rng.Intn(2))
			case 1:
				v = 3.0 // not a string: schema validation reports it
			}
			data[keys[rng.Intn(len(keys))]] = v
		}
		obj := Object{"data": data}
		if rng.Intn(8) == 0 {
			obj["binaryData"] = map[string]any{keys[rng.Intn(len(keys))]: "aGk="}
		}
		bin, _ := obj["binaryData"].(map[string]any)
		got, want := validateConfigMap(obj), configMapErrors(data, bin)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d %v: validateConfigMap = %v, full validation %v", i, obj, got, want)
		}
	}
}

// An immutable configmap stored with data: {} (before empty maps were left
// out) may be written back without it: absent, null and empty are the same
// data.
func TestImmutableDataEmptyEqualsAbsent(t *testing.T) {
	old := Object{"immutable": true, "data": map[string]any{}}
	if errs := immutableDataErrors(Object{"immutable": true}, old, "data", "binaryData"); len(errs) != 0 {
		t.Fatalf("empty data left out: %v", errs)
	}
	if errs := immutableDataErrors(Object{"immutable": true, "data": map[string]any{"k": "v"}}, old, "data", "binaryData"); len(errs) != 1 {
		t.Fatalf("data added to an immutable configmap: %v, want one error", errs)
	}
}
