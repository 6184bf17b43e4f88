package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
)

// maxBoundedBatch bounds the keys of one batch of a list bounded in bytes.
const maxBoundedBatch = 1000

// listBounded serves a page with ListOptions.MaxBytes from key from on.
// etcd pages by count only, so the page is read in batches at the first
// batch's revision: one key, then as many as the mean size read so far says
// fit, so that a page of large values is neither read whole to be cut nor
// read again by the next page. A batch asks for one key more, whose key is
// where the next batch or page starts, when that key's value is small
// against the page (or the batch ends at the page's Limit); otherwise a
// keys-only read of one key finds it when the page ends there.
func (s *Store) listBounded(ctx context.Context, from []byte, opts storage.ListOptions) (storage.ListResult, error) {
	res := storage.ListResult{Revision: opts.Revision}
	var size int64
	full := func() bool {
		return opts.Limit > 0 && int64(len(res.Items)) == opts.Limit || size >= opts.MaxBytes
	}
	batch, ahead := int64(1), int64(0)
	for {
		if opts.Limit > 0 && batch >= opts.Limit-int64(len(res.Items)) {
			batch, ahead = opts.Limit-int64(len(res.Items)), 1
		}
		resp, err := s.rangeAt(ctx, from, opts.Prefix, res.Revision, batch+ahead, opts.KeysOnly)
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
			if int64(i) == batch { // the key asked for ahead
				from = s.strip(kv.Key)
				break
			}
			res.Items = append(res.Items, s.kv(kv, opts.KeysOnly))
			size += int64(len(kv.Key) - len(s.prefix) + len(kv.Value))
		}
		if !resp.More && int64(len(resp.Kvs)) <= batch {
			return res, nil // the range ends in this batch
		}
		if ahead == 0 {
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
		}
		mean := size / int64(len(res.Items))
		batch = min(maxBoundedBatch, (opts.MaxBytes-size)/mean+1)
		ahead = 0
		if mean < opts.MaxBytes/8 {
			ahead = 1
		}
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
