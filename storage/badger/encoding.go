package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Key layout. Every Badger key starts with a one-byte namespace; every Badger
// version is a kapi revision (managed mode: the commit timestamp is chosen by
// kapi, never by Badger).
//
//	'd' + user key       data: one Badger version per write of the key; a
//	                     delete is a Badger delete marker (an MVCC tombstone)
//	                     at the revision of the delete. Value: dataValue.
//	'l' + be64(revision) change log: one entry per revision, written in the
//	                     same Badger transaction as the data version it
//	                     describes. Value: logValue.
//	'c' + user key +     value chunks: values longer than chunkSize are split;
//	be16(i)              part 0 lives in the data key, part i (i >= 1) in
//	                     chunk key i, at the same revision as the data key.
//	'm' + name           metadata: the format marker (at revision 1) and the
//	                     compacted revision (at that revision).
//
// Chunking keeps every Badger value below Badger's value threshold (1 MiB),
// so every value lives in the LSM tree and its write-ahead log and Badger's
// value log is never written. See sync.go for why that matters.
const (
	nsData  = 'd'
	nsLog   = 'l'
	nsChunk = 'c'
	nsMeta  = 'm'
)

// chunkSize is the largest value part stored in one Badger value. With the
// data header it stays below Badger's 1 MiB value threshold.
const chunkSize = 1<<20 - 4<<10

var (
	metaFormatKey    = []byte{nsMeta, 'f', 'o', 'r', 'm', 'a', 't'}
	metaCompactedKey = []byte{nsMeta, 'c', 'o', 'm', 'p', 'a', 'c', 't', 'e', 'd'}

	// formatMarker identifies a kapi storage directory and its layout version.
	formatMarker = []byte("kapi-storage-badger/1")
)

// externalMagic is stored by Badger in its MANIFEST; Badger refuses to open a
// directory whose manifest carries another number, so a foreign Badger
// database is rejected before Badger touches anything else in it.
const externalMagic uint16 = 0x6b61 // "ka"

// formatRevision is the revision of the format marker, the first revision of
// every store. User writes start at formatRevision+1.
const formatRevision = 1

func dataKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = nsData
	copy(k[1:], key)
	return k
}

func logKey(rev int64) []byte {
	var k [9]byte
	k[0] = nsLog
	binary.BigEndian.PutUint64(k[1:], uint64(rev))
	return k[:]
}

func parseLogKey(k []byte) (int64, error) {
	if len(k) != 9 || k[0] != nsLog {
		return 0, fmt.Errorf("malformed change-log key %x", k)
	}
	return int64(binary.BigEndian.Uint64(k[1:])), nil
}

func chunkKey(key []byte, i int) []byte {
	k := make([]byte, 1+len(key)+2)
	k[0] = nsChunk
	copy(k[1:], key)
	binary.BigEndian.PutUint16(k[1+len(key):], uint16(i))
	return k
}

// Data values:
//
//	inline:  byte 1, uvarint create revision, the user value
//	chunked: byte 2, uvarint create revision, uvarint number of parts n, part 0
//	         (parts 1..n-1 are in chunk keys)
const (
	dataInline  = 1
	dataChunked = 2
)

// dataHeaderRoom is the room a write leaves in front of its value for the
// data header (see write), so that the data value is one buffer.
const dataHeaderRoom = 1 + 2*binary.MaxVarintLen64

// encodeData returns the data key's value and the chunks (parts 1..n-1) of
// the value buf[dataHeaderRoom:]. The header is written into the room just
// before the value, so the data value aliases buf; so do the chunks.
func encodeData(createRev int64, buf []byte) (data []byte, chunks [][]byte) {
	value := buf[dataHeaderRoom:]
	var hdr [dataHeaderRoom]byte
	h := hdr[:0]
	n := 1
	if len(value) <= chunkSize {
		h = append(h, dataInline)
		h = binary.AppendUvarint(h, uint64(createRev))
	} else {
		n = (len(value) + chunkSize - 1) / chunkSize
		h = append(h, dataChunked)
		h = binary.AppendUvarint(h, uint64(createRev))
		h = binary.AppendUvarint(h, uint64(n))
	}
	start, end := dataHeaderRoom-len(h), dataHeaderRoom+min(len(value), chunkSize)
	copy(buf[start:dataHeaderRoom], h)
	data = buf[start:end:end]
	for i := 1; i < n; i++ {
		chunks = append(chunks, value[i*chunkSize:min((i+1)*chunkSize, len(value))])
	}
	return data, chunks
}

// dataHeader is a decoded data value: parts > 1 means part0 is followed by
// parts-1 chunks.
type dataHeader struct {
	createRev int64
	parts     int
	part0     []byte // aliases the decoded value
}

func decodeData(b []byte) (dataHeader, error) {
	if len(b) < 2 || (b[0] != dataInline && b[0] != dataChunked) {
		return dataHeader{}, errors.New("malformed data value")
	}
	kind := b[0]
	cr, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return dataHeader{}, errors.New("malformed data value: bad create revision")
	}
	b = b[1+n:]
	h := dataHeader{createRev: int64(cr), parts: 1}
	if kind == dataChunked {
		p, n := binary.Uvarint(b)
		if n <= 0 || p < 2 || p > 1<<16-1 {
			return dataHeader{}, errors.New("malformed data value: bad part count")
		}
		h.parts, b = int(p), b[n:]
	}
	h.part0 = b
	return h, nil
}

// logValue: version byte 1, op byte, uvarint previous revision, uvarint
// create revision, then the user key. Values are not duplicated in the log:
// the value written at revision r is the data key's version r, and the
// previous value is the data key read at r-1.
type logEntry struct {
	op        byte // logPut or logDelete
	prevRev   int64
	createRev int64
	key       []byte
}

const (
	logVersion = 1
	logPut     = 'p'
	logDelete  = 'x'
)

func encodeLog(e logEntry) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(e.key))
	b = append(b, logVersion, e.op)
	b = binary.AppendUvarint(b, uint64(e.prevRev))
	b = binary.AppendUvarint(b, uint64(e.createRev))
	return append(b, e.key...)
}

// decodeLog decodes a log value; the returned key aliases b.
func decodeLog(b []byte) (logEntry, error) {
	if len(b) < 4 || b[0] != logVersion || (b[1] != logPut && b[1] != logDelete) {
		return logEntry{}, errors.New("malformed change-log value")
	}
	e := logEntry{op: b[1]}
	b = b[2:]
	pr, n := binary.Uvarint(b)
	if n <= 0 {
		return logEntry{}, errors.New("malformed change-log value: bad previous revision")
	}
	b = b[n:]
	cr, n := binary.Uvarint(b)
	if n <= 0 {
		return logEntry{}, errors.New("malformed change-log value: bad create revision")
	}
	e.prevRev, e.createRev, e.key = int64(pr), int64(cr), b[n:]
	return e, nil
}

func encodeRev(rev int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(rev))
}

func decodeRev(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("malformed revision value %x", b)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
