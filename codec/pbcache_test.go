package codec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func cmJSON(i int, value string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"},"data":{"v":%q}}`, i, 100+i, value))
}

// Cached encodings are the transcoder's, byte for byte, and a changed
// object is a miss.
func TestProtobufCache(t *testing.T) {
	c := NewProtobufCache(1 << 20)
	var tr Transcoder
	for round := 0; round < 2; round++ {
		for i := 0; i < 50; i++ {
			data := cmJSON(i, "x")
			got, err := c.AppendProtobuf(&tr, []byte("prefix"), configMap, data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := configMap.AppendProtobuf([]byte("prefix"), data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d item %d: cached encoding differs", round, i)
			}
		}
	}
	if n, _ := c.Len(); n != 50 {
		t.Fatalf("%d entries, want 50", n)
	}
	changed, _ := c.AppendProtobuf(&tr, nil, configMap, cmJSON(0, "y"))
	want, _ := configMap.AppendProtobuf(nil, cmJSON(0, "y"))
	if !bytes.Equal(changed, want) {
		t.Fatal("a changed object got a stale encoding")
	}
	// Errors are not cached and come back each time.
	for k := 0; k < 2; k++ {
		if _, err := c.AppendProtobuf(&tr, nil, configMap, []byte(`{"data":5}`)); err == nil {
			t.Fatal("invalid object encoded")
		}
	}
	// A nil cache transcodes.
	var nilCache *ProtobufCache
	if got, err := nilCache.AppendProtobuf(&tr, nil, configMap, cmJSON(1, "x")); err != nil || len(got) == 0 {
		t.Fatalf("nil cache: %v", err)
	}
}

// The cache stays within its budget, forgetting the oldest first.
func TestProtobufCacheBound(t *testing.T) {
	big := strings.Repeat("z", 1000)
	c := NewProtobufCache(64 << 10)
	var tr Transcoder
	for i := 0; i < 5000; i++ {
		if _, err := c.AppendProtobuf(&tr, nil, configMap, cmJSON(i, big)); err != nil {
			t.Fatal(err)
		}
		if _, b := c.Len(); b > 64<<10 {
			t.Fatalf("after %d inserts the cache holds %d bytes", i+1, b)
		}
	}
	n, _ := c.Len()
	if n == 0 || n > 70 {
		t.Fatalf("%d entries of about 1 KiB in a 64 KiB cache", n)
	}
	// The newest is still there: encoding it again is a hit (no growth).
	before, _ := c.Len()
	if _, err := c.AppendProtobuf(&tr, nil, configMap, cmJSON(4999, big)); err != nil {
		t.Fatal(err)
	}
	if after, _ := c.Len(); after != before {
		t.Fatalf("re-encoding the newest entry changed the cache: %d -> %d entries", before, after)
	}
}

func BenchmarkProtobufCache(b *testing.B) {
	data := cmJSON(1, strings.Repeat("p", 2000))
	var tr Transcoder
	b.Run("transcode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		var dst []byte
		for i := 0; i < b.N; i++ {
			dst, _ = tr.AppendProtobuf(dst[:0], configMap, data)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := NewProtobufCache(1 << 20)
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		var dst []byte
		for i := 0; i < b.N; i++ {
			dst, _ = c.AppendProtobuf(&tr, dst[:0], configMap, data)
		}
	})
}
