package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/storage/etcd"
)

// Built with or without the etcd backend, --etcd-prefix defaults to the
// backend's prefix; without it, --etcd-endpoints is refused with the way out.
func TestEtcdBuildTag(t *testing.T) {
	if defaultEtcdPrefix != etcd.DefaultPrefix {
		t.Fatalf("--etcd-prefix defaults to %q, etcd.DefaultPrefix is %q", defaultEtcdPrefix, etcd.DefaultPrefix)
	}
	if etcdBuilt {
		return // opening etcd is covered by examples/e2e's etcd tests
	}
	_, _, err := openEtcd(context.Background(), storageFlags{etcdEndpoints: "http://127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-tags etcd") {
		t.Fatalf("openEtcd without the etcd backend: %v", err)
	}
}
