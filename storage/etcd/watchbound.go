package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// pausedError ends an etcd watch whose consumer holds the watch's bound
// (storage.WatchOptions.BufferBytes): the etcd client buffers every
// response it receives, so the watch is cancelled, which drops that buffer,
// and resumed from the last delivered revision once the consumer has read
// and the event that did not fit (of size bytes) fits.
type pausedError struct{ size int64 }

func (e pausedError) Error() string { return "etcd watch paused for a slow consumer" }

// fits reports whether an event of size bytes may be sent now without
// pausing: always for a watch without a bound; otherwise when the channel
// is empty, or has room and holds at most the bound with the event.
func (w *watcher) fits(size int64) bool {
	if w.maxBytes <= 0 {
		return true
	}
	n := len(w.out)
	if n == 0 {
		return true
	}
	return n < cap(w.out) && w.held(n)+size <= w.maxBytes
}

// held is the size of the last n events sent (those still in the channel).
func (w *watcher) held(n int) int64 {
	var b int64
	for i := w.sent - uint64(n); i < w.sent; i++ {
		b += w.sizes[i%watchBuffer]
	}
	return b
}

// waitRoom waits, after a pause on an event of size bytes, until the
// consumer has read the channel down to half its bound and half its
// capacity and that event fits, so that a resumed watch does not pause
// again at once. The channel says how many events it holds, not when one
// leaves, so this polls, at a slowing pace. It reports false when ctx
// ends.
func (w *watcher) waitRoom(ctx context.Context, size int64) bool {
	for pause := time.Millisecond; ; pause = min(2*pause, 64*time.Millisecond) {
		n := len(w.out)
		held := w.held(n)
		if n == 0 || n <= cap(w.out)/2 && held <= w.maxBytes/2 && held+size <= w.maxBytes {
			return true
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// eventSize is what an event holds of keys and values.
func eventSize(ev *clientv3.Event) int64 {
	n := len(ev.Kv.Key) + len(ev.Kv.Value)
	if ev.PrevKv != nil {
		n += len(ev.PrevKv.Value)
	}
	return int64(n)
}
