package badger

import (
	"log/slog"
	"testing"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/storagetest"
)

// testOptions are smaller than the defaults (many stores are opened).
func testOptions(t testing.TB, dir string) Options {
	o := DefaultOptions(dir)
	if dir == "" {
		o = InMemoryOptions()
	}
	return o.
		WithMemTableSize(32 << 20).
		WithBlockCacheSize(16 << 20).
		WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func open(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformanceDisk(t *testing.T) {
	storagetest.Run(t,
		func(t *testing.T) storage.Store {
			s, err := Open(testOptions(t, t.TempDir()))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		storagetest.WithMaxValueSize(DefaultMaxValueSize),
		storagetest.WithReopen(func(t *testing.T, st storage.Store) storage.Store {
			s := st.(*Store)
			if err := s.Close(); err != nil {
				t.Fatalf("Close before reopening: %v", err)
			}
			return open(t, s.opts)
		}),
	)
}

func TestConformanceInMemory(t *testing.T) {
	storagetest.Run(t,
		func(t *testing.T) storage.Store {
			s, err := Open(testOptions(t, ""))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		storagetest.WithMaxValueSize(DefaultMaxValueSize),
	)
}
