package apiserver

import (
	"context"
	"sync"
)

// defaultMaxWatchBytesPerUser is Config.MaxWatchBytesPerUser's default: room
// for dozens of watches of 1.5 MiB objects writing at once.
const defaultMaxWatchBytesPerUser = 64 << 20

// watchBytes bounds, per user, the memory of the frames that user's watches
// encode each for itself (watch.Options.Reserve): a Table watch's first
// frame, events replayed from storage history, initial events the cache
// does not keep. A client that stops reading holds such a frame until its
// write times out, so without a bound one user's stalled watches could pin
// a frame each. A watch without room waits; the user's other watches are
// not refused.
type watchBytes struct {
	limit int64 // <= 0: no bound

	mu    sync.Mutex
	users map[string]*userWatchBytes
}

type userWatchBytes struct {
	held    int64
	watches int           // open watches that may reserve
	changed chan struct{} // closed and replaced when held drops
}

func newWatchBytes(limit int64) *watchBytes {
	return &watchBytes{limit: limit, users: map[string]*userWatchBytes{}}
}

// join returns the reserve function of a watch of user, and leave, to call
// when the watch has ended (its reservations released). Both are nil when
// nothing is bounded.
func (b *watchBytes) join(user string) (reserve func(ctx context.Context, n int64) (func(), error), leave func()) {
	if b.limit <= 0 {
		return nil, nil
	}
	b.mu.Lock()
	u := b.users[user]
	if u == nil {
		u = &userWatchBytes{changed: make(chan struct{})}
		b.users[user] = u
	}
	u.watches++
	b.mu.Unlock()
	reserve = func(ctx context.Context, n int64) (func(), error) { return b.reserve(ctx, user, u, n) }
	leave = func() {
		b.mu.Lock()
		u.watches--
		b.forgetLocked(user, u)
		b.mu.Unlock()
	}
	return reserve, leave
}

// forgetLocked drops u, user's account, once it has no watch and holds
// nothing.
func (b *watchBytes) forgetLocked(user string, u *userWatchBytes) {
	if u.watches == 0 && u.held == 0 {
		delete(b.users, user)
	}
}

// reserve takes n bytes (at most the whole bound) of u's room, waiting for
// them until ctx ends.
func (b *watchBytes) reserve(ctx context.Context, user string, u *userWatchBytes, n int64) (func(), error) {
	n = min(n, b.limit)
	for {
		b.mu.Lock()
		if u.held+n <= b.limit {
			u.held += n
			b.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					b.mu.Lock()
					u.held -= n
					close(u.changed)
					u.changed = make(chan struct{})
					b.forgetLocked(user, u)
					b.mu.Unlock()
				})
			}, nil
		}
		ch := u.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
