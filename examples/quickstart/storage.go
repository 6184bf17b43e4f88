package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// storageFlags select and configure the store.
type storageFlags struct {
	dataDir  string
	inMemory bool
	history  time.Duration
	mapped   string // --storage-mapped-memory

	etcdEndpoints string // comma-separated; empty: Badger
	etcdPrefix    string
	etcdCA        string
	etcdCert      string
	etcdKey       string
}

// parseMappedMemory parses --storage-mapped-memory: a size such as 256MiB,
// or off (or 0) for no bound, as badger.Options.MaxMappedResident takes it.
func parseMappedMemory(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "0":
		return -1, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--storage-mapped-memory: %q is not off or a size such as 256MiB", s)
	}
	return n, nil
}

// mappedMemoryMetrics exports the Badger store's mapped-memory figures
// (badger.Store.MappedMemory); other stores have none.
func mappedMemoryMetrics(st storage.Store) []prometheus.Collector {
	b, ok := st.(*badger.Store)
	if !ok {
		return nil
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kapi_storage_mapped_resident_bytes",
			Help: "Resident bytes of the Badger data directory's memory-mapped tables (0 when unbounded: not measured)."},
			func() float64 { return float64(b.MappedMemory().Resident) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kapi_storage_mapped_resident_bound_bytes",
			Help: "The bound on kapi_storage_mapped_resident_bytes (--storage-mapped-memory; 0: none)."},
			func() float64 { return float64(b.MappedMemory().Bound) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kapi_storage_mapped_paged_out_bytes_total",
			Help: "Resident bytes of memory-mapped tables the kernel was asked to reclaim (madvise MADV_PAGEOUT) and released."},
			func() float64 { return float64(b.MappedMemory().PagedOut) }),
	}
}

// openStorage opens Badger in the data directory, or etcd when endpoints are
// given. On etcd it also returns the leader election under which the
// controllers run, so that several servers over one etcd form one API.
func openStorage(ctx context.Context, f storageFlags, logger *slog.Logger) (storage.Store, apiserver.Elector, error) {
	mapped, err := parseMappedMemory(f.mapped)
	if err != nil {
		return nil, nil, err
	}
	if f.etcdEndpoints == "" {
		opts := badger.DefaultOptions(filepath.Join(f.dataDir, "db"))
		if f.inMemory {
			opts = badger.InMemoryOptions()
		}
		st, err := badger.Open(opts.WithLogger(logger).WithRetentionTime(f.history).WithMaxMappedResident(mapped))
		return st, nil, err
	}
	if f.inMemory {
		return nil, nil, errors.New("--in-memory and --etcd-endpoints exclude each other")
	}
	return openEtcd(ctx, f, logger)
}
