package badger

import (
	"bytes"
	"math"
	"testing"
)

// encodeData writes the header into the room in front of the value (one
// buffer for the stored data value), leaves the value as it was, and decodes
// to the same value, create revision and parts.
func TestEncodeDataRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 2500, chunkSize, chunkSize + 1, 3*chunkSize + 5} {
		for _, createRev := range []int64{1, 300, math.MaxInt64} {
			value := bytes.Repeat([]byte{'v'}, size)
			for i := range value {
				value[i] = byte(i * 7)
			}
			buf := append(make([]byte, dataHeaderRoom), value...)
			data, chunks := encodeData(createRev, buf)
			hdrLen := len(data) - min(size, chunkSize)
			if &data[0] != &buf[dataHeaderRoom-hdrLen] {
				t.Errorf("size %d rev %d: the data value is not in the buffer", size, createRev)
			}
			h, err := decodeData(data)
			if err != nil {
				t.Fatalf("size %d rev %d: %v", size, createRev, err)
			}
			if h.createRev != createRev || h.parts != len(chunks)+1 {
				t.Fatalf("size %d rev %d: header %+v with %d chunks", size, createRev, h, len(chunks))
			}
			got := append([]byte{}, h.part0...)
			for _, c := range chunks {
				got = append(got, c...)
			}
			if !bytes.Equal(got, value) {
				t.Fatalf("size %d rev %d: value differs", size, createRev)
			}
			if !bytes.Equal(buf[dataHeaderRoom:], value) {
				t.Fatalf("size %d rev %d: the value in the buffer changed", size, createRev)
			}
		}
	}
}
