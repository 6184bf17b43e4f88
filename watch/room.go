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
//
// A watcher that reads from storage (initial events from a snapshot when
// the cache keeps no state, or history older than the window) holds what
// it read (a page, or the events storage buffers for it) and reserves that
// once, before it starts (3 MiB), waiting in Cache.Watch; it keeps the
// reservation until it has read the last of storage and written the batch
// that holds it. Its frames need no room of their own meanwhile:
// the watches that may encode them are those that hold a storage
// reservation.
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

// storageRoom is what a watcher reading from storage reserves: a page of
// initial events (at most listPageBytes, plus the object that crosses it,
// up to a value's 2 MiB), or a history replay's storage buffers
// (WatchOptions.BufferBytes, which Badger applies to its buffer, its
// change-log chunk and the channel).
const storageRoom = 3 * listPageBytes

// reserveStorage reserves the room of a watcher that is about to read from
// storage (see Room), waiting for it (it holds nothing yet) until the watch
// or the cache ends.
func (w *Watcher) reserveStorage() error {
	if w.room == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(w.ctx)
	defer context.AfterFunc(w.c.ctx, cancel)()
	defer cancel()
	release, err := w.room.Reserve(ctx, storageRoom)
	if err != nil {
		if w.c.ctx.Err() != nil {
			return ErrStopped
		}
		return err
	}
	w.heldMu.Lock()
	defer w.heldMu.Unlock()
	if w.stopped {
		release()
		return ErrEnded
	}
	w.storageHeld = release
	return nil
}

// dropStorage gives back the storage reservation of a watcher that will
// read nothing from storage after all (its start failed).
func (w *Watcher) dropStorage() {
	w.heldMu.Lock()
	release := w.storageHeld
	w.storageHeld = nil
	w.heldMu.Unlock()
	if release != nil {
		release()
	}
}

// storageDone says the watcher has read the last of storage: its storage
// reservation becomes that of the batch being built (dst), given back once
// that batch is written (at the next Next), or at once when the batch is
// empty.
func (w *Watcher) storageDone(dst []byte) {
	w.heldMu.Lock()
	release := w.storageHeld
	w.storageHeld = nil
	if release != nil && !w.batchEmpty(dst) {
		release, w.held = w.held, release
	}
	w.heldMu.Unlock()
	if release != nil {
		release()
	}
}

// batchEmpty reports whether the batch being built (dst) has no frame yet.
func (w *Watcher) batchEmpty(dst []byte) bool {
	return len(dst) == w.batchFrom && len(w.shared) == w.sharedFrom
}

// objectRoom is the room a frame of o takes, as far as o tells: about its
// value (a Table row of it may be much smaller; keepRoom then gives the
// room back).
func objectRoom(o *Object) int64 {
	if o == nil {
		return 0
	}
	return int64(len(o.Value) + frameOverhead)
}

// makeRoom reserves the room of a frame of about n bytes the watcher is
// about to encode or copy for itself alone. It reports whether the frame
// may be encoded now, and whether a reservation was taken for it (release
// it with releaseHeld when the frame turns out not to be held after all).
// When it may not, the batch must end without consuming the item: this
// batch holds a reservation already, or has frames and there is no room
// now, or the watch is ending.
func (w *Watcher) makeRoom(n int64, dst []byte) (ok, taken bool) {
	if w.room == nil || n < ReserveMinBytes {
		return true, false
	}
	empty := w.batchEmpty(dst)
	w.heldMu.Lock()
	holding, fromStorage := w.held != nil, w.storageHeld != nil
	w.heldMu.Unlock()
	if fromStorage {
		return true, false // covered by the storage reservation
	}
	if holding && !empty {
		return false, false
	}
	if holding { // it covers no frame of this batch
		w.releaseHeld(false)
	}
	var release func()
	if empty {
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
// stopped: it gives back its storage reservation too and reserves nothing
// more.
func (w *Watcher) releaseHeld(stop bool) {
	w.heldMu.Lock()
	release, storage := w.held, func() {}
	w.held = nil
	if stop {
		w.stopped = true
		if w.storageHeld != nil {
			storage, w.storageHeld = w.storageHeld, nil
		}
	}
	w.heldMu.Unlock()
	if release != nil {
		release()
	}
	storage()
}
