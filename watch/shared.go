package watch

// SharedFrame is a frame of a batch that Watcher.NextShared did not copy:
// it belongs at offset At of the batch's bytes. Frame is the cache's own
// encoding of the event, shared by every watcher that sends it: read-only.
type SharedFrame struct {
	At    int
	Frame []byte
}

// NextShared is Next, except that the frames the cache keeps for its window
// (each event encoded once per representation) of at least minShared bytes
// are not copied into dst: they are appended to shared, in order, each with
// its offset in the returned bytes. Small frames are still copied, so that
// they go out in one write; large ones are written from the one copy the
// cache holds, so a client that stops reading pins no copy of its own. The
// initial events of large objects of the state are shared too, from the
// frame the object keeps (Cache.keepInitialFrame). Frames the cache does not
// keep (events replayed from storage, a PerWatchEncoder's, initial events
// past the budget) are copied.
func (w *Watcher) NextShared(dst []byte, shared []SharedFrame, minShared int) ([]byte, []SharedFrame, error) {
	return w.nextShared(dst, shared, minShared, true)
}

// PollShared is NextShared without its wait for events: when there is
// nothing to send yet it returns dst and shared unchanged and a nil error,
// and the caller calls Wait before it polls again. A caller that lends its
// buffer only to PollShared holds none while the watch is idle. It still
// waits, holding dst, where sending needs it: for room (Options.Room) and
// for a page of initial events read from storage.
func (w *Watcher) PollShared(dst []byte, shared []SharedFrame, minShared int) ([]byte, []SharedFrame, error) {
	return w.nextShared(dst, shared, minShared, false)
}

func (w *Watcher) nextShared(dst []byte, shared []SharedFrame, minShared int, block bool) ([]byte, []SharedFrame, error) {
	w.shareMin, w.shared = minShared, shared
	dst, err := w.next(dst, block)
	shared = w.shared
	w.shareMin, w.shared = 0, nil
	return dst, shared, err
}

// eventEncoder returns the encoder of the watcher's next change event, its
// id in the cache and whether it is per watch: a RestEncoder's Rest once its
// first frame is out.
func (w *Watcher) eventEncoder() (Encoder, uint32, bool) {
	if w.first != nil && w.first.FirstSent() {
		return w.rest, w.restID, false
	}
	return w.enc, w.encID, w.perWatch
}

// appendFrame appends the frame of ev as typ, or records it in w.shared
// when NextShared asked for frames of its size by reference. A frame the
// watcher encodes or copies for itself alone needs room first (makeRoom);
// the cache's own frame of an event in the window, shared, needs none. ok
// is false, and nothing is appended, when the batch must end before ev.
func (w *Watcher) appendFrame(dst []byte, ev *Event, typ EventType) (_ []byte, ok bool, _ error) {
	enc, id, perWatch := w.eventEncoder()
	if !perWatch {
		// The cache's frame, encoded into the event (the window's memory)
		// unless the event has left the window.
		b, cached, err := ev.frame(enc, id, typ)
		if err != nil {
			return dst, true, err
		}
		if cached {
			if w.shareMin > 0 && len(b) >= w.shareMin {
				w.shared = append(w.shared, SharedFrame{At: len(dst), Frame: b})
				return dst, true, nil
			}
			if ok, _ := w.makeRoom(int64(len(b)), dst); !ok { // a copy: its exact size
				return dst, false, nil
			}
			return append(dst, b...), true, nil
		}
	}
	// Encoded for this watcher alone: a per-watch encoder's frame, or an
	// event out of the window (read from storage history).
	ok, taken := w.makeRoom(objectRoom(ev.frameObject(typ)), dst)
	if !ok {
		return dst, false, nil
	}
	n := len(dst)
	dst, err := ev.appendFrame(dst, enc, id, typ, perWatch)
	w.keepRoom(taken, len(dst)-n)
	return dst, true, err
}
