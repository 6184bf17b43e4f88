package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
	"github.com/kapi-dev/kapi/storage/etcd"
)

// storageFlags select and configure the store.
type storageFlags struct {
	dataDir  string
	inMemory bool
	history  time.Duration

	etcdEndpoints string // comma-separated; empty: Badger
	etcdPrefix    string
	etcdCA        string
	etcdCert      string
	etcdKey       string
}

// openStorage opens Badger in the data directory, or etcd when endpoints are
// given. On etcd it also returns the leader election under which the
// controllers run, so that several servers over one etcd form one API.
func openStorage(ctx context.Context, f storageFlags, logger *slog.Logger) (storage.Store, apiserver.Elector, error) {
	if f.etcdEndpoints == "" {
		opts := badger.DefaultOptions(filepath.Join(f.dataDir, "db"))
		if f.inMemory {
			opts = badger.InMemoryOptions()
		}
		st, err := badger.Open(opts.WithLogger(logger).WithRetentionTime(f.history))
		return st, nil, err
	}
	if f.inMemory {
		return nil, nil, errors.New("--in-memory and --etcd-endpoints exclude each other")
	}
	var endpoints []string
	for _, e := range strings.Split(f.etcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	opts := etcd.Options{Endpoints: endpoints, Prefix: f.etcdPrefix, Logger: logger,
		// History is kept between one and two compaction intervals.
		CompactionInterval: f.history}
	if f.etcdCA != "" || f.etcdCert != "" || f.etcdKey != "" {
		tlsConfig, err := etcd.LoadTLS(f.etcdCA, f.etcdCert, f.etcdKey)
		if err != nil {
			return nil, nil, err
		}
		opts.TLS = tlsConfig
	}
	st, err := etcd.Open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("storing objects in etcd", "endpoints", endpoints, "prefix", st.Prefix())
	return st, st.Elector(etcd.ElectorOptions{}), nil
}
