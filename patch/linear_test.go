package patch

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/codec"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The cost of every step of a write must be linear in the size of its
// input (a sort is fine). The benchmarks run each step on inputs near the
// size limits (a 3 MiB body, a 1.5 MiB stored object); the tests check
// with deterministic measures that the known quadratic cases stay fixed.

// reversedTags is the JSON of n distinct tags in reverse sorted order.
func reversedTags(n int) string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf(`"%06d"`, n-i)
	}
	return "[" + strings.Join(tags, ",") + "]"
}

// reversedPorts is the JSON of n ports with distinct names in reverse order.
func reversedPorts(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf(`{"name":"p%06d","port":%d}`, n-i, i)
	}
	return "[" + strings.Join(ps, ",") + "]"
}

// reversedLabels is the JSON of a map of n keys.
func reversedLabels(n int) string {
	ls := make([]string, n)
	for i := range ls {
		ls[i] = fmt.Sprintf(`"l%06d":"v"`, n-i)
	}
	return "{" + strings.Join(ls, ",") + "}"
}

// bigWidget is a widget of about 1.4 MB: 60,000 tags and 10,000 ports in
// reverse order and 25,000 labels.
func bigWidget(tb testing.TB) map[string]any {
	return obj(tb, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u"},
	  "spec":{"size":1,"tags":`+reversedTags(60000)+`,"ports":`+reversedPorts(10000)+`,"labels":`+reversedLabels(25000)+`}}`)
}

func widgetManager(tb testing.TB) *FieldManager {
	return NewFieldManager(mustSchema(tb, widgetSchema), widgetGVK, true)
}

// BenchmarkLinearCreateFields: the managedFields of a create of bigWidget.
func BenchmarkLinearCreateFields(b *testing.B) {
	fm := widgetManager(b)
	o := bigWidget(b)
	b.ReportAllocs()
	for b.Loop() {
		delete(o["metadata"].(map[string]any), "managedFields")
		if err := fm.Update(nil, o, "m", "", t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLinearUpdate: the managedFields of an update of bigWidget that
// changes one field (decoding the live managedFields, comparing).
func BenchmarkLinearUpdate(b *testing.B) {
	fm := widgetManager(b)
	live := bigWidget(b)
	if err := fm.Update(nil, live, "m", "", t0); err != nil {
		b.Fatal(err)
	}
	live = storedForm(b, live)
	b.ReportAllocs()
	for b.Loop() {
		next := storedForm(b, live)
		next["spec"].(map[string]any)["color"] = "red"
		if err := fm.Update(live, next, "other", "", t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLinearManagedFields: an update of an object whose one
// managedFields entry has 100,000 keys (the object of about 1.4 MB).
func BenchmarkLinearManagedFields(b *testing.B) {
	fm := widgetManager(b)
	live := storedForm(b, obj(b, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u",
	  "managedFields":[{"manager":"m","operation":"Update","apiVersion":"example.dev/v1","fieldsType":"FieldsV1","fieldsV1":`+bigFieldsV1(100000)+`}]},
	  "spec":{"size":1}}`))
	b.ReportAllocs()
	for b.Loop() {
		next := storedForm(b, live)
		next["spec"].(map[string]any)["color"] = "red"
		if err := fm.Update(live, next, "other", "", t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLinearApply: applying a configuration of about 1.4 MB (sorted
// lists) to bigWidget, and refusing one whose lists are reversed.
func BenchmarkLinearApply(b *testing.B) {
	sorted := func(n int) string {
		tags := make([]string, n)
		for i := range tags {
			tags[i] = fmt.Sprintf(`"%06d"`, i)
		}
		return "[" + strings.Join(tags, ",") + "]"
	}
	fm := widgetManager(b)
	live := obj(b, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u"},"spec":{"size":1,"tags":`+sorted(60000)+`}}`)
	if err := fm.Update(nil, live, "m", "", t0); err != nil {
		b.Fatal(err)
	}
	live = storedForm(b, live)
	b.Run("sorted", func(b *testing.B) {
		cfg := obj(b, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"tags":`+sorted(140000)+`,"labels":`+reversedLabels(10000)+`}}`)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fm.Apply(live, cfg, ApplyOptions{Manager: "a", Force: true, Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		cfg := obj(b, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"tags":`+reversedTags(140000)+`}}`)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fm.Apply(live, cfg, ApplyOptions{Manager: "a", Force: true, Now: t0}); err == nil {
				b.Fatal("applied")
			}
		}
	})
}

// BenchmarkLinearStrategic: a strategic merge patch of 50,000 elements, half
// of them deletions, on a list of 50,000.
func BenchmarkLinearStrategic(b *testing.B) {
	s := mustSchema(b, smpSchema)
	orig, p := strategicDeletes(b, 50000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Strategic(orig, p, s); err != nil {
			b.Fatal(err)
		}
	}
}

// jsonObject decodes a JSON object (obj goes through YAML, slow for
// megabytes and limited in depth).
func jsonObject(tb testing.TB, s string) map[string]any {
	v, _, err := codec.DecodeJSON([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return v.(map[string]any)
}

// strategicNested is an object whose spec.extra nests n maps and a patch
// adding a field at the bottom.
func strategicNested(tb testing.TB, n int) (orig, p map[string]any) {
	chain := func(leaf string) string { return strings.Repeat(`{"a":`, n) + leaf + strings.Repeat(`}`, n) }
	return jsonObject(tb, `{"spec":{"extra":`+chain(`{"x":1}`)+`}}`), jsonObject(tb, `{"spec":{"extra":`+chain(`{"y":1}`)+`}}`)
}

// strategicSameKey is a patch of n elements of a merge list with the same
// key, each adding a field.
func strategicSameKey(tb testing.TB, n int) (orig, p map[string]any) {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"c","f%06d":1}`, i)
	}
	return jsonObject(tb, `{"spec":{"containers":[{"name":"c"}]}}`), jsonObject(tb, `{"spec":{"containers":[`+sb.String()+`]}}`)
}

// BenchmarkLinearStrategicCopies: strategic merge patches that copied the
// current value once per level of nesting (9,000 levels, the most a body
// may nest) and once per element with the same key (120,000 of them, a
// 3 MiB body).
func BenchmarkLinearStrategicCopies(b *testing.B) {
	s := mustSchema(b, smpSchema)
	for _, tc := range []struct {
		name string
		mk   func(testing.TB, int) (map[string]any, map[string]any)
		n    int
	}{{"nested", strategicNested, 9000}, {"sameKey", strategicSameKey, 120000}} {
		b.Run(tc.name, func(b *testing.B) {
			orig, p := tc.mk(b, tc.n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Strategic(orig, p, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// frontInserts is a JSON patch of n operations inserting at the front of
// spec.tags.
func frontInserts(n int) []byte {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"op":"add","path":"/spec/tags/0","value":"x%05d"}`, i)
	}
	return []byte("[" + strings.Join(ops, ",") + "]")
}

// BenchmarkLinearJSONPatch and BenchmarkLinearMergePatch patch a document of
// about 1.4 MB: as many operations inserting at the front of a list of
// 140,000 as MaxJSONPatchWork allows, and 10,000 (refused); a merge patch
// replacing the list and adding to a map.
func BenchmarkLinearJSONPatch(b *testing.B) {
	doc := []byte(`{"spec":{"tags":` + reversedTags(140000) + `}}`)
	for _, n := range []int{MaxJSONPatchWork / len(doc), MaxJSONPatchOperations} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := frontInserts(n)
			b.ReportAllocs()
			for b.Loop() {
				_, _, err := JSONPatch(doc, p, 0)
				if refused := n*len(doc) > MaxJSONPatchWork; (err != nil) != refused {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLinearMergePatch(b *testing.B) {
	doc := []byte(`{"spec":{"tags":` + reversedTags(140000) + `,"labels":` + reversedLabels(1000) + `}}`)
	p := []byte(`{"spec":{"tags":` + reversedTags(140000) + `,"labels":` + reversedLabels(30000) + `}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := MergePatch(doc, p); err != nil {
			b.Fatal(err)
		}
	}
}

// mergeLabels is a stored widget with n labels and a merge patch that
// deletes them all and adds n others.
func mergeLabels(tb testing.TB, n int) (cur map[string]any, p []byte) {
	var sb strings.Builder
	sb.WriteString(`{"spec":{"labels":{`)
	for i := range n {
		fmt.Fprintf(&sb, `"l%06d":null,"m%06d":"v",`, i, i)
	}
	sb.WriteString(`"n":{"a":null,"b":[{"c":null}]}}}}`)
	return obj(tb, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"labels":`+reversedLabels(n)+`}}`), []byte(sb.String())
}

// BenchmarkLinearMerge: a merge patch of a 3 MiB body adding 210,000 labels
// to bigWidget (1.4 MB), and one of 100,000 labels deleting as many.
func BenchmarkLinearMerge(b *testing.B) {
	live := bigWidget(b)
	add := []byte(`{"spec":{"labels":` + reversedLabels(210000) + `}}`)
	if len(add) > 3<<20 {
		b.Fatalf("the patch has %d bytes", len(add))
	}
	cur, swap := mergeLabels(b, 100000)
	for _, tc := range []struct {
		name string
		cur  map[string]any
		p    []byte
	}{{"add", live, add}, {"swap", cur, swap}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Merge(tc.cur, tc.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bigFieldsV1 is a fieldsV1 of n keys under f:spec.
func bigFieldsV1(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"f:spec":{`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"f:k%06d":{}`, n-i)
	}
	sb.WriteString(`}}`)
	return sb.String()
}

// storedForm is o as the store hands it back: JSON decoded again.
func storedForm(tb testing.TB, o map[string]any) map[string]any {
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	return obj(tb, string(b))
}

// strategicDeletes is an object with a merge list of n containers and a
// patch deleting every other one and changing the others.
func strategicDeletes(tb testing.TB, n int) (orig, p map[string]any) {
	cs := make([]string, n)
	ps := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf(`{"name":"c%06d","image":"i"}`, i)
		if i%2 == 0 {
			ps[i] = fmt.Sprintf(`{"$patch":"delete","name":"c%06d"}`, i)
		} else {
			ps[i] = fmt.Sprintf(`{"name":"c%06d","image":"j"}`, i)
		}
	}
	return obj(tb, `{"spec":{"containers":[`+strings.Join(cs, ",")+`]}}`), obj(tb, `{"spec":{"containers":[`+strings.Join(ps, ",")+`]}}`)
}

// A strategic merge patch's deletions take one pass over the list: the
// allocations grow linearly with the list and the deletions (each pass
// over the list allocated one element key per element: quadratic).
func TestStrategicDeletesLinear(t *testing.T) {
	strategicAllocsLinear(t, strategicDeletes, 250, "elements")
}

// strategicAllocsLinear checks that the allocations of the strategic merge
// patches build makes grow linearly, from n to 8n.
func strategicAllocsLinear(t *testing.T, build func(testing.TB, int) (map[string]any, map[string]any), n int, what string) {
	t.Helper()
	s := mustSchema(t, smpSchema)
	allocs := func(n int) float64 {
		orig, p := build(t, n)
		return testing.AllocsPerRun(2, func() {
			if _, err := Strategic(orig, p, s); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(n), allocs(8*n)
	if r := large / small; r > 12 {
		t.Fatalf("allocations grow %.1f times for 8 times the %s (%.0f, %.0f): not linear", r, what, small, large)
	}
}

// An apply whose lists are far out of order is refused (413) before
// structured-merge-diff sorts them by insertion.
func TestApplyRefusesDisorder(t *testing.T) {
	fm := widgetManager(t)
	cfg := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"tags":`+reversedTags(10000)+`}}`)
	_, err := fm.Apply(nil, cfg, ApplyOptions{Manager: "a", Now: t0})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("apply of 10,000 reversed tags: %v, want a 413", err)
	}
	// The same tags in order, or few enough out of order, apply.
	cfg = obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"tags":`+reversedTags(2000)+`}}`)
	if _, err := fm.Apply(nil, cfg, ApplyOptions{Manager: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
}

// A JSON patch whose operations times the document's size pass
// MaxJSONPatchWork is refused before any operation runs.
func TestJSONPatchWorkBound(t *testing.T) {
	doc := []byte(`{"spec":{"tags":` + reversedTags(20000) + `}}`)
	n := MaxJSONPatchWork / len(doc)
	if _, _, err := JSONPatch(doc, frontInserts(n), 0); err != nil {
		t.Fatalf("%d operations: %v", n, err)
	}
	_, _, err := JSONPatch(doc, frontInserts(n+1), 0)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d operations: %v, want a 413", n+1, err)
	}
}

// The disorder count is the number of pairs out of order.
func TestDisorder(t *testing.T) {
	fm := widgetManager(t)
	fm.init()
	w := fieldsWalker{s: fm.parser.Schema}
	for _, tc := range []struct {
		tags string
		want int
	}{{`[]`, 0}, {`["a","b","c"]`, 0}, {`["c","b","a"]`, 3}, {`["b","a","c","a"]`, 3}, {reversedTags(100), 4950}} {
		o := obj(t, `{"spec":{"tags":`+tc.tags+`,"ports":[{"name":"b","port":1},{"name":"a","port":2}]}}`)
		if got := w.disorder(o, fm.parser.TypeRef, 1<<30); got != tc.want+1 {
			t.Errorf("disorder of tags %.40s and 2 reversed ports = %d, want %d", tc.tags, got, tc.want+1)
		}
	}
}

// A merge patch is linear in the patch and the object: the allocations of
// one that deletes n labels and adds n grow as n does.
func TestMergeLinear(t *testing.T) {
	allocs := func(n int) float64 {
		cur, p := mergeLabels(t, n)
		return testing.AllocsPerRun(2, func() {
			if _, _, err := Merge(cur, p); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(1000), allocs(8000)
	if r := large / small; r > 10 {
		t.Fatalf("allocations grow %.1f times for 8 times the keys (%.0f, %.0f): not linear", r, small, large)
	}
}

// newLabelsConfig is an apply configuration of bigWidget's kind setting n
// labels, a map the object does not have yet.
func newLabelsConfig(tb testing.TB, n int) map[string]any {
	return obj(tb, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"labels":`+reversedLabels(n)+`}}`)
}

// BenchmarkLinearApplyNewMap: applying 100,000 labels (a 1.4 MB
// configuration) to an object without labels, and creating one with them.
func BenchmarkLinearApplyNewMap(b *testing.B) {
	fm := widgetManager(b)
	live := obj(b, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u"},"spec":{"size":1}}`)
	if err := fm.Update(nil, live, "m", "", t0); err != nil {
		b.Fatal(err)
	}
	live = storedForm(b, live)
	cfg := newLabelsConfig(b, 100000)
	for _, tc := range []struct {
		name string
		live map[string]any
	}{{"update", live}, {"create", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fm.Apply(tc.live, cfg, ApplyOptions{Manager: "a", Force: true, Now: t0}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An apply compares the object with the merged result, a plain value:
// where the object has no map, structured-merge-diff walks the result's
// alone, adding its keys one at a time to a sorted set. Zip hands on the
// other map's values ordered, so that such a map iterates in key order.
func TestOrderedZipOrdersOther(t *testing.T) {
	labels := map[string]any{}
	for i := range 300 {
		labels[fmt.Sprintf("k%03d", i)] = "v"
	}
	lhs := newOrderedValue(map[string]any{"a": "x", "both": map[string]any{"z": "1"}}).AsMap()
	rhs := value.NewValueInterface(map[string]any{"labels": labels, "both": labels}).AsMap()
	seen := 0
	lhs.Zip(rhs, value.Unordered, func(key string, _, r value.Value) bool {
		if r == nil {
			return true
		}
		seen++
		var keys []string
		value.MapZip(nil, r.AsMap(), value.Unordered, func(k string, _, _ value.Value) bool {
			keys = append(keys, k)
			return true
		})
		if !slices.IsSorted(keys) {
			t.Errorf("%s: the other map's keys go out of order", key)
		}
		return true
	})
	if seen != 2 {
		t.Fatalf("visited %d maps of the other side, want 2", seen)
	}
}

// A strategic merge patch merges into its copy of the object in place: the
// allocations grow linearly with the nesting (a copy of the current value
// at each level allocated each map below it again: quadratic).
func TestStrategicNestedLinear(t *testing.T) {
	strategicAllocsLinear(t, strategicNested, 100, "nesting")
}

// The bytes allocated by a patch of n elements with the same key grow
// linearly (a copy of the element per patch element: quadratic).
func TestStrategicSameKeyLinear(t *testing.T) {
	s := mustSchema(t, smpSchema)
	allocated := func(n int) float64 {
		orig, p := strategicSameKey(t, n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Strategic(orig, p, s); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc - before.TotalAlloc)
	}
	small, large := allocated(500), allocated(4000)
	if r := large / small; r > 12 {
		t.Fatalf("bytes allocated grow %.1f times for 8 times the elements (%.0f, %.0f): not linear", r, small, large)
	}
}
