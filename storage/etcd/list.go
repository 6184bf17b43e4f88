package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
)

// maxBoundedBatch bounds the keys of one batch of a list bounded in bytes.
const maxBoundedBatch = 1000

// listBounded serves a page with ListOptions.MaxBytes from key from on.
// etcd pages by count only, so the page is read in batches, all at the
// first batch's revision: the first sized from the mean size the last such
// list saw (one key the first time), the next from the values read so far.
// A page of large values is thus neither read whole to be cut nor read
// again by the next page; when it ends with a batch, a keys-only read finds
// the next key.
func (s *Store) listBounded(ctx context.Context, from []byte, opts storage.ListOptions) (storage.ListResult, error) {
	res := storage.ListResult{Revision: opts.Revision}
	var size int64
	batch := int64(1)
	if mean := s.valueSize.Load(); mean > 0 {
		batch = min(maxBoundedBatch, opts.MaxBytes/mean+1)
	}
	full := func() bool {
		return opts.Limit > 0 && int64(len(res.Items)) == opts.Limit || size >= opts.MaxBytes
	}
	defer func() {
		if len(res.Items) > 0 {
			s.valueSize.Store(max(1, size/int64(len(res.Items))))
		}
	}()
	for {
		if opts.Limit > 0 {
			batch = min(batch, opts.Limit-int64(len(res.Items)))
		}
		resp, err := s.rangeAt(ctx, from, opts.Prefix, res.Revision, batch, opts.KeysOnly)
		if err != nil {
			return storage.ListResult{}, err
		}
		if res.Revision == 0 {
			res.Revision = resp.Header.Revision
		}
		for i, kv := range resp.Kvs {
			if full() {
				res.More = true
				res.NextKey = s.strip(kv.Key)
				// etcd counts every key of the range from the batch's start.
				res.Remaining = resp.Count - int64(i)
				return res, nil
			}
			res.Items = append(res.Items, s.kv(kv, opts.KeysOnly))
			size += int64(len(kv.Key) - len(s.prefix) + len(kv.Value))
		}
		if !resp.More {
			return res, nil
		}
		last := res.Items[len(res.Items)-1].Key
		from = append(last[:len(last):len(last)], 0) // the first key after it
		if full() {
			next, err := s.rangeAt(ctx, from, opts.Prefix, res.Revision, 1, true)
			if err != nil {
				return storage.ListResult{}, err
			}
			if len(next.Kvs) > 0 {
				res.More, res.NextKey, res.Remaining = true, s.strip(next.Kvs[0].Key), next.Count
			}
			return res, nil
		}
		batch = min(maxBoundedBatch, (opts.MaxBytes-size)/(size/int64(len(res.Items)))+1)
	}
}

// rangeAt reads up to limit keys of the range of prefix from key from on,
// at revision rev (0: the latest).
func (s *Store) rangeAt(ctx context.Context, from, prefix []byte, rev, limit int64, keysOnly bool) (*clientv3.GetResponse, error) {
	ops := []clientv3.OpOption{clientv3.WithRange(s.rangeEnd(prefix)), clientv3.WithLimit(limit)}
	if rev > 0 {
		ops = append(ops, clientv3.WithRev(rev))
	}
	if keysOnly {
		ops = append(ops, clientv3.WithKeysOnly())
	}
	resp, err := s.cli.Get(ctx, s.key(from), ops...)
	if err != nil {
		return nil, s.readError(ctx, err, rev)
	}
	return resp, nil
}
