package watch

import (
	"errors"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// appendInitial appends a batch of initial events, and the initial-events-end
// bookmark after the last one.
func (w *Watcher) appendInitial(dst []byte) []byte {
	n, shared := 0, 0 // events, and bytes of the frames shared
	for n < maxBatchEvents && len(dst)+shared < maxBatchBytes {
		if len(w.initial) == 0 {
			if w.initialNext == nil || n > 0 {
				break // the events so far go out before the next page is read
			}
			// The next page of a storage snapshot, at the same revision.
			objs, next, _, err := w.c.initialPage(w.ctx, w.prefix, w.initialNext, w.initialRev)
			if err != nil {
				w.initial, w.initialNext = nil, nil
				if w.ctx.Err() == nil { // a watch that ends is no error (Next ends it)
					w.fail = err
				}
				return dst
			}
			w.initial, w.initialNext = objs, next
			continue
		}
		o := w.initial[0]
		if w.filter != nil && !w.passes(o) {
			w.popInitial()
			continue
		}
		var err error
		if w.shareMin > 0 && !w.perWatch && len(o.Value) >= w.shareMin {
			var ok bool
			if dst, shared, ok, err = w.appendInitialShared(dst, o, shared); !ok {
				return dst // the batch ends before o (makeRoom)
			}
		} else {
			ok, taken := w.makeRoom(objectRoom(o), dst)
			if !ok {
				return dst
			}
			m := len(dst)
			dst, err = w.enc.AppendEvent(dst, Added, o, o.Revision)
			w.keepRoom(taken, len(dst)-m)
		}
		w.popInitial()
		if err != nil {
			w.fail = err
			return dst
		}
		n++
	}
	if len(w.initial) > 0 || w.initialNext != nil {
		return dst
	}
	w.initial = nil
	w.storageDone(dst) // the last page is out
	if w.initialEnd {
		w.initialEnd = false
		var err error
		if dst, err = w.enc.AppendBookmark(dst, w.initialRev, true); err != nil {
			w.fail = err
		}
		if w.bookmarks {
			w.setNextBookmark(w.nextBookmarkTime(time.Now()))
		}
	}
	return dst
}

// popInitial drops the first initial object: it has been handled.
func (w *Watcher) popInitial() {
	w.initial[0] = nil
	w.initial = w.initial[1:]
}

// appendInitialShared appends the initial event of o, a large object, for
// NextShared: from the frame o keeps, recorded in w.shared and not copied,
// or encoded into dst, and then, when the frame is large, kept by o for the
// next watches (Cache.keepInitialFrame) and shared from there. shared counts
// the bytes of the frames recorded. ok is false when the batch must end
// before o (makeRoom).
func (w *Watcher) appendInitialShared(dst []byte, o *Object, shared int) (_ []byte, _ int, ok bool, _ error) {
	if b, ok := o.keptFrame(w.enc, w.encID); ok {
		w.shared = append(w.shared, SharedFrame{At: len(dst), Frame: b})
		return dst, shared + len(b), true, nil
	}
	ok, taken := w.makeRoom(objectRoom(o), dst)
	if !ok {
		return dst, shared, false, nil
	}
	n := len(dst)
	dst, err := w.enc.AppendEvent(dst, Added, o, o.Revision)
	w.keepRoom(taken, len(dst)-n)
	if err != nil || len(dst)-n < w.shareMin {
		return dst, shared, true, err
	}
	if b, ok := w.c.keepInitialFrame(o, w.enc, w.encID, dst[n:]); ok {
		if taken {
			w.releaseHeld(false) // shared: the batch holds no copy of it
		}
		w.shared = append(w.shared, SharedFrame{At: n, Frame: b})
		return dst[:n], shared + len(b), true, nil
	}
	return dst, shared, true, nil
}

// fromCache appends the frames of the events the cache has for w: the queue
// of a synced watcher, or a batch replayed from the window. progressed reports
// whether anything was consumed (possibly all filtered out).
func (w *Watcher) fromCache(dst []byte) (_ []byte, progressed bool, _ error) {
	c := w.c
	w.mu.Lock()
	if w.closed != nil {
		err := w.closed
		w.mu.Unlock()
		return dst, false, err
	}
	if len(w.taken) > 0 {
		w.mu.Unlock()
		return w.sendTaken(dst), true, nil
	}
	if w.synced {
		// Every change up to rev has been dispatched: it is in the queue
		// now or was taken before. Load it before taking the queue.
		rev := c.rev.Load()
		q := w.queue
		w.queue = w.spare[:0]
		w.spare = nil
		w.mu.Unlock()
		w.takenPos = max(w.pos, rev)
		if len(q) > 0 {
			w.takenPos = max(w.takenPos, q[len(q)-1].ev.Revision)
		}
		w.taken = q
		return w.sendTaken(dst), len(q) > 0, nil
	}
	w.mu.Unlock()
	return w.replayWindow(dst)
}

// replayWindow catches w up: it appends the frames of a batch of events
// replayed from the window, or makes w synced when there is nothing left to
// replay.
func (w *Watcher) replayWindow(dst []byte) (_ []byte, progressed bool, _ error) {
	c := w.c
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return dst, false, c.err
	}
	if w.pos < c.oldest {
		c.mu.Unlock()
		return dst, false, ErrTooSlow
	}
	evs := c.window.since(w.pos, maxBatchEvents, w.scratch[:0])
	if len(evs) == 0 {
		// Everything up to w.pos was delivered (from storage, when the watch
		// started behind the cache and the cache has not caught up yet):
		// dispatch must not send it again.
		w.from = max(w.from, w.pos)
		w.mu.Lock()
		if w.closed == nil {
			w.synced = true
			c.synced[w] = struct{}{}
		}
		w.mu.Unlock()
		w.pos = max(w.pos, c.rev.Load())
		c.mu.Unlock()
		return dst, true, nil
	}
	w.pos = evs[len(evs)-1].Revision
	c.mu.Unlock()
	for _, ev := range evs {
		if ev.Revision <= w.from {
			continue
		}
		if typ, ok := w.match(ev); ok {
			var sent bool
			var err error
			if dst, sent, err = w.appendFrame(dst, ev, typ); err != nil {
				w.fail = err
				break
			}
			if !sent { // the next batch starts at ev
				w.pos = ev.Revision - 1
				break
			}
		}
	}
	clear(evs)
	w.scratch = evs[:0]
	return dst, true, nil
}

// sendTaken appends the frames of the deliveries taken from the queue, up
// to maxBatchBytes; the rest waits for the next call.
func (w *Watcher) sendTaken(dst []byte) []byte {
	n0, i := len(dst), 0
	for ; i < len(w.taken) && len(dst)-n0 < maxBatchBytes; i++ {
		d := w.taken[i]
		var sent bool
		var err error
		if dst, sent, err = w.appendFrame(dst, d.ev, d.typ); err != nil {
			w.fail = err
			w.taken = nil
			return dst
		}
		if !sent { // the next batch starts at d
			break
		}
		w.taken[i] = delivery{}
		w.pos = max(w.pos, d.ev.Revision)
	}
	if i < len(w.taken) {
		w.taken = w.taken[i:]
		return dst
	}
	w.pos = max(w.pos, w.takenPos)
	if cap(w.taken) <= 64 {
		w.spare = w.taken[:0]
	}
	w.taken = nil
	return dst
}

// fromStorage appends the frames of the events the storage watch has for w,
// or hands w over to the cache once the window covers its position.
func (w *Watcher) fromStorage(dst []byte) (_ []byte, progressed bool, _ error) {
	c := w.c
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed != nil {
		return dst, false, closed
	}
	c.mu.RLock()
	handOver := w.pos >= c.oldest
	c.mu.RUnlock()
	if handOver {
		w.feedCancel()
		w.feed, w.feedCancel, w.pending = nil, nil, nil
		w.storageDone(dst)
		return dst, true, nil
	}
	for i := 0; i < maxBatchEvents && len(dst) < maxBatchBytes; i++ {
		var sev storage.Event
		if w.pending != nil {
			sev, w.pending = *w.pending, nil
		} else {
			var ok bool
			select {
			case sev, ok = <-w.feed:
				if !ok {
					return dst, progressed, ErrEnded
				}
			default:
				return dst, progressed, nil
			}
		}
		progressed = true
		switch sev.Type {
		case storage.EventProgress:
			w.pos = max(w.pos, sev.Revision)
		case storage.EventPut, storage.EventDelete:
			if sev.Revision <= w.pos {
				continue
			}
			if sev.Revision <= w.from {
				w.pos = sev.Revision
				continue
			}
			ev := newEvent(&sev, nil, time.Time{}, c.cfg.PrevValue)
			ev.detached = true
			if typ, ok := w.match(ev); ok {
				var sent bool
				var err error
				if dst, sent, err = w.appendFrame(dst, ev, typ); err != nil {
					w.fail = err
					return dst, true, nil
				}
				if !sent { // the next batch starts at sev
					w.pending = &sev
					return dst, true, nil
				}
			}
			w.pos = sev.Revision
		case storage.EventError:
			err := sev.Err
			switch {
			case errors.Is(err, storage.ErrClosed):
				return dst, true, storage.ErrClosed
			case err == nil:
				err = errors.New("storage watch failed")
			}
			w.fail = err
			return dst, true, nil
		}
	}
	return dst, progressed, nil
}
