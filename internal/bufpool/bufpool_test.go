package bufpool

import "testing"

// TestPool checks that buffers come out empty and that a buffer above the
// bound given to Put never comes out again.
func TestPool(t *testing.T) {
	p := New(16)
	for range 100 {
		b := p.Get()
		if len(*b) != 0 {
			t.Fatalf("Get returned %d bytes", len(*b))
		}
		*b = append(*b, make([]byte, 100)...) // grows past 64
		p.Put(b, 64)
		small := p.Get()
		*small = append(*small, "kept"...)
		p.Put(small, 64)
	}
	for range 100 {
		b := p.Get()
		if cap(*b) > 64 || len(*b) != 0 {
			t.Fatalf("Get returned a buffer of len %d, cap %d", len(*b), cap(*b))
		}
	}
}
