package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// checkTables opens every table the MANIFEST lists, in this goroutine,
// before Badger does, and (unless skipVerify) verifies its checksums.
//
// Badger opens tables in goroutines of its own while opening the database,
// and a corrupt table index makes it panic there (table.initIndex reads out
// of range), which kills the process: no recover in Open can catch that.
// Opening the tables here first turns such corruption into an error.
//
// The checksums matter because of two Badger behaviours: with checksum
// verification at table open (OnTableRead) Badger skips a corrupt table and
// carries on without its data; with verification at block read (what kapi
// uses) a corrupt block ends an iteration silently, as if the keys ended
// there (Badger's Iterator has no error to report). Either way a list could
// come back incomplete without an error. Verifying here turns corruption
// present at Open into an Open error. It costs one sequential read of the
// tables.
func checkTables(dir string, bo bdb.Options, skipVerify bool) (err error) {
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return err
	}
	defer f.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt data directory: %v", r)
		}
	}()
	m, _, err := bdb.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		return fmt.Errorf("read MANIFEST: %w", err)
	}
	for id, tm := range m.Tables {
		if tm.KeyID != 0 {
			return fmt.Errorf("table %d is encrypted; kapi stores are not", id)
		}
		if err := checkTable(table.NewFilename(id, dir), tm.Compression, skipVerify); err != nil {
			return err
		}
	}
	return nil
}

func checkTable(path string, c options.CompressionType, skipVerify bool) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open table: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			_ = mf.Close(-1)
			err = fmt.Errorf("corrupt table %s: %v", path, r)
		}
	}()
	mode := options.OnTableRead
	if skipVerify {
		mode = options.NoVerification
	}
	t, err := table.OpenTable(mf, table.Options{
		ReadOnly:    true,
		ChkMode:     mode,
		BlockSize:   4 << 10,
		Compression: c,
	})
	if err != nil {
		_ = mf.Close(-1)
		return fmt.Errorf("corrupt table %s: %w", path, err)
	}
	return t.Close(-1)
}
