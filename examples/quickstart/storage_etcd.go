//go:build etcd

package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd"
)

// etcdBuilt says whether this build has the etcd backend (-tags etcd).
const etcdBuilt = true

// defaultEtcdPrefix is --etcd-prefix's default.
const defaultEtcdPrefix = etcd.DefaultPrefix

// openEtcd opens the etcd store the flags name and the leader election the
// controllers run under.
func openEtcd(ctx context.Context, f storageFlags, logger *slog.Logger) (storage.Store, apiserver.Elector, error) {
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
