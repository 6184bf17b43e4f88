package watch

import "context"

// Room accounts the memory of the large frames watches encode each for
// itself alone: frames the cache does not share (a PerWatchEncoder's, such
// as a Table watch's first, events replayed from storage history, initial
// events of objects whose frames the cache does not keep). A client that
// stops reading holds the batch its watch is writing; a Room shared by one
// client's watches bounds what those batches hold together.
//
// A watcher reserves about the size of such a frame of an object of at
// least ReserveMinBytes before it encodes it, and holds at most one
// reservation: that of the last batch Next returned, given back when Next
// is called again or the watch is stopped. A batch that would need a second
// one ends first; a watcher waits for room only when its batch is empty,
// so it never waits while it holds room itself.
type Room interface {
	// Reserve takes n bytes, waiting until they are free or ctx ends (its
	// error). n may exceed the whole room: it then waits for the room to be
	// free. release gives the bytes back; it is called once.
	Reserve(ctx context.Context, n int64) (release func(), err error)
	// TryReserve takes n bytes when they are free now.
	TryReserve(n int64) (release func(), ok bool)
}

// ReserveMinBytes is the size from which a watcher reserves a frame's room
// (Options.Room). Smaller frames are bounded by the batch: a batch stops
// growing past 64 KiB.
const ReserveMinBytes = 16 << 10

// makeRoom reserves the room of a frame of o the watcher is about to encode
// for itself alone. It reports whether the frame may be encoded now, and
// whether a reservation was taken for it (release it with releaseHeld when
// the frame turns out not to be held after all). When it may not, the batch
// must end without consuming o: this batch holds a reservation already, or
// has frames and there is no room now, or the watch is ending.
func (w *Watcher) makeRoom(o *Object, dst []byte) (ok, taken bool) {
	if w.room == nil || o == nil {
		return true, false
	}
	n := int64(len(o.Value) + frameOverhead)
	if n < ReserveMinBytes {
		return true, false
	}
	w.heldMu.Lock()
	holding := w.held != nil
	w.heldMu.Unlock()
	if holding {
		return false, false
	}
	var release func()
	if len(dst) == w.batchFrom && len(w.shared) == w.sharedFrom {
		r, err := w.room.Reserve(w.ctx, n)
		if err != nil {
			return false, false // the watch is ending (Next sees its context)
		}
		release = r
	} else if r, free := w.room.TryReserve(n); free {
		release = r
	} else {
		return false, false
	}
	w.heldMu.Lock()
	defer w.heldMu.Unlock()
	if w.stopped {
		release()
		return false, false
	}
	w.held = release
	return true, true
}

// keepRoom settles the reservation makeRoom took for a frame once it is
// encoded: a frame under ReserveMinBytes (a Table row of a large object)
// is bounded by the batch, and its room is given back.
func (w *Watcher) keepRoom(taken bool, frame int) {
	if taken && frame < ReserveMinBytes {
		w.releaseHeld(false)
	}
}

// releaseHeld gives back the room of the last batch (it has been written,
// or the frame needing it was not held after all); with stop, the watch is
// stopped and reserves nothing more.
func (w *Watcher) releaseHeld(stop bool) {
	w.heldMu.Lock()
	release := w.held
	w.held = nil
	if stop {
		w.stopped = true
	}
	w.heldMu.Unlock()
	if release != nil {
		release()
	}
}
