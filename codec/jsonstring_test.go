package codec

import (
	"bytes"
	"encoding/json"
	"testing"
)

func marshalJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendJSONStringEveryByte puts every byte value at every offset of
// strings long enough for the eight-bytes-at-a-time scan.
func TestAppendJSONStringEveryByte(t *testing.T) {
	for n := 7; n <= 25; n += 9 {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := bytes.Repeat([]byte{'a'}, n)
				b[pos] = byte(c)
				s := string(b)
				if got, want := AppendJSONString(nil, s), marshalJSON(t, s); !bytes.Equal(got, want) {
					t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
				}
			}
		}
	}
	for _, s := range []string{"abcdefgh\u2028ijklmnop", "abcdefg\u00e9hijklmnop", "0123456789abcdef😀", "0123456\xe2\x80\xa8789"} {
		if got, want := AppendJSONString(nil, s), marshalJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

func BenchmarkAppendJSONString2K(b *testing.B) {
	s := string(bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 64))
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendJSONString(buf[:0], s)
	}
}

// TestMayNeedEscapeExact places every byte value at every position of a
// word of safe bytes (including the neighbours of the escaped characters,
// which the bit tricks must not confuse with them): the word must be
// flagged exactly when the byte needs attention.
func TestMayNeedEscapeExact(t *testing.T) {
	needs := func(c byte) bool {
		return c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	for _, bg := range []byte{'a', '=', '?', '#', '\'', '$', '%', ';', ']', '[', '^', '~', ' ', 0x7f} {
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c++ {
				w := bytes.Repeat([]byte{bg}, 8)
				w[pos] = byte(c)
				if got := mayNeedEscape(load8(string(w))); got != needs(byte(c)) {
					t.Fatalf("mayNeedEscape(%q) = %v, want %v", w, got, needs(byte(c)))
				}
			}
		}
	}
}
