package etcd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
	"github.com/kapi-dev/kapi/storage/storagetest"
)

// TestMain gets the etcd server binary before the tests start (see
// etcdtest.Binary: the first build takes minutes, later runs reuse it) and
// says how long it took. With -short and no binary yet, the tests that need
// etcd skip.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() || etcdtest.Available("") {
		start := time.Now()
		path, err := etcdtest.Binary(context.Background(), "")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if d := time.Since(start); d > time.Second {
			fmt.Fprintf(os.Stderr, "storage/etcd: built the etcd server %s in %v\n", path, d.Round(time.Second))
		}
	}
	os.Exit(m.Run())
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testOptions are options for a store on srv under a prefix of its own,
// without the background compactor (its election writes keys, which would
// move the revisions the tests compare).
func testOptions(t testing.TB, srv *etcdtest.Server, prefix string) Options {
	return Options{Endpoints: srv.Endpoints(), Prefix: prefix, CompactionInterval: -1, Logger: testLogger(t)}
}

func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), o)
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

// TestConformance runs the storage conformance suite against one etcd
// server, each subtest under a new prefix (the store is empty there).
func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	var n atomic.Int64
	storagetest.Run(t,
		func(t *testing.T) storage.Store {
			s, err := Open(t.Context(), testOptions(t, srv, fmt.Sprintf("/conformance/%d/", n.Add(1))))
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
			return openStore(t, s.opts)
		}),
	)
}
