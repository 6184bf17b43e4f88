package registry

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestWriteResultsOwnTheirBytes checks that creates and updates, which
// encode into reused buffers (storedBuffers), return JSON that no later
// write overwrites, and store values that later writes leave intact.
func TestWriteResultsOwnTheirBytes(t *testing.T) {
	ctx := t.Context()
	st := configMapStore(t)

	type written struct {
		name string
		json []byte // the result's JSON
		copy []byte // a copy taken when the write returned
	}
	var all []written
	keep := func(name string, r *Result) {
		all = append(all, written{name, r.JSON, bytes.Clone(r.JSON)})
	}
	value := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 50+i*97%3000) }
	for i := range 30 {
		name := fmt.Sprintf("cm-%d", i)
		r, err := st.Create(ctx, "ns", Object{"metadata": map[string]any{"name": name}, "data": map[string]any{"v": value(i)}}, WriteOptions{FieldManager: "test"})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		keep(name, r)
	}
	for i := range 30 {
		name := fmt.Sprintf("cm-%d", i)
		r, err := st.Update(ctx, "ns", name, Object{"metadata": map[string]any{"name": name}, "data": map[string]any{"v": value(i + 7)}}, WriteOptions{FieldManager: "test"})
		if err != nil {
			t.Fatalf("update %s: %v", name, err)
		}
		keep(name, r)
	}
	for _, w := range all {
		if !bytes.Equal(w.json, w.copy) {
			t.Fatalf("the result of a write of %s changed after later writes:\n%.200s\nwas\n%.200s", w.name, w.json, w.copy)
		}
	}
	// The latest result of each object is what a read returns.
	for _, w := range all[30:] {
		got, err := st.Get(ctx, "ns", w.name, "")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w.copy) {
			t.Fatalf("get %s:\n%.200s\nwant the update's result\n%.200s", w.name, got, w.copy)
		}
	}
}
