package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
)

// Batches of a list bounded in bytes: the first is small, the next sized
// from the values read so far.
const (
	firstBoundedBatch = 32
	maxBoundedBatch   = 1000
)

// listBounded serves a page with ListOptions.MaxBytes from key from on.
// etcd pages by count only, so the page is read in batches sized from the
// values read so far, all at the first batch's revision: a page of large
// values is neither read whole to be cut nor read again by the next page.
func (s *Store) listBounded(ctx context.Context, from []byte, opts storage.ListOptions) (storage.ListResult, error) {
	res := storage.ListResult{Revision: opts.Revision}
	var size int64
	batch := int64(firstBoundedBatch)
	for {
		want := batch
		if opts.Limit > 0 {
			want = min(want, opts.Limit-int64(len(res.Items)))
		}
		// One more than asked: its key is where the next batch, or page,
		// starts.
		ops := []clientv3.OpOption{clientv3.WithRange(s.rangeEnd(opts.Prefix)), clientv3.WithLimit(want + 1)}
		if res.Revision > 0 {
			ops = append(ops, clientv3.WithRev(res.Revision))
		}
		if opts.KeysOnly {
			ops = append(ops, clientv3.WithKeysOnly())
		}
		resp, err := s.cli.Get(ctx, s.key(from), ops...)
		if err != nil {
			return storage.ListResult{}, s.readError(ctx, err, res.Revision)
		}
		if res.Revision == 0 {
			res.Revision = resp.Header.Revision
		}
		for i, kv := range resp.Kvs {
			if opts.Limit > 0 && int64(len(res.Items)) == opts.Limit || size >= opts.MaxBytes {
				res.More = true
				res.NextKey = s.strip(kv.Key)
				// etcd counts every key of the range from the batch's start.
				res.Remaining = resp.Count - int64(i)
				return res, nil
			}
			if int64(i) == want {
				from = s.strip(kv.Key)
				break
			}
			res.Items = append(res.Items, s.kv(kv, opts.KeysOnly))
			size += int64(len(kv.Key) - len(s.prefix) + len(kv.Value))
		}
		if int64(len(resp.Kvs)) <= want {
			return res, nil // the range ends in this batch
		}
		batch = maxBoundedBatch
		if avg := size / int64(len(res.Items)); avg > 0 {
			batch = min(batch, (opts.MaxBytes-size)/avg+1)
		}
	}
}
