package apiserver

import (
	"context"
	"sync"

	"github.com/kapi-dev/kapi/watch"
)

// defaultMaxWatchBytesPerUser is Config.MaxWatchBytesPerUser's default: room
// for dozens of watches writing frames of 1.5 MiB objects at once.
const defaultMaxWatchBytesPerUser = 64 << 20

// watchBytes bounds, per user, the memory of the large frames that user's
// watches encode each for itself and have not written yet (watch.Room): a
// Table watch's first frame, events replayed from storage history, initial
// events the cache does not keep. A client that stops reading holds its
// batch until the write times out; without a bound, one user's stalled
// watches could pin a frame each. A watch without room waits; the user's
// other watches are not refused.
type watchBytes struct {
	limit int64 // <= 0: no bound

	mu    sync.Mutex
	users map[string]*userWatchBytes
}

// userWatchBytes is one user's account; it is dropped once the user has no
// watch and holds nothing.
type userWatchBytes struct {
	held    int64
	watches int           // open watches that may reserve
	changed chan struct{} // closed and replaced when held drops
}

func newWatchBytes(limit int64) *watchBytes {
	return &watchBytes{limit: limit, users: map[string]*userWatchBytes{}}
}

// join returns the room of a watch of user, and leave, to call once the
// watch is stopped. Both are nil when nothing is bounded.
func (b *watchBytes) join(user string) (_ watch.Room, leave func()) {
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
	leave = func() {
		b.mu.Lock()
		u.watches--
		b.forgetLocked(user, u)
		b.mu.Unlock()
	}
	return userRoom{b: b, user: user, u: u}, leave
}

// forgetLocked drops u, user's account, once it has no watch and holds
// nothing.
func (b *watchBytes) forgetLocked(user string, u *userWatchBytes) {
	if u.watches == 0 && u.held == 0 && b.users[user] == u {
		delete(b.users, user)
	}
}

// userRoom is one user's room, shared by the user's watches.
type userRoom struct {
	b    *watchBytes
	user string
	u    *userWatchBytes
}

// Reserve takes n bytes (at most the whole bound) of the user's room,
// waiting for them until ctx ends.
func (r userRoom) Reserve(ctx context.Context, n int64) (func(), error) {
	n = min(n, r.b.limit)
	for {
		release, ok, ch := r.take(n)
		if ok {
			return release, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryReserve takes n bytes of the user's room when they are free now.
func (r userRoom) TryReserve(n int64) (func(), bool) {
	release, ok, _ := r.take(min(n, r.b.limit))
	return release, ok
}

// take takes n bytes when they are free, or returns the channel closed
// when some are given back.
func (r userRoom) take(n int64) (release func(), ok bool, changed <-chan struct{}) {
	b, u := r.b, r.u
	b.mu.Lock()
	defer b.mu.Unlock()
	if u.held+n > b.limit {
		return nil, false, u.changed
	}
	u.held += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			u.held -= n
			close(u.changed)
			u.changed = make(chan struct{})
			b.forgetLocked(r.user, u)
			b.mu.Unlock()
		})
	}, true, nil
}
