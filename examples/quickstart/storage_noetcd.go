//go:build !etcd

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage"
)

// etcdBuilt says whether this build has the etcd backend (-tags etcd).
const etcdBuilt = false

// defaultEtcdPrefix is --etcd-prefix's default (etcd.DefaultPrefix).
const defaultEtcdPrefix = "/kapi/"

// openEtcd refuses: this quickstart was built without the etcd backend, which
// links the etcd client and gRPC (about 9 MB of binary and 7 MB of resident
// memory); go build -tags etcd adds it.
func openEtcd(context.Context, storageFlags, *slog.Logger) (storage.Store, apiserver.Elector, error) {
	return nil, nil, errors.New("--etcd-endpoints: this quickstart was built without the etcd backend; build it with -tags etcd")
}
