package meta

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Footprint accounts for what parsed selectors really hold: the heap kept
// by many parsed copies of one selector, per copy, is within a factor of
// two of it.
func TestSelectorFootprint(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"exists", strings.Repeat("a,", 2000) + "a"},
		{"not-equals", strings.Repeat("app!=web,", 2000) + "a"},
		{"in", "tier in (" + distinctValues(2000) + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const copies = 100
			kept := make([]LabelSelector, copies)
			before := heapInUse()
			for i := range kept {
				s, err := ParseLabelSelector(tc.text)
				if err != nil {
					t.Fatal(err)
				}
				kept[i] = s
			}
			per := float64(heapInUse()-before) / copies
			fp := float64(kept[0].Footprint())
			runtime.KeepAlive(kept)
			if per > 2*fp || per < fp/2 {
				t.Errorf("a parsed selector of %d bytes holds %.0f bytes, Footprint says %.0f", len(tc.text), per, fp)
			}
		})
	}
	fs, err := ParseFieldSelector(strings.Repeat(`metadata.name=a\,b,`, 100) + "x=y")
	if err != nil {
		t.Fatal(err)
	}
	if got, min := fs.Footprint(), 101*48; got < min {
		t.Errorf("field selector footprint %d, want at least %d", got, min)
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func distinctValues(n int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = "v" + strconv.Itoa(i)
	}
	return strings.Join(vs, ",")
}
