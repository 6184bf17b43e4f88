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
}

// Watcher is one watch. Next gives its frames; Stop ends it. Next must be
// called from one goroutine at a time; Stop may be called from any.
type Watcher struct {
	c         *Cache // nil for an error watcher
	ctx       context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	enc       Encoder
	encID     uint32 // the cache's id of enc (0: none)
	perWatch  bool   // enc is a PerWatchEncoder: its frames are not cached
	prefix    []byte
	filter    func(any) bool
	bookmarks bool
	deadline  time.Time

	// Owned by the consumer (the caller of Next).
	initial      []*Object // initial objects not yet sent
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
	taken        []delivery // taken from the queue, not sent yet
	takenPos     int64      // the position once taken is sent

	// The bookmark timer: armed for nextBookmark, it marks a bookmark as
	// possibly due and wakes the consumer, so that a wait is one channel
	// receive and no clock is read per event. Created with the watcher
	// when it allows bookmarks; its function may run late (a stale arming)
	// and set bookmarkDue early, which only costs a clock read.
	timer       *time.Timer
	bookmarkDue atomic.Bool

	// Guarded by mu (taken under c.mu when both are needed).
	mu     sync.Mutex
	live   bool       // fed by dispatch (also in c.live, under c.mu)
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
	context.AfterFunc(w.ctx, w.Stop)
	return w, nil
}

func (c *Cache) newWatcher(ctx context.Context, opts Options, prefix []byte) *Watcher {
	_, perWatch := opts.Encoder.(PerWatchEncoder)
	w := &Watcher{c: c, enc: opts.Encoder, perWatch: perWatch, prefix: prefix, filter: opts.Filter,
		bookmarks: opts.Bookmarks, notify: make(chan struct{}, 1), id: rand.Uint64()}
	if !perWatch {
		w.encID = c.encoderID(opts.Encoder)
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

// bookmarkTimerFired runs on the timer's goroutine.
func (w *Watcher) bookmarkTimerFired() {
	w.bookmarkDue.Store(true)
	w.signal()
}

// setNextBookmark makes t the time of the next bookmark (zero: none) and
// arms the timer for it. Called by the consumer (or before the watcher is
// published).
func (w *Watcher) setNextBookmark(t time.Time) {
	w.nextBookmark = t
	w.bookmarkDue.Store(false)
	if t.IsZero() {
		w.timer.Stop()
		return
	}
	w.timer.Reset(time.Until(t))
}

// start decides where w starts and registers it.
func (c *Cache) start(ctx context.Context, w *Watcher, opts Options) error {
	if !opts.Initial {
		return c.startFrom(w, opts.Revision)
	}
	w.initialEnd = opts.InitialEventsEnd
	minRev := opts.Revision
	if opts.Consistent {
		cur, err := c.cfg.Storage.CurrentRevision(ctx)
		if err != nil {
			return err
		}
		minRev = max(minRev, cur)
	}
	fresh := true
	if minRev > 0 {
		var err error
		if fresh, err = c.WaitForRevision(ctx, minRev, c.cfg.ConsistentReadWait); err != nil {
			return err
		}
	}
	if fresh {
		ok, err := c.startFromState(w)
		if ok || err != nil {
			return err
		}
	}
	return c.startFromSnapshot(ctx, w, minRev)
}

// startFromState starts w with the cache's state. It reports false when the
// cache keeps none.
func (c *Cache) startFromState(w *Watcher) (bool, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false, c.err
	}
	if c.state == nil {
		c.mu.Unlock()
		return false, nil
	}
	objs := c.stateUnderLocked(w.prefix)
	rev := c.rev.Load()
	w.pos, w.from, w.initialRev = rev, rev, rev
	c.watchers[w] = struct{}{}
	c.mu.Unlock()
	if w.filter != nil {
		kept := objs[:0]
		for _, o := range objs {
			if w.passes(o) {
				kept = append(kept, o)
			}
		}
		clear(objs[len(kept):])
		objs = kept
	}
	w.initial = objs
	return true, nil
}

// startFromSnapshot starts w with a storage snapshot at the latest revision,
// which must be at least minRev.
func (c *Cache) startFromSnapshot(ctx context.Context, w *Watcher, minRev int64) error {
	var objs []*Object
	var rev int64
	var start []byte
	for {
		page, err := c.cfg.Storage.List(ctx, storage.ListOptions{Prefix: w.prefix, StartKey: start, Revision: rev, Limit: listPageSize})
		if err != nil {
			return err
		}
		rev = page.Revision
		for _, kv := range page.Items {
			objs = append(objs, &Object{Key: kv.Key, Value: kv.Value, Revision: kv.Revision})
		}
		if !page.More {
			break
		}
		start = page.NextKey
	}
	if rev < minRev {
		return &storage.FutureRevisionError{Requested: minRev, Current: rev}
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	w.pos, w.from, w.initialRev = rev, rev, rev
	c.watchers[w] = struct{}{}
	c.mu.Unlock()
	w.initial = objs
	return nil
}

// startFrom starts w with the changes after rev (0: the cache's revision),
// from the window or, when rev is older, from storage history.
func (c *Cache) startFrom(w *Watcher, rev int64) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	if rev == 0 {
		rev = c.rev.Load()
	}
	c.watchers[w] = struct{}{}
	w.from = rev
	if rev >= c.oldest {
		w.pos = min(rev, c.rev.Load())
		c.mu.Unlock()
		return nil
	}
	w.pos = rev
	c.mu.Unlock()
	fctx, cancel := context.WithCancel(w.ctx)
	ch, err := c.cfg.Storage.Watch(fctx, storage.WatchOptions{Prefix: w.prefix, FromRevision: rev, ProgressInterval: c.cfg.ProgressInterval})
	if err != nil {
		cancel()
		if errors.Is(err, storage.ErrCompacted) {
			w.fail = err
			return nil
		}
		return err
	}
	w.feed, w.feedCancel = ch, cancel
	return nil
}

// Stop ends the watch and releases it. It may be called more than once.
func (w *Watcher) Stop() {
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
		delete(c.live, w)
		w.mu.Lock()
		w.live = false
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
	w.live = false
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
// then ends the watch.
func (w *Watcher) Next(dst []byte) ([]byte, error) {
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
		n := len(dst)
		if w.initial != nil || w.initialEnd {
			dst = w.appendInitial(dst)
			if len(dst) > n || w.fail != nil {
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
			if len(dst) > n {
				return dst, nil
			}
			continue
		}
		if w.fail != nil {
			continue
		}
		if len(dst) > n {
			return w.appendBookmarkIfDue(dst), nil
		}
		if progressed {
			continue
		}
		if dst = w.appendBookmarkIfDue(dst); len(dst) > n {
			return dst, nil
		}
		if err := w.wait(); err != nil {
			w.finish(err)
		}
	}
}

func (w *Watcher) finish(err error) {
	w.err = err
	w.initial, w.initialEnd, w.taken = nil, false, nil
	if w.feedCancel != nil {
		w.feedCancel()
		w.feed, w.feedCancel, w.pending = nil, nil, nil
	}
	w.Stop()
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

// appendInitial appends a batch of initial events, and the initial-events-end
// bookmark after the last one.
func (w *Watcher) appendInitial(dst []byte) []byte {
	n := 0
	for len(w.initial) > 0 && n < maxBatchEvents && len(dst) < maxBatchBytes {
		o := w.initial[0]
		w.initial[0] = nil
		w.initial = w.initial[1:]
		if w.filter != nil && !w.passes(o) {
			continue
		}
		var err error
		if dst, err = w.enc.AppendEvent(dst, Added, o, o.Revision); err != nil {
			w.fail = err
			return dst
		}
		n++
	}
	if len(w.initial) > 0 {
		return dst
	}
	w.initial = nil
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

// fromCache appends the frames of the events the cache has for w: the queue
// of a live watcher, or a batch replayed from the window. progressed reports
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
	if w.live {
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

	// Catching up: replay a batch from the window, or go live when there
	// is nothing left to replay.
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
			w.live = true
			c.live[w] = struct{}{}
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
			var err error
			if dst, err = ev.appendFrame(dst, w.enc, w.encID, typ, w.perWatch); err != nil {
				w.fail = err
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
		w.taken[i] = delivery{}
		var err error
		if dst, err = d.ev.appendFrame(dst, w.enc, w.encID, d.typ, w.perWatch); err != nil {
			w.fail = err
			w.taken = nil
			return dst
		}
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
			w.pos = sev.Revision
			if sev.Revision <= w.from {
				continue
			}
			ev := newEvent(&sev, nil, time.Time{})
			ev.detached = true
			if typ, ok := w.match(ev); ok {
				var err error
				if dst, err = ev.appendFrame(dst, w.enc, w.encID, typ, w.perWatch); err != nil {
					w.fail = err
					return dst, true, nil
				}
			}
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

// match decides whether the watcher sees ev, and as what.
func (w *Watcher) match(ev *Event) (EventType, bool) {
	if !bytes.HasPrefix(ev.Key(), w.prefix) {
		return 0, false
	}
	if w.filter == nil {
		return ev.Type, true
	}
	cur := ev.Object != nil && w.passes(ev.Object)
	prev := ev.Prev != nil && w.passes(ev.Prev)
	switch {
	case cur && prev:
		return Modified, true
	case cur:
		return Added, true
	case prev:
		return Deleted, true
	}
	return 0, false
}

func (w *Watcher) passes(o *Object) bool {
	a, err := o.attributes(w.c.cfg.Attrs)
	if err != nil {
		w.c.log.Warn("watch cache: cannot filter an object", "key", string(o.Key), "error", err)
		return false
	}
	return w.filter(a)
}

// nextBookmarkTime is when the next periodic bookmark is due: an interval
// from now, or 2s before the deadline when that is sooner; zero when none is.
func (w *Watcher) nextBookmarkTime(now time.Time) time.Time {
	t := now.Add(w.c.cfg.BookmarkInterval)
	if !w.deadline.IsZero() {
		if pre := w.deadline.Add(-2 * time.Second); pre.Before(t) {
			t = pre
		}
		if t.Before(now) {
			return time.Time{}
		}
	}
	return t
}

// appendBookmarkIfDue appends a bookmark at the watcher's position when one
// is due.
func (w *Watcher) appendBookmarkIfDue(dst []byte) []byte {
	if !w.bookmarks || w.nextBookmark.IsZero() || w.initial != nil || w.initialEnd || !w.bookmarkDue.Load() {
		return dst
	}
	now := time.Now()
	if now.Before(w.nextBookmark) {
		return dst // a stale arming fired: the timer is armed for nextBookmark
	}
	w.setNextBookmark(w.nextBookmarkTime(now))
	if w.pos < w.from || w.pos <= 0 {
		return dst // a watch from the future: nothing to confirm yet
	}
	out, err := w.enc.AppendBookmark(dst, w.pos, false)
	if err != nil {
		w.fail = err
		return dst
	}
	return out
}
