package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
)

// writeFence is the storage.Fence a write's context carries, if any: its
// compare joins the write's own in the transaction, and its key is read
// back when the transaction fails, to tell a refused fence from a failed
// compare-and-swap.
type writeFence struct {
	f  storage.Fence
	on bool
}

func fenceOf(ctx context.Context) writeFence {
	f, ok := storage.FenceFrom(ctx)
	return writeFence{f: f, on: ok}
}

// cmps returns the write's compares with the fence's.
func (w writeFence) cmps(c ...clientv3.Cmp) []clientv3.Cmp {
	if w.on {
		c = append(c, clientv3.Compare(clientv3.CreateRevision(string(w.f.Key)), "=", w.f.CreateRevision))
	}
	return c
}

// elses returns the write's Else operations with the read of the fence key,
// which comes last.
func (w writeFence) elses(ops ...clientv3.Op) []clientv3.Op {
	if w.on {
		ops = append(ops, clientv3.OpGet(string(w.f.Key), clientv3.WithKeysOnly()))
	}
	return ops
}

// refused returns a *storage.FencedError, after calling the fence's Lost,
// when the failed transaction resp failed because of the fence; nil
// otherwise.
func (w writeFence) refused(key []byte, resp *clientv3.TxnResponse) error {
	if !w.on || len(resp.Responses) == 0 {
		return nil
	}
	rr := resp.Responses[len(resp.Responses)-1].GetResponseRange()
	if rr != nil && len(rr.Kvs) > 0 && rr.Kvs[0].CreateRevision == w.f.CreateRevision {
		return nil
	}
	if w.f.Lost != nil {
		w.f.Lost()
	}
	return &storage.FencedError{Key: append([]byte(nil), key...), Fence: w.f}
}
