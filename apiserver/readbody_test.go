package apiserver

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAllSized checks readAllSized reads what io.ReadAll reads, whatever
// the declared length and the buffer it is given to reuse (none, too small,
// large enough and holding an earlier body), and keeps the body limit.
func TestReadAllSized(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	for _, declared := range []int64{-1, 0, 1, 100, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 1 << 20} {
		for _, oneByte := range []bool{false, true} {
			for _, buf := range [][]byte{nil, make([]byte, 7, 10), []byte(strings.Repeat("stale", 1000))} {
				var r io.Reader = strings.NewReader(body)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				got, err := readAllSized(buf, r, declared, 1<<16)
				if err != nil || !bytes.Equal(got, []byte(body)) {
					t.Fatalf("declared %d, one byte %v, buffer of %d: %d bytes, %v", declared, oneByte, cap(buf), len(got), err)
				}
			}
		}
	}
	// Over the limit: the MaxBytesReader error, as with io.ReadAll.
	limit := int64(len(body) - 10)
	r := http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(body)), limit)
	if _, err := readAllSized(nil, r, limit, limit); err == nil {
		t.Fatal("a body over the limit was read without an error")
	}
	// A reader failing midway reports its error.
	if _, err := readAllSized(nil, iotest.TimeoutReader(strings.NewReader(body)), int64(len(body)), 1<<16); err == nil {
		t.Fatal("a failing reader's error was lost")
	}
}
