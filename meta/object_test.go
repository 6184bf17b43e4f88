package meta

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decode parses JSON the way kapi does (UseNumber).
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestAsInt64(t *testing.T) {
	tests := []struct {
		in   any
		want int64
		ok   bool
	}{
		{json.Number("42"), 42, true},
		{json.Number("-7"), -7, true},
		{json.Number("9223372036854775807"), math.MaxInt64, true},
		{json.Number("9223372036854775808"), 0, false}, // beyond int64 and 2^53
		{json.Number("1.0"), 1, true},
		{json.Number("1e3"), 1000, true},
		{json.Number("1.5"), 0, false},
		{json.Number("abc"), 0, false},
		{int64(3), 3, true},
		{int(3), 3, true},
		{int32(-3), -3, true},
		{uint8(3), 3, true},
		{uint64(math.MaxUint64), 0, false},
		{float64(2), 2, true},
		{float64(2.5), 0, false},
		{float64(1 << 60), 0, false}, // beyond 2^53: not exact
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{float32(4), 4, true},
		{"3", 0, false},
		{nil, 0, false},
		{true, 0, false},
	}
	for _, tt := range tests {
		got, ok := AsInt64(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("AsInt64(%#v) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAsFloat64(t *testing.T) {
	tests := []struct {
		in   any
		want float64
		ok   bool
	}{
		{json.Number("1.5"), 1.5, true},
		{json.Number("x"), 0, false},
		{int64(2), 2, true},
		{uint16(2), 2, true},
		{float32(0.5), 0.5, true},
		{"1", 0, false},
		{nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := AsFloat64(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("AsFloat64(%#v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDeepEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{json.Number("1"), int64(1), true},
		{json.Number("1"), float64(1), true},
		{json.Number("1.0"), json.Number("1"), true},
		{json.Number("1"), json.Number("2"), false},
		{json.Number("1.5"), 1.5, true},
		{json.Number("1.5"), int64(1), false},
		{json.Number("9007199254740993"), float64(9007199254740992), false},
		{json.Number("1"), "1", false},
		{"a", "a", true},
		{true, false, false},
		{nil, nil, true},
		{nil, map[string]any{}, false},
		{map[string]any{"a": json.Number("1")}, map[string]any{"a": int64(1)}, true},
		{map[string]any{"a": 1}, map[string]any{"b": 1}, false},
		{map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, false},
		{[]any{json.Number("1"), "x"}, []any{1.0, "x"}, true},
		{[]any{1}, []any{1, 2}, false},
		{[]any{}, map[string]any{}, false},
	}
	for _, tt := range tests {
		if got := DeepEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("DeepEqual(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := DeepEqual(tt.b, tt.a); got != tt.want {
			t.Errorf("DeepEqual(%#v, %#v) = %v, want %v (reversed)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	orig := decode(t, `{"a":{"b":[1,{"c":"d"}],"n":null},"s":"x","f":true}`)
	orig["ss"] = []string{"x"}
	orig["ms"] = map[string]string{"k": "v"}
	cp := DeepCopy(orig).(map[string]any)
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("copy differs: %#v", cp)
	}
	cp["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	cp["ss"].([]string)[0] = "changed"
	cp["ms"].(map[string]string)["k"] = "changed"
	if orig["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] != "d" ||
		orig["ss"].([]string)[0] != "x" || orig["ms"].(map[string]string)["k"] != "v" {
		t.Fatal("changing the copy changed the original")
	}
	if DeepCopyMap(nil) != nil {
		t.Error("DeepCopyMap(nil) != nil")
	}
	if DeepCopy([]any(nil)).([]any) != nil {
		t.Error("DeepCopy of a nil slice is not nil")
	}
}

func TestNestedGetters(t *testing.T) {
	obj := decode(t, `{"metadata":{"name":"a","labels":{"x":"y"},"generation":3},
		"spec":{"size":5,"ratio":0.5,"on":true,"tags":["a","b"],"mixed":["a",1],"bad":{"k":1}},"s":"str"}`)

	if v, ok, err := NestedString(obj, "metadata", "name"); v != "a" || !ok || err != nil {
		t.Errorf("NestedString = %q %v %v", v, ok, err)
	}
	if _, ok, err := NestedString(obj, "metadata", "missing"); ok || err != nil {
		t.Errorf("missing: ok=%v err=%v", ok, err)
	}
	if _, ok, err := NestedString(obj, "spec", "size"); ok || err == nil {
		t.Errorf("wrong type: ok=%v err=%v", ok, err)
	} else if !strings.Contains(err.Error(), ".spec.size accessor error") {
		t.Errorf("error lacks context: %v", err)
	}
	if _, ok, err := NestedString(obj, "s", "x"); ok || err == nil {
		t.Errorf("through a string: ok=%v err=%v", ok, err)
	}
	if v, ok, err := NestedInt64(obj, "spec", "size"); v != 5 || !ok || err != nil {
		t.Errorf("NestedInt64 = %d %v %v", v, ok, err)
	}
	if _, ok, err := NestedInt64(obj, "spec", "ratio"); ok || err == nil {
		t.Errorf("NestedInt64 of 0.5: ok=%v err=%v", ok, err)
	}
	if v, ok, err := NestedFloat64(obj, "spec", "ratio"); v != 0.5 || !ok || err != nil {
		t.Errorf("NestedFloat64 = %v %v %v", v, ok, err)
	}
	if v, ok, err := NestedBool(obj, "spec", "on"); !v || !ok || err != nil {
		t.Errorf("NestedBool = %v %v %v", v, ok, err)
	}
	if v, ok, err := NestedStringSlice(obj, "spec", "tags"); !reflect.DeepEqual(v, []string{"a", "b"}) || !ok || err != nil {
		t.Errorf("NestedStringSlice = %v %v %v", v, ok, err)
	}
	if _, ok, err := NestedStringSlice(obj, "spec", "mixed"); ok || err == nil {
		t.Errorf("NestedStringSlice mixed: ok=%v err=%v", ok, err)
	}
	if v, ok, err := NestedStringMap(obj, "metadata", "labels"); !reflect.DeepEqual(v, map[string]string{"x": "y"}) || !ok || err != nil {
		t.Errorf("NestedStringMap = %v %v %v", v, ok, err)
	}
	if _, ok, err := NestedStringMap(obj, "spec", "bad"); ok || err == nil {
		t.Errorf("NestedStringMap bad: ok=%v err=%v", ok, err)
	}
	m, ok, err := NestedMap(obj, "spec")
	if !ok || err != nil {
		t.Fatalf("NestedMap: %v %v", ok, err)
	}
	m["new"] = "x" // NestedMap does not copy
	if obj["spec"].(map[string]any)["new"] != "x" {
		t.Error("NestedMap returned a copy")
	}
	if s, ok, err := NestedSlice(obj, "spec", "tags"); len(s) != 2 || !ok || err != nil {
		t.Errorf("NestedSlice = %v %v %v", s, ok, err)
	}
	if v, ok, err := NestedField(obj); !ok || err != nil || !reflect.DeepEqual(v, obj) {
		t.Errorf("NestedField with no fields should return obj")
	}
}

func TestSetAndRemoveNested(t *testing.T) {
	obj := map[string]any{"s": "str"}
	if err := SetNested(obj, "v", "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := NestedString(obj, "a", "b", "c"); v != "v" {
		t.Errorf("set value not found: %#v", obj)
	}
	if err := SetNested(obj, "v", "s", "x"); err == nil {
		t.Error("setting through a string should fail")
	}
	if obj["s"] != "str" {
		t.Error("failed SetNested changed obj")
	}
	if err := SetNested(obj, 1); err == nil {
		t.Error("SetNested with no fields should fail")
	}
	if err := SetNested(nil, 1, "a"); err == nil {
		t.Error("SetNested on nil should fail")
	}
	// A null intermediate is replaced.
	obj["n"] = nil
	if err := SetNested(obj, true, "n", "x"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := NestedBool(obj, "n", "x"); !v {
		t.Error("set through null failed")
	}
	RemoveNested(obj, "a", "b", "c")
	if _, ok, _ := NestedField(obj, "a", "b", "c"); ok {
		t.Error("RemoveNested left the value")
	}
	if _, ok, _ := NestedMap(obj, "a", "b"); !ok {
		t.Error("RemoveNested removed the parent")
	}
	RemoveNested(obj, "s", "x", "y") // no-op through a string
	RemoveNested(obj, "missing", "x")
	RemoveNested(obj)
	if obj["s"] != "str" {
		t.Error("no-op RemoveNested changed obj")
	}
}

func TestMetadataAccessors(t *testing.T) {
	obj := map[string]any{}
	SetAPIVersion(obj, "example.dev/v1")
	SetKind(obj, "Widget")
	SetName(obj, "w")
	SetGenerateName(obj, "w-")
	SetNamespace(obj, "ns")
	SetUID(obj, "u")
	SetResourceVersion(obj, "12")
	SetGeneration(obj, 4)
	SetLabels(obj, map[string]string{"app": "x"})
	SetAnnotations(obj, map[string]string{"a": "b"})
	SetFinalizers(obj, []string{"f/x"})
	ts := NewTime(time.Date(2024, 5, 6, 7, 8, 9, 500, time.UTC))
	SetCreationTimestamp(obj, ts)
	SetDeletionTimestamp(obj, ts)
	grace := int64(30)
	SetDeletionGracePeriodSeconds(obj, &grace)
	ctrl := true
	SetOwnerReferences(obj, []OwnerReference{{APIVersion: "v1", Kind: "K", Name: "o", UID: "ou", Controller: &ctrl}})
	SetManagedFields(obj, []ManagedFields{{Manager: "m", Operation: "Apply", FieldsType: "FieldsV1", FieldsV1: map[string]any{"f:spec": map[string]any{}}}})

	if GetAPIVersion(obj) != "example.dev/v1" || GetKind(obj) != "Widget" || GetName(obj) != "w" ||
		GetGenerateName(obj) != "w-" || GetNamespace(obj) != "ns" || GetUID(obj) != "u" ||
		GetResourceVersion(obj) != "12" || GetGeneration(obj) != 4 {
		t.Errorf("scalar accessors: %#v", obj)
	}
	if g := obj["metadata"].(map[string]any)["generation"]; g != json.Number("4") {
		t.Errorf("generation stored as %#v, want json.Number", g)
	}
	if !reflect.DeepEqual(GetLabels(obj), map[string]string{"app": "x"}) ||
		!reflect.DeepEqual(GetAnnotations(obj), map[string]string{"a": "b"}) ||
		!reflect.DeepEqual(GetFinalizers(obj), []string{"f/x"}) {
		t.Errorf("collection accessors: %#v", obj)
	}
	if c := GetCreationTimestamp(obj); c == nil || !c.Equal(ts.Time) {
		t.Errorf("creationTimestamp = %v", c)
	}
	if s := obj["metadata"].(map[string]any)["creationTimestamp"]; s != "2024-05-06T07:08:09Z" {
		t.Errorf("creationTimestamp stored as %#v", s)
	}
	if d := GetDeletionTimestamp(obj); d == nil || !d.Equal(ts.Time) {
		t.Errorf("deletionTimestamp = %v", d)
	}
	if g := GetDeletionGracePeriodSeconds(obj); g == nil || *g != 30 {
		t.Errorf("grace = %v", g)
	}
	refs := GetOwnerReferences(obj)
	if len(refs) != 1 || refs[0].UID != "ou" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("ownerReferences = %#v", refs)
	}
	if _, ok := obj["metadata"].(map[string]any)["ownerReferences"].([]any); !ok {
		t.Errorf("ownerReferences not stored in generic form: %T", obj["metadata"].(map[string]any)["ownerReferences"])
	}
	mf := GetManagedFields(obj)
	if len(mf) != 1 || mf[0].Manager != "m" {
		t.Errorf("managedFields = %#v", mf)
	}

	// Zero values remove the fields.
	SetName(obj, "")
	SetGeneration(obj, 0)
	SetLabels(obj, nil)
	SetAnnotations(obj, map[string]string{})
	SetFinalizers(obj, nil)
	SetCreationTimestamp(obj, nil)
	SetDeletionGracePeriodSeconds(obj, nil)
	SetOwnerReferences(obj, nil)
	md := obj["metadata"].(map[string]any)
	for _, k := range []string{"name", "generation", "labels", "annotations", "finalizers", "creationTimestamp", "deletionGracePeriodSeconds", "ownerReferences"} {
		if _, ok := md[k]; ok {
			t.Errorf("metadata.%s not removed", k)
		}
	}

	// Getters tolerate missing and malformed metadata.
	bad := map[string]any{"metadata": "x"}
	if GetName(bad) != "" || GetLabels(bad) != nil || GetGeneration(bad) != 0 || GetCreationTimestamp(bad) != nil || GetOwnerReferences(bad) != nil {
		t.Error("getters on malformed metadata should return zero values")
	}
	SetName(bad, "n") // replaces the malformed metadata
	if GetName(bad) != "n" {
		t.Error("SetName did not replace malformed metadata")
	}
	if GetAPIVersion(map[string]any{}) != "" {
		t.Error("missing apiVersion")
	}
}

func TestObjectMetaConversion(t *testing.T) {
	obj := decode(t, `{"metadata":{"name":"a","namespace":"n","generation":2,"labels":{"x":"y"},
		"creationTimestamp":"2024-01-02T03:04:05Z","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u"}]}}`)
	om, err := GetObjectMeta(obj)
	if err != nil {
		t.Fatal(err)
	}
	if om.Name != "a" || om.Namespace != "n" || om.Generation != 2 || om.Labels["x"] != "y" ||
		om.CreationTimestamp == nil || om.CreationTimestamp.Year() != 2024 || len(om.OwnerReferences) != 1 {
		t.Errorf("GetObjectMeta = %#v", om)
	}
	om.Name = "b"
	if err := SetObjectMeta(obj, om); err != nil {
		t.Fatal(err)
	}
	if GetName(obj) != "b" || obj["metadata"].(map[string]any)["generation"] != json.Number("2") {
		t.Errorf("SetObjectMeta = %#v", obj["metadata"])
	}
	if om, err := GetObjectMeta(map[string]any{}); err != nil || om.Name != "" {
		t.Errorf("absent metadata: %v %v", om, err)
	}
	if _, err := GetObjectMeta(map[string]any{"metadata": []any{}}); err == nil {
		t.Error("array metadata should fail")
	}
	if _, err := GetObjectMeta(decode(t, `{"metadata":{"name":5}}`)); err == nil {
		t.Error("numeric name should fail")
	}
	if err := SetObjectMeta(obj, nil); err != nil || obj["metadata"] != nil {
		t.Error("SetObjectMeta(nil) should remove metadata")
	}
}

func TestToMapFromMap(t *testing.T) {
	type inner struct {
		N int64 `json:"n"`
	}
	type T struct {
		A string  `json:"a"`
		B *inner  `json:"b,omitempty"`
		C []int64 `json:"c"`
	}
	m, err := ToMap(T{A: "x", B: &inner{N: 1 << 60}, C: []int64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if m["b"].(map[string]any)["n"] != json.Number("1152921504606846976") {
		t.Errorf("large integer not exact: %#v", m["b"])
	}
	var back T
	if err := FromMap(m, &back); err != nil {
		t.Fatal(err)
	}
	if back.B.N != 1<<60 || back.A != "x" {
		t.Errorf("round trip = %#v", back)
	}
	if _, err := ToMap([]int{1}); err == nil {
		t.Error("ToMap of an array should fail")
	}
	if _, err := ToMap(func() {}); err == nil {
		t.Error("ToMap of a func should fail")
	}
	if err := FromMap(map[string]any{"a": 1}, &back); err == nil {
		t.Error("FromMap with a wrong type should fail")
	}
}
