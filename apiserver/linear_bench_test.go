package apiserver

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkLinearWrites runs, through ServeHTTP, the writes of the
// hardening report, at the size limits: a create of a widget whose one
// managedFields entry has 100,000 keys (1.4 MB), a 30-byte merge patch of
// it, and a create of 200,000 tags in reverse order (1.8 MB, refused as
// larger than a stored object may be).
func BenchmarkLinearWrites(b *testing.B) {
	var fv strings.Builder
	fv.WriteString(`{"f:spec":{`)
	for i := range 100000 {
		if i > 0 {
			fv.WriteByte(',')
		}
		fmt.Fprintf(&fv, `"f:k%05d":{}`, i)
	}
	fv.WriteString(`}}`)
	mfWidget := func(name string) string {
		return `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"` + name + `","managedFields":[{"manager":"m","operation":"Update","apiVersion":"example.dev/v1","fieldsType":"FieldsV1","fieldsV1":` + fv.String() + `}]},"spec":{"size":1}}`
	}
	tags := make([]string, 200000)
	for i := range tags {
		tags[i] = fmt.Sprintf(`"%06d"`, len(tags)-i)
	}
	tagsWidget := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"tags"},"spec":{"size":1,"tags":[` + strings.Join(tags, ",") + `]}}`

	b.Run("managedFieldsCreate", func(b *testing.B) {
		api := patchBenchServer(b)
		m := meterCPU(b)
		for i := 0; b.Loop(); i++ {
			serve(b, api, "POST", wdPath, mfWidget(fmt.Sprintf("w-%06d", i)), 201)
		}
		m.stop()
	})
	b.Run("managedFieldsMergePatch", func(b *testing.B) {
		api := patchBenchServer(b)
		serve(b, api, "POST", wdPath, mfWidget("w"), 201)
		m := meterCPU(b)
		for i := 0; b.Loop(); i++ {
			servePatch(b, api, wdPath+"/w", "application/merge-patch+json", fmt.Sprintf(`{"spec":{"size":%d}}`, i+2), 200)
		}
		m.stop()
	})
	b.Run("reversedTagsTooLarge", func(b *testing.B) {
		api := patchBenchServer(b)
		m := meterCPU(b)
		for b.Loop() {
			serve(b, api, "POST", wdPath, tagsWidget, 413)
		}
		m.stop()
	})
}

// BenchmarkLinearLabels runs, through ServeHTTP, a merge patch and an apply
// that each bring a widget 100,000 labels (1.4 MB bodies), merged into its
// one label and applied where it has none:
// the cost before the result is stored, or refused as too large, grows
// with the labels linearly.
func BenchmarkLinearLabels(b *testing.B) {
	var ls strings.Builder
	for i := range 100000 {
		if i > 0 {
			ls.WriteByte(',')
		}
		fmt.Fprintf(&ls, `"l%06d":"v"`, 100000-i)
	}
	labels := `{` + ls.String() + `}`
	b.Run("mergePatch", func(b *testing.B) {
		api := patchBenchServer(b)
		serve(b, api, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"b"}},"spec":{"size":1}}`, 201)
		m := meterCPU(b)
		for b.Loop() {
			servePatch(b, api, wdPath+"/w", "application/merge-patch+json", `{"metadata":{"labels":`+labels+`}}`, 413)
		}
		m.stop()
	})
	b.Run("apply", func(b *testing.B) {
		api := patchBenchServer(b)
		serve(b, api, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`, 201)
		m := meterCPU(b)
		for b.Loop() {
			servePatch(b, api, wdPath+"/w?fieldManager=a&force=true", "application/apply-patch+yaml", `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":`+labels+`}}`, 413)
		}
		m.stop()
	})
}
