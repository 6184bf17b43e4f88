package badger

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/kapi-dev/kapi/storage"
)

// Backup stream layout:
//
//	magic      "kapibak\n"
//	header     uvarint length, JSON backupHeader
//	records    'p' put or 'x' delete marker: uvarint key length, the Badger
//	           key, uvarint version, and for a put uvarint value length, the
//	           Badger value
//	end        'E', uvarint number of records
//	checksum   SHA-256 of every byte before it
//
// Records are Badger versions of data and chunk keys exactly as the store
// holds them; a restore writes them back at their versions.
const backupMagic = "kapibak\n"

// backupFormat names this layout in the header.
const backupFormat = "kapi-backup-badger/1"

const (
	recPut    = 'p'
	recDelete = 'x'
	recEnd    = 'E'

	maxHeaderLen  = 64 << 10
	maxRecordKey  = 1 + maxKeyLimit + 2 // a chunk key of the longest user key
	maxRecordData = 4 << 20             // above any data value or chunk
)

// ErrBadBackup is wrapped by the errors of a backup that cannot be restored:
// truncated, corrupt, not a backup, or not the next link of a chain.
var ErrBadBackup = errors.New("unusable backup")

// backupHeader is a backup's description.
type backupHeader struct {
	Format      string `json:"format"`      // backupFormat
	StoreFormat string `json:"storeFormat"` // the store's formatMarker
	StoreID     string `json:"storeID"`     // the store backed up (metaIDKey)
	Revision    int64  `json:"revision"`    // the snapshot's revision
	Compacted   int64  `json:"compacted"`   // the oldest revision the history starts at
	Since       int64  `json:"since,omitempty"`
}

func (h backupHeader) info(bytes int64) storage.BackupInfo {
	return storage.BackupInfo{Revision: h.Revision, CompactedRevision: h.Compacted, Since: h.Since, Bytes: bytes}
}

// backupWriter encodes a backup stream onto w.
type backupWriter struct {
	w       *countingWriter
	bw      *bufio.Writer // over w and hash
	hash    hash.Hash
	records int64
	buf     []byte
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newBackupWriter(w io.Writer, h backupHeader) (*backupWriter, error) {
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	b := &backupWriter{w: &countingWriter{w: w}, hash: sha256.New()}
	b.bw = bufio.NewWriterSize(io.MultiWriter(b.w, b.hash), 256<<10)
	b.buf = append(b.buf, backupMagic...)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(hdr)))
	b.buf = append(b.buf, hdr...)
	_, err = b.bw.Write(b.buf)
	return b, err
}

// put writes one version of a Badger key: a value, or a delete marker when
// deleted.
func (b *backupWriter) put(key []byte, version uint64, deleted bool, value []byte) error {
	b.buf = b.buf[:0]
	if deleted {
		b.buf = append(b.buf, recDelete)
	} else {
		b.buf = append(b.buf, recPut)
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)))
	b.buf = append(b.buf, key...)
	b.buf = binary.AppendUvarint(b.buf, version)
	if !deleted {
		b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	}
	if _, err := b.bw.Write(b.buf); err != nil {
		return err
	}
	b.records++
	if !deleted {
		_, err := b.bw.Write(value)
		return err
	}
	return nil
}

// finish writes the end record and the checksum, and returns the size.
func (b *backupWriter) finish() (int64, error) {
	b.buf = binary.AppendUvarint(append(b.buf[:0], recEnd), uint64(b.records))
	if _, err := b.bw.Write(b.buf); err != nil {
		return b.w.n, err
	}
	if err := b.bw.Flush(); err != nil {
		return b.w.n, err
	}
	_, err := b.w.Write(b.hash.Sum(nil))
	return b.w.n, err
}

// backupReader decodes a backup stream and verifies its checksum.
type backupReader struct {
	name string // for errors: "backup 2 (inc.kbak)"
	r    *bufio.Reader
	hash hash.Hash
	off  int64
	hdr  backupHeader
	buf  []byte
}

// backupRecord is one decoded record; key and value are valid until the
// next call to next.
type backupRecord struct {
	key, value []byte
	version    uint64
	deleted    bool
}

// openBackup reads and checks a backup's magic and header.
func openBackup(r io.Reader, name string) (*backupReader, error) {
	b := &backupReader{name: name, r: bufio.NewReaderSize(r, 256<<10), hash: sha256.New()}
	magic, err := b.read(len(backupMagic))
	if err != nil || string(magic) != backupMagic {
		return nil, fmt.Errorf("%s: not a kapi Badger backup (it does not start with the backup magic): %w", name, ErrBadBackup)
	}
	n, err := b.uvarint()
	if err != nil || n == 0 || n > maxHeaderLen {
		return nil, b.fail("malformed header", err)
	}
	hdr, err := b.read(int(n))
	if err != nil {
		return nil, b.fail("malformed header", err)
	}
	if err := json.Unmarshal(hdr, &b.hdr); err != nil {
		return nil, b.fail("malformed header", err)
	}
	h := b.hdr
	switch {
	case h.Format != backupFormat:
		return nil, fmt.Errorf("%s: backup format %q, this version reads %q: %w", name, h.Format, backupFormat, ErrBadBackup)
	case h.StoreFormat != string(formatMarker):
		return nil, fmt.Errorf("%s: a backup of storage format %q, this version restores %q: %w", name, h.StoreFormat, formatMarker, ErrBadBackup)
	case h.Revision < formatRevision || h.Compacted < formatRevision || h.Compacted > h.Revision ||
		h.Since < 0 || h.Since > h.Revision || h.Revision > maxRevision:
		return nil, fmt.Errorf("%s: inconsistent header (revision %d, compacted %d, since %d): %w",
			name, h.Revision, h.Compacted, h.Since, ErrBadBackup)
	}
	return b, nil
}

// maxRevision bounds revisions, as Open does.
const maxRevision = 1<<62 - 1

// next returns the next record; ok is false after the end record, once the
// checksum has been verified and nothing follows it.
func (b *backupReader) next() (rec backupRecord, ok bool, err error) {
	kind, err := b.byte()
	if err != nil {
		return rec, false, b.fail("reading a record", err)
	}
	switch kind {
	case recEnd:
		return rec, false, b.end()
	case recPut, recDelete:
	default:
		return rec, false, b.fail(fmt.Sprintf("unknown record type %#x", kind), nil)
	}
	rec.deleted = kind == recDelete
	kl, err := b.uvarint()
	if err != nil || kl < 2 || kl > maxRecordKey {
		return rec, false, b.fail("malformed record key", err)
	}
	vl := uint64(0)
	b.buf = b.buf[:0]
	key, err := b.read(int(kl))
	if err == nil {
		b.buf = append(b.buf, key...)
		rec.version, err = b.uvarint()
	}
	if err == nil && !rec.deleted {
		vl, err = b.uvarint()
		if err == nil && vl > maxRecordData {
			err = fmt.Errorf("value of %d bytes", vl)
		}
	}
	if err != nil {
		return rec, false, b.fail("malformed record", err)
	}
	rec.key = b.buf
	if !rec.deleted {
		v, err := b.read(int(vl))
		if err != nil {
			return rec, false, b.fail("malformed record value", err)
		}
		rec.value = v
	}
	h := b.hdr
	switch {
	case rec.key[0] != nsData && rec.key[0] != nsChunk:
		return rec, false, b.fail(fmt.Sprintf("record of unexpected key %q", rec.key), nil)
	case rec.version > uint64(h.Revision) || rec.version <= uint64(h.Since) || rec.version < formatRevision:
		return rec, false, b.fail(fmt.Sprintf("record at revision %d outside the backup's range (%d, %d]", rec.version, h.Since, h.Revision), nil)
	}
	return rec, true, nil
}

// end verifies the checksum after the end record and that nothing follows.
func (b *backupReader) end() error {
	if _, err := b.uvarint(); err != nil {
		return b.fail("malformed end record", err)
	}
	want := b.hash.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(b.r, got); err != nil {
		return b.fail("reading the checksum", err)
	}
	if string(got) != string(want) {
		return fmt.Errorf("%s: checksum mismatch: the backup is corrupt: %w", b.name, ErrBadBackup)
	}
	if _, err := b.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%s: unexpected data after the checksum: %w", b.name, ErrBadBackup)
	}
	return nil
}

// fail describes a decoding failure at the current offset; an early end of
// the stream is reported as truncation.
func (b *backupReader) fail(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: truncated after %d bytes (%s): the backup is incomplete: %w", b.name, b.off, what, ErrBadBackup)
	}
	if err != nil {
		return fmt.Errorf("%s: %s at byte %d: %v: %w", b.name, what, b.off, err, ErrBadBackup)
	}
	return fmt.Errorf("%s: %s at byte %d: the backup is corrupt: %w", b.name, what, b.off, ErrBadBackup)
}

// read returns the next n bytes (valid until the next read) and hashes them.
func (b *backupReader) read(n int) ([]byte, error) {
	p, err := b.r.Peek(n)
	if err == bufio.ErrBufferFull {
		// Longer than the buffer: read it into a slice of its own.
		p = make([]byte, n)
		_, err = io.ReadFull(b.r, p)
	} else if err == nil {
		_, err = b.r.Discard(n)
	} else if err == io.EOF && len(p) > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	b.hash.Write(p)
	b.off += int64(n)
	return p, nil
}

func (b *backupReader) byte() (byte, error) {
	p, err := b.read(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (b *backupReader) uvarint() (uint64, error) {
	return binary.ReadUvarint(byteReader{b})
}

type byteReader struct{ b *backupReader }

func (r byteReader) ReadByte() (byte, error) { return r.b.byte() }

// VerifyBackup reads a whole backup, verifies its checksum and the sanity of
// its records, and describes it. It does not say whether the backup is the
// next link of a chain: Restore checks that.
func VerifyBackup(r io.Reader) (storage.BackupInfo, error) {
	name := "backup"
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name()
	}
	b, err := openBackup(r, name)
	if err != nil {
		return storage.BackupInfo{}, err
	}
	for {
		_, ok, err := b.next()
		if err != nil {
			return storage.BackupInfo{}, err
		}
		if !ok {
			return b.hdr.info(b.off + sha256.Size), nil
		}
	}
}
