// Package watch is kapi's watch cache and broadcaster. It knows storage keys,
// opaque values and revisions, never HTTP or the object format.
//
// A Cache follows one storage prefix (one resource type) with a single storage
// watch and keeps:
//
//   - the current state: the latest version of every object, so that reads at
//     "any" resourceVersion and the synthetic ADDED events that start a watch
//     come from memory (bounded by Settings.StateBytes);
//   - a window of recent events (bounded by count, age and bytes), so that a
//     watch resuming from a recent revision replays from memory;
//   - its watchers. Each event is handed to every live watcher whose prefix
//     and filter it passes, without ever blocking: a watcher has a bounded
//     queue, and one whose queue is full drops it and later replays from the
//     window at its own pace; one that falls behind the window is closed.
//
// A watch from a revision older than the window reads storage history until
// it reaches the window, then continues from the cache; older than storage's
// history, it gets one Error event (410 Gone in the API).
//
// Events are encoded lazily by the watchers' consumers through an Encoder,
// once per event and representation, and the frames are shared.
package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/kapi-dev/kapi/storage"
)

// listPageSize is the page size of the cache's storage lists.
const listPageSize = 1000

// Cache is the watch cache of one storage prefix. It is safe for concurrent
// use. Create it with New and release it with Stop.
type Cache struct {
	cfg Config
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed after the first list
	done   chan struct{} // closed when the cache has stopped

	frameBytes atomic.Int64 // bytes of frames cached by events in the window

	encMu  sync.Mutex
	encIDs map[Encoder]uint32 // see encoderID

	// rev: every change up to it has been applied. Written under mu (with
	// the events it covers dispatched first); read anywhere.
	rev atomic.Int64

	mu          sync.RWMutex
	oldest      int64 // the window holds every change after oldest
	window      ring
	windowBytes int64
	state       *stateTree   // nil when no state is kept
	stateBytes  atomic.Int64 // written under mu; read by Encoding without it
	encBytes    atomic.Int64 // encodings kept by the state's objects (Encoding)
	stateOff    bool         // the state outgrew Settings.StateBytes
	stateRev    int64        // the revision of the last change applied to the state
	snap        *Snapshot    // a clone of the state, nil until a list asks after a change
	retained    []*Snapshot  // older snapshots kept for continued lists (Retain)
	watchers    map[*Watcher]struct{}
	live        map[*Watcher]struct{} // watchers fed by dispatch
	advanced    chan struct{}         // closed and replaced whenever rev advances
	err         error                 // why the cache stopped
	lists       int                   // number of completed lists
}

// New starts a cache. It lists the prefix and follows it in the background;
// calls that need the state wait until the first list is done.
func New(cfg Config) (*Cache, error) {
	if cfg.Storage == nil {
		return nil, errors.New("watch: Config.Storage is required")
	}
	if len(cfg.Prefix) == 0 {
		return nil, errors.New("watch: Config.Prefix is required")
	}
	s, err := cfg.Settings.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Settings = s
	cfg.Prefix = bytes.Clone(cfg.Prefix)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		cfg:      cfg,
		log:      cfg.Logger.With("prefix", string(cfg.Prefix)),
		ctx:      ctx,
		cancel:   cancel,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
		watchers: map[*Watcher]struct{}{},
		live:     map[*Watcher]struct{}{},
		advanced: make(chan struct{}),
		stateOff: cfg.StateBytes < 0,
	}
	go c.run()
	return c, nil
}

// Stop stops the cache and ends its watchers (with ErrStopped). It waits
// until the cache's goroutine has returned.
func (c *Cache) Stop() {
	c.cancel()
	<-c.done
}

// Done is closed when the cache has stopped.
func (c *Cache) Done() <-chan struct{} { return c.done }

// Err returns why the cache stopped (nil while it runs).
func (c *Cache) Err() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.err
}

// Stats describe a cache at one moment.
type Stats struct {
	Revision       int64 // every change up to it is in the cache
	Oldest         int64 // the window holds every change after it
	WindowEvents   int
	WindowBytes    int64 // objects and cached frames
	StateObjects   int   // -1 when no state is kept
	StateBytes     int64
	Watchers       int
	LiveWatchers   int // watchers fed directly (the others replay or start)
	ListsCompleted int
}

// Stats returns the cache's current figures.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := Stats{Revision: c.rev.Load(), Oldest: c.oldest, WindowEvents: c.window.len(),
		WindowBytes: c.windowBytes + c.frameBytes.Load(), StateObjects: -1, StateBytes: c.stateBytes.Load(),
		Watchers: len(c.watchers), LiveWatchers: len(c.live), ListsCompleted: c.lists}
	if c.state != nil {
		st.StateObjects = c.state.Len()
	}
	return st
}

// waitReady waits for the first list.
func (c *Cache) waitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	default:
	}
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Revision returns the revision up to which the cache has applied every
// change, once the cache is ready.
func (c *Cache) Revision(ctx context.Context) (int64, error) {
	if err := c.waitReady(ctx); err != nil {
		return 0, err
	}
	return c.rev.Load(), nil
}

// WaitForRevision waits until the cache has applied every change up to rev,
// for at most d. It reports whether it has.
func (c *Cache) WaitForRevision(ctx context.Context, rev int64, d time.Duration) (bool, error) {
	if err := c.waitReady(ctx); err != nil {
		return false, err
	}
	var timeout <-chan time.Time
	for {
		c.mu.RLock()
		ok, ch, err := c.rev.Load() >= rev, c.advanced, c.err
		c.mu.RUnlock()
		if ok {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if timeout == nil {
			if d <= 0 {
				return false, nil
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			return false, nil
		case <-c.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Attrs returns the filter attributes of an object (Config.Attrs), computed
// at most once per object.
func (c *Cache) Attrs(o *Object) (any, error) { return o.attributes(c.cfg.Attrs) }

// List returns the objects under prefix in key order and the revision of the
// state they form: the cache's state, at whatever revision the cache has
// reached ("any" in the API's terms). ok is false when the cache keeps no
// state; the caller then reads storage. The slice is shared: do not modify it.
func (c *Cache) List(ctx context.Context, prefix []byte) (objs []*Object, rev int64, ok bool, err error) {
	sn, ok, err := c.Snapshot(ctx)
	if !ok || err != nil {
		return nil, 0, false, err
	}
	return sn.Under(prefix), sn.rev, true, nil
}

// Snapshot returns the cache's state as it is, sorted by key; ok is false
// when the cache keeps no state.
func (c *Cache) Snapshot(ctx context.Context) (_ *Snapshot, ok bool, _ error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, false, err
	}
	c.mu.RLock()
	sn, kept := c.snap, c.state != nil
	c.mu.RUnlock()
	if !kept {
		return nil, false, nil
	}
	if sn == nil {
		c.mu.Lock()
		sn = c.snapshotLocked()
		c.mu.Unlock()
		if sn == nil {
			return nil, false, nil
		}
	}
	return sn, true, nil
}

// Encoding returns the encoding of o, an object of the cache's state,
// named tag (a representation: "protobuf"), made by enc. The object keeps
// it for the next callers (it never changes: an object is one version)
// while the state and the encodings its objects keep fit in
// Settings.StateBytes together; past that, enc runs every time. The bytes
// are shared: do not modify them.
func (c *Cache) Encoding(o *Object, tag string, enc func(o *Object) ([]byte, error)) ([]byte, error) {
	if b, ok := o.keptEncoding(tag); ok {
		return b, nil
	}
	b, err := enc(o)
	if err != nil {
		return nil, err
	}
	n := int64(len(b))
	if c.stateBytes.Load()+c.encBytes.Load()+n > c.cfg.StateBytes {
		return b, nil
	}
	// Only an object of the current state keeps an encoding: the budget is
	// given back when the state replaces or drops it (applyStateLocked),
	// which has already happened to an object of an older snapshot.
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return b, nil
	}
	if cur, ok := c.state.Get(o); !ok || cur != o {
		return b, nil
	}
	b, kept := o.keepEncoding(tag, b)
	if kept {
		c.encBytes.Add(n)
	}
	return b, nil
}

// KeepsState reports, once the cache is ready, whether it keeps the state
// (List, Snapshot, SnapshotAt and Get can serve reads).
func (c *Cache) KeepsState(ctx context.Context) (bool, error) {
	if err := c.waitReady(ctx); err != nil {
		return false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state != nil, nil
}

// SnapshotAt returns the state as it was at revision rev, when the cache
// still has it: the current snapshot, or one kept by Retain.
func (c *Cache) SnapshotAt(rev int64) (*Snapshot, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return nil, false
	}
	if sn := c.snap; sn != nil && sn.covers(rev) {
		return sn, true
	}
	now := time.Now()
	for _, sn := range c.retained {
		if sn.covers(rev) && now.Sub(time.Unix(0, sn.used.Load())) <= c.cfg.RetainFor {
			sn.used.Store(now.UnixNano())
			return sn, true
		}
	}
	return nil, false
}

// Retain keeps sn (from Snapshot or SnapshotAt) for later SnapshotAt
// calls, so that the pages of a list continue from memory even after
// the state has changed. At most Settings.RetainedSnapshots are kept, each
// until it has gone unused for Settings.RetainFor; older ones are dropped
// first.
func (c *Cache) Retain(sn *Snapshot) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireRetainedLocked(now)
	if c.cfg.RetainedSnapshots <= 0 || c.state == nil {
		return
	}
	sn.used.Store(now.UnixNano())
	for _, r := range c.retained {
		if r == sn || (r.from == sn.from && r.rev >= sn.rev) {
			r.used.Store(now.UnixNano())
			return
		}
	}
	if len(c.retained) >= c.cfg.RetainedSnapshots {
		c.retained[0] = nil
		c.retained = c.retained[1:]
	}
	c.retained = append(c.retained, sn)
}

func (c *Cache) expireRetainedLocked(now time.Time) {
	kept := c.retained[:0]
	for _, sn := range c.retained {
		if now.Sub(time.Unix(0, sn.used.Load())) <= c.cfg.RetainFor {
			kept = append(kept, sn)
		}
	}
	clear(c.retained[len(kept):])
	c.retained = kept
}

// Fresh waits until the cache has applied every change up to rev, for at
// most Settings.ConsistentReadWait, asking storage for a progress report when it is behind (a change
// to another prefix advances the store's revision without an event here).
// It reports whether the cache got there.
func (c *Cache) Fresh(ctx context.Context, rev int64) (bool, error) {
	if err := c.waitReady(ctx); err != nil {
		return false, err
	}
	if c.rev.Load() >= rev {
		return true, nil
	}
	if pr, ok := c.cfg.Storage.(storage.ProgressRequester); ok {
		if err := pr.RequestProgress(ctx); err != nil {
			c.log.Debug("watch cache: progress request failed", "error", err)
		}
	}
	return c.WaitForRevision(ctx, rev, c.cfg.ConsistentReadWait)
}

// Get returns the object with key from the cache's state (nil when there is
// none) and the state's revision. ok is false when the cache keeps no state.
func (c *Cache) Get(ctx context.Context, key []byte) (obj *Object, rev int64, ok bool, err error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, 0, false, err
	}
	obj, rev, ok = c.lookup(key)
	return obj, rev, ok, nil
}

// Peek is Get without waiting: ok is false when the cache is not ready yet,
// has stopped, or keeps no state.
func (c *Cache) Peek(key []byte) (obj *Object, rev int64, ok bool) {
	select {
	case <-c.ready:
	default:
		return nil, 0, false
	}
	select {
	case <-c.done:
		return nil, 0, false
	default:
	}
	return c.lookup(key)
}

// lookup is Get and Peek once the cache is ready.
func (c *Cache) lookup(key []byte) (obj *Object, rev int64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return nil, 0, false
	}
	o, _ := c.state.Get(&Object{Key: key})
	return o, c.rev.Load(), true
}

// snapshotLocked returns a snapshot of the current state, cloning the state
// if a change was applied since the last one (c.mu held for writing).
func (c *Cache) snapshotLocked() *Snapshot {
	if c.state == nil {
		return nil
	}
	if c.snap == nil {
		// A clone is O(1): the state and the clone share their nodes until
		// the state's next change copies the ones it touches.
		c.snap = &Snapshot{from: c.stateRev, rev: c.rev.Load(), tree: c.state.Clone(), memo: &snapshotMemo{}}
	}
	return c.snap
}

// stateUnderLocked returns the state's objects under prefix in key order in a
// new slice (c.mu held for writing; the state is kept).
func (c *Cache) stateUnderLocked(prefix []byte) []*Object {
	return slices.Clone(c.snapshotLocked().Under(prefix))
}

// stateTree is the cache's state: the latest version of every object, by key.
type stateTree = btree.BTreeG[*Object]

func newStateTree() *stateTree {
	return btree.NewG(32, func(a, b *Object) bool { return bytes.Compare(a.Key, b.Key) < 0 })
}

// Snapshot is the state at the revisions from..rev (no change in between):
// a copy-on-write clone of the state's B-tree, read by key range. It is
// shared and never modified.
type Snapshot struct {
	from, rev int64
	tree      *stateTree    // a copy-on-write clone of the state, never written
	memo      *snapshotMemo // shared by the snapshots of the same state
	used      atomic.Int64  // unix nanoseconds of the last use, for Retain
}

// snapshotMemo holds what lists computed once per state (Memo, Under).
type snapshotMemo struct {
	mu    sync.Mutex
	m     map[any]int
	under map[string][]*Object // Under's answers, by prefix
}

// memoized returns m[key], computing it with f and storing it on first use
// (under mu, but not while f runs: concurrent first calls may each compute
// it, and the first to store wins, so every caller sees one value).
func memoized[K comparable, V any](mu *sync.Mutex, m *map[K]V, key K, f func() (V, error)) (V, error) {
	mu.Lock()
	v, ok := (*m)[key]
	mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := f()
	if err != nil {
		return v, err
	}
	mu.Lock()
	defer mu.Unlock()
	if prev, ok := (*m)[key]; ok {
		return prev, nil
	}
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[key] = v
	return v, nil
}

// Memo returns what f computes for key, computing it at most once per
// state (concurrent first calls may each compute it): for facts that depend
// only on the snapshot's objects, such as the total size of some of their
// encodings, that every list of the same state can reuse. key must say
// everything f depends on besides the objects.
func (sn *Snapshot) Memo(key any, f func() (int, error)) (int, error) {
	return memoized(&sn.memo.mu, &sn.memo.m, key, f)
}

func (sn *Snapshot) covers(rev int64) bool { return sn.from <= rev && rev <= sn.rev }

// under returns the objects whose keys start with prefix.
// Revision is the revision of the state (the cache's revision when it was
// taken, or later when nothing changed since).
func (sn *Snapshot) Revision() int64 { return sn.rev }

// Under returns the objects whose keys start with prefix, in key order. The
// slice is shared (every list of the same prefix and state gets the same
// one): do not modify it. It costs the size of the answer, not of the state:
// a namespace's list reads only that namespace.
func (sn *Snapshot) Under(prefix []byte) []*Object {
	objs, _ := memoized(&sn.memo.mu, &sn.memo.under, string(prefix), func() ([]*Object, error) {
		var objs []*Object
		sn.tree.AscendGreaterOrEqual(&Object{Key: prefix}, func(o *Object) bool {
			if !bytes.HasPrefix(o.Key, prefix) {
				return false
			}
			objs = append(objs, o)
			return true
		})
		return objs[:len(objs):len(objs)], nil
	})
	return objs
}

// run lists and follows the prefix until the cache is stopped or the store
// closes, recovering from storage watch failures.
func (c *Cache) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	needList := true
	var err error
	for {
		if needList {
			if err = c.list(); err == nil {
				needList = false
				backoff = 100 * time.Millisecond
			}
		}
		if err == nil {
			err = c.follow()
		}
		switch {
		case c.ctx.Err() != nil:
			c.shutdown(ErrStopped)
			return
		case errors.Is(err, storage.ErrClosed):
			c.shutdown(storage.ErrClosed)
			return
		case errors.Is(err, storage.ErrCompacted):
			// The cache fell behind storage history: list again.
			needList = true
		}
		c.log.Warn("watch cache: storage watch failed; retrying", "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			c.shutdown(ErrStopped)
			return
		}
		backoff = min(2*backoff, 5*time.Second)
		err = nil
	}
}

// shutdown ends every watcher with err.
func (c *Cache) shutdown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	for w := range c.watchers {
		w.closeLocked(err)
	}
	clear(c.watchers)
	clear(c.live)
	c.window.reset()
	c.state, c.snap, c.retained = nil, nil, nil
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// list reads the prefix from a storage snapshot and makes it the cache's
// state. A list after the first breaks the continuity of every watcher.
func (c *Cache) list() error {
	st := c.cfg.Storage
	var state *stateTree
	c.mu.RLock()
	keep := !c.stateOff
	c.mu.RUnlock()
	if keep {
		state = newStateTree()
	}
	var size, rev int64
	var start []byte
	for {
		opts := storage.ListOptions{Prefix: c.cfg.Prefix, StartKey: start, Revision: rev, Limit: listPageSize}
		if state == nil {
			opts.Limit, opts.KeysOnly = 1, true // only the revision is needed
		}
		page, err := st.List(c.ctx, opts)
		if err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		rev = page.Revision
		if state != nil {
			for _, kv := range page.Items {
				o := &Object{Key: kv.Key, Value: kv.Value, Revision: kv.Revision}
				state.ReplaceOrInsert(o)
				size += o.size()
			}
			if size > c.cfg.StateBytes {
				c.log.Warn("watch cache: the state is larger than Settings.StateBytes; serving initial state from storage",
					"limit", c.cfg.StateBytes)
				state, size = nil, 0
				c.mu.Lock()
				c.stateOff = true
				c.mu.Unlock()
			}
		}
		if state == nil || !page.More {
			break
		}
		start = page.NextKey
	}
	if rev == 0 {
		// Nothing was ever written: a watch from revision 0 would start "from
		// now" and could miss a write made meanwhile. Wait for one.
		return fmt.Errorf("listing: the store has no revision yet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists > 0 {
		for w := range c.watchers {
			w.closeLocked(ErrResync)
			delete(c.watchers, w)
		}
		clear(c.live)
	}
	for c.window.len() > 0 {
		c.frameBytes.Add(-c.window.pop().detach())
	}
	c.window.reset()
	c.windowBytes = 0
	c.state = state
	c.stateBytes.Store(size)
	c.encBytes.Store(0)
	c.stateRev, c.snap, c.retained = rev, nil, nil
	c.rev.Store(rev)
	c.oldest = rev
	c.lists++
	c.advanceLocked()
	if c.lists == 1 {
		close(c.ready)
	}
	return nil
}

// follow applies the storage watch from the cache's revision until it fails.
func (c *Cache) follow() error {
	from := c.rev.Load()
	evs, err := c.cfg.Storage.Watch(c.ctx, storage.WatchOptions{
		Prefix: c.cfg.Prefix, FromRevision: from, ProgressInterval: c.cfg.ProgressInterval,
	})
	if err != nil {
		return err
	}
	batch := make([]storage.Event, 0, 256)
	for {
		var ev storage.Event
		var ok bool
		select {
		case ev, ok = <-evs:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if !ok {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			return errors.New("storage watch ended")
		}
		batch = append(batch[:0], ev)
	drain:
		for len(batch) < cap(batch) {
			select {
			case ev, ok = <-evs:
				if !ok {
					break drain
				}
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		err := c.apply(batch)
		clear(batch)
		if err != nil {
			return err
		}
	}
}

// apply applies a batch of storage events: state, window, dispatch.
func (c *Cache) apply(batch []storage.Event) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for i := range batch {
		sev := &batch[i]
		switch sev.Type {
		case storage.EventProgress:
			if sev.Revision > c.rev.Load() {
				c.rev.Store(sev.Revision)
				if sn := c.snap; sn != nil {
					// No change since: the snapshot is this revision's too.
					c.snap = &Snapshot{from: sn.from, rev: sev.Revision, tree: sn.tree, memo: sn.memo}
				}
			}
		case storage.EventPut, storage.EventDelete:
			if sev.Revision <= c.rev.Load() {
				continue
			}
			var prev *Object
			if c.state != nil {
				prev, _ = c.state.Get(&Object{Key: sev.Key})
			}
			ev := newEvent(sev, prev, now)
			ev.counter = &c.frameBytes
			c.applyStateLocked(ev)
			c.window.push(ev)
			c.windowBytes += ev.size
			c.dispatchLocked(ev)
			c.rev.Store(sev.Revision)
		case storage.EventError:
			if err == nil {
				err = sev.Err
				if err == nil {
					err = errors.New("storage watch failed")
				}
			}
		}
		if err != nil {
			break
		}
	}
	c.evictLocked(now)
	c.expireRetainedLocked(now)
	c.advanceLocked()
	return err
}

func (c *Cache) advanceLocked() {
	close(c.advanced)
	c.advanced = make(chan struct{})
}

func (c *Cache) applyStateLocked(ev *Event) {
	if c.state == nil {
		return
	}
	c.stateRev, c.snap = ev.Revision, nil
	if ev.Type == Deleted {
		if old, ok := c.state.Delete(&Object{Key: ev.Key()}); ok {
			c.stateBytes.Add(-old.size())
			c.encBytes.Add(-old.keptSize())
		}
		return
	}
	if old, ok := c.state.ReplaceOrInsert(ev.Object); ok {
		c.stateBytes.Add(-old.size())
		c.encBytes.Add(-old.keptSize())
	}
	if c.stateBytes.Add(ev.Object.size()) > c.cfg.StateBytes {
		c.log.Warn("watch cache: the state is larger than Settings.StateBytes; serving initial state from storage",
			"limit", c.cfg.StateBytes, "objects", c.state.Len())
		c.state, c.stateOff, c.retained = nil, true, nil
		c.stateBytes.Store(0)
		c.encBytes.Store(0)
	}
}

func (c *Cache) evictLocked(now time.Time) {
	for c.window.len() > 0 {
		ev := c.window.at(0)
		if c.window.len() <= c.cfg.WindowEvents &&
			c.windowBytes+c.frameBytes.Load() <= c.cfg.WindowBytes &&
			now.Sub(ev.at) <= c.cfg.WindowAge {
			return
		}
		c.window.pop()
		c.windowBytes -= ev.size
		c.frameBytes.Add(-ev.detach())
		c.oldest = ev.Revision
	}
}

// dispatchLocked hands ev to every live watcher that wants it. It never
// blocks: a watcher whose queue is full stops being live and later replays
// from the window.
func (c *Cache) dispatchLocked(ev *Event) {
	for w := range c.live {
		if ev.Revision <= w.from {
			continue
		}
		typ, ok := w.match(ev)
		if !ok {
			continue
		}
		w.mu.Lock()
		if len(w.queue) >= c.cfg.WatcherBuffer {
			w.live = false
			clear(w.queue)
			w.queue = w.queue[:0]
			w.mu.Unlock()
			c.log.Debug("watch cache: watcher is behind; it will replay from the window", "watcher", w.id)
			delete(c.live, w)
			w.signal()
			continue
		}
		w.queue = append(w.queue, delivery{ev: ev, typ: typ})
		w.mu.Unlock()
		w.signal()
	}
}
