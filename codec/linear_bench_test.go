package codec

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkLinearDecodeJSON decodes bodies of about 3 MiB (the body size
// limit): an object of 200,000 keys in reverse order, a list of 300,000
// numbers, and 300,000 nested lists.
func BenchmarkLinearDecodeJSON(b *testing.B) {
	var keys, list strings.Builder
	keys.WriteString("{")
	for i := range 200000 {
		if i > 0 {
			keys.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"k%07d":"v"`, 200000-i)
	}
	keys.WriteString("}")
	list.WriteString("[")
	for i := range 300000 {
		if i > 0 {
			list.WriteByte(',')
		}
		fmt.Fprintf(&list, "%d", 1000000+i)
	}
	list.WriteString("]")
	for name, js := range map[string]string{
		"keys":   keys.String(),
		"list":   list.String(),
		"nested": strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
	} {
		b.Run(name, func(b *testing.B) {
			data := []byte(js)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
