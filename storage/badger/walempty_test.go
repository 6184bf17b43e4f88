package badger

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyWALOpens: Badger creates a memtable's write-ahead log and then
// sizes it, so a crash in between leaves an empty *.mem file (seen under
// TestCrashRecovery's SIGKILLs), which Badger opens as a new log. Open's
// WAL check must accept it, not panic; a file shorter than the log header,
// which Badger never writes, is refused as truncated.
func TestEmptyWALOpens(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testOptions(t, dir))
	for i := range 5 {
		if _, err := s.Create(t.Context(), fmt.Appendf(nil, "r/%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "00099.mem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, testOptions(t, dir))
	if res, err := s.List(t.Context(), listAll("r/")); err != nil || len(res.Items) != 5 {
		t.Fatalf("after opening with an empty WAL: %d items, %v", len(res.Items), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	short := filepath.Join(t.TempDir(), "00001.mem")
	if err := os.WriteFile(short, make([]byte, walHeaderSize-1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkWALs(filepath.Dir(short)); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a WAL shorter than its header: %v", err)
	}
}
