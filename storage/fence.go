package storage

import (
	"context"
	"errors"
	"fmt"
)

// Fence is a condition of leadership that a backend shared by several
// processes adds to every write made with a context carrying it
// (WithFence): the write happens only if, in the same transaction, Key
// still exists with CreateRevision. A leader election hands its leader a
// context with the fence of its term (storage/etcd's Elector does), so
// that an old leader that lost its lease cannot write once its key is gone,
// however late its writes arrive.
//
// storage/etcd checks fences. A backend that only one process can open
// (storage/badger) ignores them: there is no other process to lead.
type Fence struct {
	// Key is the backend key that proves leadership, in the backend's own
	// key space (for etcd, the election's leader key: not under the
	// store's prefix).
	Key []byte
	// CreateRevision is the revision at which Key was created for this
	// term; a key deleted and created again has another one.
	CreateRevision int64
	// Lost, when set, is called when a write is refused by the fence, so
	// that the holder stops leading at once rather than when it next hears
	// from its election. It may be called more than once.
	Lost func()
}

// ErrFenced is what a write refused by its context's fence fails with:
// the holder no longer leads, and must stop the work only a leader does.
var ErrFenced = errors.New("storage: write refused by its fence: no longer the leader")

// FencedError reports a write refused by its fence. It matches ErrFenced
// with errors.Is.
type FencedError struct {
	Key   []byte // the key written
	Fence Fence  // the fence that did not hold
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("storage: write of %q refused: fence key %q no longer exists with create revision %d (no longer the leader)",
		e.Key, e.Fence.Key, e.Fence.CreateRevision)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

type fenceKey struct{}

// WithFence returns a context whose writes (Create, Update, Delete) are
// conditional on f, for the backends that check fences.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
