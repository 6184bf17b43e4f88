package badger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// checkWALs reads Badger's memtable write-ahead logs (*.mem) before Badger
// replays them. Badger's replay stops at the first entry that does not
// decode or whose checksum fails, treats everything after it as a torn tail
// and truncates it away: a damaged entry in the middle of a log would
// silently drop every later write, acknowledged ones included. A real torn
// tail (a crash during a write) is the end of the last, unacknowledged
// batch; the files are preallocated with zeros, so nothing complete follows
// it. So Open refuses a log in which a complete transaction follows the
// point where replay would stop, and a log that ends inside an entry (a
// truncated file: Badger itself only truncates at an entry boundary). An
// empty log, which a crash leaves when it comes between Badger creating the
// file and sizing it, is removed.
func checkWALs(dir string) (err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	removed := false
	defer func() {
		if removed && err == nil {
			err = syncDir(dir)
		}
	}()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read write-ahead log: %w", err)
		}
		switch {
		case len(data) == 0:
			// Badger creates a log and then sizes it: a crash in
			// between leaves it empty. It holds nothing, and Badger
			// refuses to open it (z.NewFile from its memtable open),
			// so remove it.
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("remove empty write-ahead log: %w", err)
			}
			removed = true
			continue
		case len(data) < walHeaderSize:
			return fmt.Errorf("write-ahead log %s is truncated: %d bytes, shorter than its %d-byte header: "+
				"restore the data directory from a backup", f, len(data), walHeaderSize)
		}
		stop, truncated := walStop(data)
		switch {
		case truncated:
			return fmt.Errorf("write-ahead log %s is truncated: it ends inside an entry at offset %d (%d bytes): "+
				"the file was cut (a copy that did not finish?); restore the data directory from a backup", f, stop, len(data))
		case nextTxn(data, stop) >= 0:
			return fmt.Errorf("write-ahead log %s is corrupt at offset %d: complete writes follow a damaged entry, "+
				"and opening would drop them: restore the data directory from a backup (or, to salvage what precedes "+
				"the damage, move this file away: the writes it holds, the store's latest, are then lost)", f, stop)
		}
	}
	return nil
}

// removeEmptyLogs removes the empty write-ahead and value logs (*.mem,
// *.vlog) from dir. Badger creates a log file and then sizes it: a crash in
// between leaves an empty file, which holds nothing, and on which Badger
// v4.9's Open fails ("Create a new file", dgraph-io/badger#2207) for good.
// Without the file, the directory is as if the crash had come just before
// Badger created it.
func removeEmptyLogs(dir string, logger *slog.Logger) error {
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil || fi.Size() != 0 {
				continue // checkWALs and Badger read it
			}
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("removing the empty log %s left by a crash: %w", f, err)
			}
			logger.Info("removed an empty log file left by a crash", "file", f)
		}
	}
	return nil
}

const (
	walHeaderSize = 20 // Badger's vlogHeaderSize: key id and IV
	walFinTxn     = 1 << 7
)

// walTxnKey is the key of Badger's end-of-transaction entries.
var walTxnKey = []byte("!badger!txn")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walEntry decodes the entry at off (Badger's logFile format: meta,
// userMeta, varint key, value and expiry lengths, key, value, CRC-32C of
// all that). It returns the entry's end and meta; ok is false for a zero or
// damaged entry, short for one cut by the end of data.
func walEntry(data []byte, off int) (end int, meta byte, ok, short bool) {
	p := off + 2
	if p > len(data) {
		return 0, 0, false, true
	}
	var lens [3]uint64
	for i := range lens {
		v, n := binary.Uvarint(data[min(p, len(data)):])
		if n == 0 {
			return 0, 0, false, true
		}
		if n < 0 {
			return 0, 0, false, false
		}
		lens[i], p = v, p+n
	}
	klen, vlen := lens[0], lens[1]
	if klen == 0 || klen > 1<<16 || vlen > uint64(len(data)) {
		return 0, 0, false, false
	}
	end = p + int(klen) + int(vlen) + 4
	if end > len(data) {
		return 0, 0, false, true
	}
	sum := binary.BigEndian.Uint32(data[end-4 : end])
	if crc32.Checksum(data[off:end-4], castagnoli) != sum {
		return 0, 0, false, false
	}
	return end, data[off], true, false
}

// walStop returns the offset where Badger's replay of data stops (after
// the last complete transaction or non-transactional entry), and whether the
// data ends inside the entry found there.
func walStop(data []byte) (stop int, truncated bool) {
	stop = walHeaderSize
	for off := walHeaderSize; off < len(data); {
		end, meta, ok, short := walEntry(data, off)
		if !ok {
			// A cut inside non-zero bytes is a truncated file; zeros
			// are the preallocated rest of the log.
			return stop, short && len(bytes.TrimRight(data[off:], "\x00")) > 0
		}
		off = end
		if meta&(1<<6) == 0 || meta&walFinTxn != 0 { // not inside a transaction
			stop = off
		}
	}
	return stop, false
}

// nextTxn returns the offset of a valid end-of-transaction entry after
// from, or -1.
func nextTxn(data []byte, from int) int {
	for i := from; i < len(data); {
		j := bytes.Index(data[i:], walTxnKey)
		if j < 0 {
			return -1
		}
		k := i + j
		// The header before the key: meta, userMeta and three one-byte
		// varints (key of 19 bytes, a decimal timestamp, no expiry).
		if start := k - 5; start >= from {
			if _, meta, ok, _ := walEntry(data, start); ok && meta&walFinTxn != 0 {
				return start
			}
		}
		i = k + 1
	}
	return -1
}

// damaged adds what to do to an error that Badger or the table check
// returns for damaged files.
func damaged(err error) error {
	if strings.Contains(err.Error(), "directory lock") {
		return err // another process has it open: not damage
	}
	return fmt.Errorf("%w; the data directory is damaged: restore it from a backup (see Disk faults in docs/operations.md)", err)
}
