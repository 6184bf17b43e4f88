package registry

import (
	"errors"
	"fmt"
	"testing"
)

// TestNamespaceStateMemo: the namespace check remembers its answer per
// revision, recomputes it for a new revision, and stays bounded.
func TestNamespaceStateMemo(t *testing.T) {
	enc := func(md map[string]any) []byte {
		b, err := encodeStored(Object{"apiVersion": "v1", "kind": "Namespace", "metadata": md})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	live := enc(map[string]any{"name": "a"})
	term := enc(map[string]any{"name": "a", "deletionTimestamp": "2026-11-22T10:00:00Z"})
	var r Registry
	steps := []struct {
		value []byte
		rev   int64
		want  error
	}{
		{live, 5, nil},
		{term, 6, errNamespaceTerminating}, // a new revision is looked at
		{live, 6, errNamespaceTerminating}, // the same revision is remembered
		{live, 7, nil},
	}
	for i, st := range steps {
		if err := r.namespaceStateOf("a", st.value, st.rev); !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("step %d: %v, want %v", i, err, st.want)
		}
	}
	corrupt := []byte(`{"metadata":{"deletionTimestamp":`) // not a stored value
	if err := r.namespaceStateOf("b", corrupt, 1); err == nil || errors.Is(err, errNamespaceTerminating) {
		t.Fatalf("a corrupt value: %v", err)
	}
	if _, ok := r.nsStates.Load("b"); ok {
		t.Fatal("a corrupt value's error was remembered")
	}
	for i := range nsStateMemoSize + 10 {
		if err := r.namespaceStateOf(fmt.Sprint("ns-", i), live, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.nsStateCount.Load(); n > nsStateMemoSize {
		t.Fatalf("the memo holds %d namespaces, bound %d", n, nsStateMemoSize)
	}
}
