package etcd

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// countingKV counts the range requests of a Store and the value bytes they
// read.
type countingKV struct {
	clientv3.KV
	gets, bytes, maxResp atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := c.KV.Get(ctx, key, opts...)
	c.gets.Add(1)
	if err == nil {
		var n int64
		for _, kv := range resp.Kvs {
			n += int64(len(kv.Value))
		}
		c.bytes.Add(n)
		if n > c.maxResp.Load() {
			c.maxResp.Store(n)
		}
	}
	return resp, err
}

func countingStore(t *testing.T) (*Store, *countingKV) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, testOptions(t, srv, "/bounded/"))
	kv := &countingKV{KV: s.cli.KV}
	s.cli.KV = kv
	return s, kv
}

// Pages bounded in bytes read each value about once, never hold much more
// than the bound in one response, and a page of small values takes two
// range requests (a one-key probe, then the rest).
func TestListBoundedReads(t *testing.T) {
	s, kv := countingStore(t)
	ctx := t.Context()
	for i := range 20 {
		if _, err := s.Create(ctx, fmt.Appendf(nil, "small/k%03d", i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	const n, size = 40, 256 << 10
	big := bytes.Repeat([]byte("x"), size)
	for i := range n {
		if _, err := s.Create(ctx, fmt.Appendf(nil, "big/k%03d", i), big); err != nil {
			t.Fatal(err)
		}
	}

	kv.gets.Store(0)
	res, err := s.List(ctx, storage.ListOptions{Prefix: []byte("small/"), Limit: 5, MaxBytes: 4 << 20, Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 5 || !res.More || string(res.NextKey) != "small/k005" || res.Remaining != 15 {
		t.Fatalf("small page: %d items, more %v, next %q, remaining %d", len(res.Items), res.More, res.NextKey, res.Remaining)
	}
	if got := kv.gets.Load(); got > 2 {
		t.Errorf("a page of 5 small values took %d range requests, want at most 2", got)
	}

	const maxBytes = 1 << 20
	kv.bytes.Store(0)
	kv.maxResp.Store(0)
	opts := storage.ListOptions{Prefix: []byte("big/"), Limit: 1000, MaxBytes: maxBytes}
	pages := 0
	for {
		res, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if !res.More {
			break
		}
		opts.StartKey, opts.Revision = res.NextKey, res.Revision
	}
	if got := kv.maxResp.Load(); got > maxBytes+size {
		t.Errorf("one range response read %d value bytes for pages bounded at %d", got, maxBytes)
	}
	if got, most := kv.bytes.Load(), int64(n*size+pages*size); got > most {
		t.Errorf("%d pages read %d value bytes for %d, want at most one value more per page", pages, got, n*size)
	}
}
