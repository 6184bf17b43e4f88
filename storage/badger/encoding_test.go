package badger

import (
	"bytes"
	"math"
	"testing"
)

// encodeData writes the header in front of the value when the buffer has
// room (one buffer for the stored data value), and decodes to the same
// value, create revision and parts either way.
func TestEncodeDataRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 2500, chunkSize, chunkSize + 1, 3*chunkSize + 5} {
		for _, createRev := range []int64{1, 300, math.MaxInt64} {
			value := bytes.Repeat([]byte{'v'}, size)
			for i := range value {
				value[i] = byte(i * 7)
			}
			for _, room := range []int{dataHeaderRoom, 0} {
				buf := append(make([]byte, room), value...)
				data, chunks := encodeData(createRev, buf, room)
				hdrLen := len(data) - min(size, chunkSize)
				if room > 0 && &data[0] != &buf[room-hdrLen] {
					t.Errorf("size %d rev %d: the data value is not in the buffer", size, createRev)
				}
				h, err := decodeData(data)
				if err != nil {
					t.Fatalf("size %d rev %d room %d: %v", size, createRev, room, err)
				}
				if h.createRev != createRev || h.parts != len(chunks)+1 {
					t.Fatalf("size %d rev %d room %d: header %+v with %d chunks", size, createRev, room, h, len(chunks))
				}
				got := append([]byte{}, h.part0...)
				for _, c := range chunks {
					got = append(got, c...)
				}
				if !bytes.Equal(got, value) {
					t.Fatalf("size %d rev %d room %d: value differs", size, createRev, room)
				}
				if !bytes.Equal(buf[room:], value) {
					t.Fatalf("size %d rev %d room %d: the value in the buffer changed", size, createRev, room)
				}
			}
		}
	}
}
