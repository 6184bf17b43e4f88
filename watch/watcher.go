package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// Bounds of what one call to Watcher.Next returns.
const (
	maxBatchEvents = 256
	maxBatchBytes  = 64 << 10
)

// Options say what a watch sees and where it starts.
type Options struct {
	// Prefix restricts the watch to keys under it (e.g. one namespace). It
	// must lie under the cache's prefix. Default: the cache's prefix.
	Prefix []byte
	// Filter, when set, keeps only objects whose attributes (Config.Attrs)
	// it accepts. A change that makes an object stop matching is sent as
	// Deleted (with the previous object at the change's revision), one that
	// makes it start matching as Added.
	Filter func(attrs any) bool
	// Encoder encodes the watch's events. Required.
	Encoder Encoder

	// Initial starts the watch with an Added event for every object of a
	// start state, then sends the changes after that state.
	Initial bool
	// Consistent, with Initial, makes the start state at least as new as the
	// storage's current revision when the watch starts ("most recent").
	Consistent bool
	// Revision: with Initial, the start state is at least this revision
	// (0: any, the cache's current state); without Initial, the watch sends
	// the changes after this revision (0: after the cache's current one).
	Revision int64
	// InitialEventsEnd, with Initial, sends a Bookmark marked as the end of
	// the initial events once they are sent.
	InitialEventsEnd bool

	// Bookmarks sends a Bookmark every Settings.BookmarkInterval when idle,
	// and one 2s before the watch's deadline.
	Bookmarks bool

	// Room, when set, is asked for the memory of the large frames the
	// watch encodes for itself alone and of what it reads from storage
	// (see Room). Default: no bound.
	Room Room
}

// Watcher is one watch. Next gives its frames; Stop ends it. Next must be
// called from one goroutine at a time; Stop may be called from any.
//
// A watcher first sends its initial events, if it has any. Then it catches
// up by itself: from storage history while it is behind the cache's window
// of recent events, then from the window. Once nothing is left to replay it
// is synced: the cache hands it every new event through its queue. A synced
// watcher whose queue fills up (its client reads too slowly) drops the
// queue and catches up from the window again; one that falls behind the
// window ends with ErrTooSlow.
type Watcher struct {
	c         *Cache // nil for an error watcher
	ctx       context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	enc       Encoder
	encID     uint32      // the cache's id of enc (0: none)
	perWatch  bool        // enc is a PerWatchEncoder: its frames are not cached
	first     RestEncoder // enc, when it is one: change events after its first frame are rest's
	rest      Encoder
	restID    uint32
	room      Room
	prefix    []byte
	filter    func(any) bool
	bookmarks bool
	deadline  time.Time

	// Owned by the consumer (the caller of Next).
	initial      []*Object // initial objects not yet sent
	initialNext  []byte    // from storage: the key of the next page of initial objects, nil after the last
	initialRev   int64     // the revision of the initial state
	initialEnd   bool      // the initial-events-end bookmark is still to send
	pos          int64     // every change up to pos has been handled
	from         int64     // changes up to from are never sent
	fail         error     // to send as an Error event; the watch then ends
	err          error     // the watch is over
	feed         <-chan storage.Event
	feedCancel   context.CancelFunc
	pending      *storage.Event // received from feed while waiting
	nextBookmark time.Time      // zero: none
	scratch      []*Event
	spare        []delivery
	taken        []delivery    // taken from the queue, not sent yet
	takenPos     int64         // the position once taken is sent
	shareMin     int           // during NextShared: the size of frames sent by reference
	shared       []SharedFrame // during NextShared: the frames sent by reference
	batchFrom    int           // during Next: len(dst) when it was called
	sharedFrom   int           // during Next: len(shared) when it was called

	// The bookmark timer: armed for nextBookmark, it marks a bookmark as
	// possibly due and wakes the consumer, so that a wait is one channel
	// receive and no clock is read per event. Created with the watcher
	// when it allows bookmarks; its function may run late (a stale arming)
	// and set bookmarkDue early, which only costs a clock read.
	timer       *time.Timer
	bookmarkDue atomic.Bool

	// The room reserved for the last batch (Options.Room), and whether the
	// watch is stopped (a reservation granted since is given back at once).
	heldMu      sync.Mutex
	held        func()
	storageHeld func() // while the watcher reads from storage (see Room)
	stopped     bool

	// Guarded by mu (taken under c.mu when both are needed).
	mu     sync.Mutex
	synced bool       // fed by dispatch (also in c.synced, under c.mu)
	queue  []delivery // dispatched, not yet taken
	closed error      // set when the watch is over
	notify chan struct{}
	id     uint64
}

type delivery struct {
	ev  *Event
	typ EventType
}

// NewErrorWatcher returns a watcher that sends one Error event for err and
// ends.
func NewErrorWatcher(enc Encoder, err error) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &Watcher{ctx: ctx, cancel: cancel, enc: enc, fail: err}
}

// Watch starts a watch. It waits for the cache's first list and, for a
// consistent or not-older-than start state, for the cache to catch up
// (Settings.ConsistentReadWait) before it reads a storage snapshot instead.
// The watch ends when ctx ends, when Stop is called, when its deadline passes
// (ctx's, or Settings.Timeout with jitter) or when the cache stops.
//
// A watch from a revision older than the window reads storage history; when
// that is compacted too, the watch sends one Error event carrying a
// *storage.CompactedError. A start state that storage has not reached is a
// *storage.FutureRevisionError.
func (c *Cache) Watch(ctx context.Context, opts Options) (*Watcher, error) {
	if opts.Encoder == nil {
		return nil, errors.New("watch: Options.Encoder is required")
	}
	if _, perWatch := opts.Encoder.(PerWatchEncoder); !perWatch && !reflect.TypeOf(opts.Encoder).Comparable() {
		// Frames are cached per encoder value (see Encoder): comparing or
		// hashing this one would panic. (A struct type with interface
		// fields passes this check; what they hold must be comparable.)
		return nil, fmt.Errorf("watch: Options.Encoder of type %T is not comparable: use a pointer, or implement PerWatchEncoder", opts.Encoder)
	}
	if re, ok := opts.Encoder.(RestEncoder); ok && !reflect.TypeOf(re.Rest()).Comparable() {
		return nil, fmt.Errorf("watch: the Rest encoder of type %T is not comparable", re.Rest())
	}
	prefix := opts.Prefix
	if prefix == nil {
		prefix = c.cfg.Prefix
	} else if !bytes.HasPrefix(prefix, c.cfg.Prefix) {
		return nil, fmt.Errorf("watch: prefix %q is not under the cache's prefix %q", prefix, c.cfg.Prefix)
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	w := c.newWatcher(ctx, opts, bytes.Clone(prefix))
	if err := c.start(ctx, w, opts); err != nil {
		w.Stop()
		return nil, err
	}
	context.AfterFunc(w.ctx, w.end)
	return w, nil
}

func (c *Cache) newWatcher(ctx context.Context, opts Options, prefix []byte) *Watcher {
	_, perWatch := opts.Encoder.(PerWatchEncoder)
	w := &Watcher{c: c, enc: opts.Encoder, perWatch: perWatch, prefix: prefix, filter: opts.Filter,
		bookmarks: opts.Bookmarks, room: opts.Room, notify: make(chan struct{}, 1), id: rand.Uint64()}
	if !perWatch {
		w.encID = c.encoderID(opts.Encoder)
	}
	if re, ok := opts.Encoder.(RestEncoder); ok {
		w.first, w.rest = re, re.Rest()
		w.restID = c.encoderID(w.rest)
	}
	if dl, ok := ctx.Deadline(); ok {
		w.deadline = dl
		w.ctx, w.cancel = context.WithCancel(ctx)
	} else if c.cfg.Timeout > 0 {
		d := c.cfg.Timeout + rand.N(c.cfg.Timeout)
		w.deadline = time.Now().Add(d)
		w.ctx, w.cancel = context.WithDeadline(ctx, w.deadline)
	} else {
		w.ctx, w.cancel = context.WithCancel(ctx)
	}
	if w.bookmarks {
		w.timer = time.AfterFunc(time.Hour, w.bookmarkTimerFired)
		w.setNextBookmark(w.nextBookmarkTime(time.Now()))
	}
	return w
}

// maxEncoderIDs bounds the encoders a cache numbers; more (there are a few
// per representation in practice) compare by value.
const maxEncoderIDs = 1024

// encoderID returns the cache's id of a shared (comparable) encoder: equal
// encoders get the same id, so that a watcher finds an event's cached frame
// by comparing a number. 0 means none.
func (c *Cache) encoderID(enc Encoder) uint32 {
	c.encMu.Lock()
	defer c.encMu.Unlock()
	if id, ok := c.encIDs[enc]; ok {
		return id
	}
	if len(c.encIDs) >= maxEncoderIDs {
		return 0
	}
	if c.encIDs == nil {
		c.encIDs = map[Encoder]uint32{}
	}
	id := uint32(len(c.encIDs) + 1)
	c.encIDs[enc] = id
	return id
}

// Stop ends the watch and releases it, with the room its last batch held
// (Options.Room): call it once that batch is written. It may be called
// more than once.
func (w *Watcher) Stop() {
	w.end()
	w.releaseHeld(true)
}

// end ends the watch. The room of the batch last returned stays held: the
// caller may still be writing it (Next or Stop gives it back).
func (w *Watcher) end() {
	w.stopOnce.Do(func() {
		w.cancel()
		if w.timer != nil {
			w.timer.Stop()
		}
		c := w.c
		if c == nil {
			return
		}
		c.mu.Lock()
		delete(c.watchers, w)
		delete(c.synced, w)
		w.mu.Lock()
		w.synced = false
		clear(w.queue)
		w.queue = nil
		if w.closed == nil {
			w.closed = ErrEnded
		}
		w.mu.Unlock()
		c.mu.Unlock()
		w.signal() // a consumer in wait sees the end (Stop runs when ctx ends)
	})
}

// closeLocked ends the watcher from the cache's side. c.mu is held.
func (w *Watcher) closeLocked(err error) {
	w.mu.Lock()
	if w.closed == nil {
		w.closed = err
	}
	w.synced = false
	clear(w.queue)
	w.queue = nil
	w.mu.Unlock()
	w.signal()
}

func (w *Watcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Next appends the frames of the next events to dst, waiting until there is
// at least one. When the watch is over it returns the frames it has and,
// from then on, an error: ErrEnded (its context ended or Stop was called),
// ErrTooSlow, ErrStopped, ErrResync or a storage error. An Error event (too
// old resourceVersion, a value that does not encode) is sent as a frame and
// then ends the watch. Calling Next again says the last batch has been
// written: its room (Options.Room) is given back.
func (w *Watcher) Next(dst []byte) ([]byte, error) {
	return w.next(dst, true)
}

// next is Next; without block it returns dst unchanged and a nil error
// where Next would wait.
func (w *Watcher) next(dst []byte, block bool) ([]byte, error) {
	if w.room != nil {
		w.releaseHeld(false) // the last batch has been written
	}
	w.batchFrom, w.sharedFrom = len(dst), len(w.shared)
	for {
		if w.err != nil {
			return dst, w.err
		}
		if w.fail != nil {
			dst = w.enc.AppendError(dst, w.fail)
			w.finish(ErrEnded)
			return dst, nil
		}
		if err := w.ctx.Err(); err != nil {
			w.finish(ErrEnded)
			continue
		}
		n, ns := len(dst), len(w.shared) // what this pass sends: more bytes or more shared frames
		if w.initial != nil || w.initialNext != nil || w.initialEnd {
			dst = w.appendInitial(dst)
			if len(dst) > n || len(w.shared) > ns || w.fail != nil {
				return dst, nil
			}
			continue
		}
		var progressed bool
		var err error
		if w.feed != nil {
			dst, progressed, err = w.fromStorage(dst)
		} else {
			dst, progressed, err = w.fromCache(dst)
		}
		if err != nil {
			w.finish(err)
			if len(dst) > n || len(w.shared) > ns {
				return dst, nil
			}
			continue
		}
		if w.fail != nil {
			continue
		}
		if len(dst) > n || len(w.shared) > ns {
			return w.appendBookmarkIfDue(dst), nil
		}
		if progressed {
			continue
		}
		if dst = w.appendBookmarkIfDue(dst); len(dst) > n || !block {
			return dst, nil
		}
		if w.fail != nil {
			continue // a bookmark that did not encode: its Error event now
		}
		if err := w.wait(); err != nil {
			w.finish(err)
		}
	}
}

// Wait blocks until something may have changed for the watcher since
// PollShared found nothing to send: an event, a bookmark due, its end. It
// holds no batch, so a watch that waits here keeps no buffer while idle.
// Like Next, it is called by the watch's one consumer.
func (w *Watcher) Wait() {
	if w.err != nil || w.fail != nil { // over, or its Error event to send
		return
	}
	if err := w.wait(); err != nil {
		w.finish(err)
	}
}

func (w *Watcher) finish(err error) {
	w.err = err
	w.initial, w.initialNext, w.initialEnd, w.taken = nil, nil, false, nil
	if w.feedCancel != nil {
		w.feedCancel()
		w.feed, w.feedCancel, w.pending = nil, nil, nil
	}
	w.end()
}

// wait blocks until something may have changed for the watcher. Everything
// that may matter signals notify: dispatch, the cache's end, the bookmark
// timer, and Stop (which runs when the watch's context ends), so that
// without a storage feed a wait is one channel receive.
func (w *Watcher) wait() error {
	if w.feed == nil || w.pending != nil {
		<-w.notify
		return nil
	}
	select {
	case <-w.notify:
	case ev, ok := <-w.feed:
		if !ok {
			return ErrEnded
		}
		w.pending = &ev
	}
	return nil
}
