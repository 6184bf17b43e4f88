// Package watch is kapi's watch cache and broadcaster. It knows storage keys,
// opaque values and revisions, never HTTP or the object format.
//
// A Cache follows one storage prefix (one resource type) with a single storage
// watch and keeps:
//
//   - the current state: the latest version of every object, so that reads at
//     "any" resourceVersion and the synthetic ADDED events that start a watch
//     come from memory, within a memory budget that several caches may share
//     (Budget);
//   - a window of recent events (bounded by count, age and bytes), so that a
//     watch resuming from a recent revision replays from memory;
//   - its watchers. Each event is handed to every synced watcher whose prefix
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
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// listPageSize and listPageBytes bound the pages of the cache's storage
// lists: a watch that reads its initial events from storage holds one page
// (and the object that filled it) at a time. listPageBytes also bounds what
// storage buffers for a watch that replays storage history.
const (
	listPageSize  = 1000
	listPageBytes = 1 << 20
)

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
	windowShare int64        // window bytes charged to the budget (Budget.chargeWindow)
	state       *stateTree   // nil when no state is kept
	stateBytes  atomic.Int64 // written under mu; read by Encoding without it
	encBytes    atomic.Int64 // encodings and frames kept by the state's objects (Encoding, keepInitialFrame)
	initBytes   atomic.Int64 // the frames among them; written under mu
	estimate    int64        // while the state is dropped: about what it would take
	stateRev    int64        // the revision of the last change applied to the state
	snap        *Snapshot    // a clone of the state, nil until a list asks after a change
	retained    []*Snapshot  // older snapshots kept for continued lists (Retain)
	watchers    map[*Watcher]struct{}
	synced      map[*Watcher]struct{} // watchers fed by dispatch
	advanced    chan struct{}         // closed and replaced whenever rev advances
	err         error                 // why the cache stopped
	lists       int                   // number of completed lists

	budget      *Budget
	share       *share
	readmitAt   atomic.Int64 // unix nanoseconds of the last drop or readmission attempt
	readmitting atomic.Bool
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
		synced:   map[*Watcher]struct{}{},
		advanced: make(chan struct{}),
		budget:   cfg.Budget,
	}
	if c.budget == nil {
		c.budget = NewBudget(cfg.StateBytes)
	}
	c.share = c.budget.join(c)
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
	SyncedWatchers int // watchers fed by dispatch (the others start or catch up)
	ListsCompleted int
}

// Stats returns the cache's current figures.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := Stats{Revision: c.rev.Load(), Oldest: c.oldest, WindowEvents: c.window.len(),
		WindowBytes: c.windowBytes + c.frameBytes.Load(), StateObjects: -1, StateBytes: c.stateBytes.Load(),
		Watchers: len(c.watchers), SyncedWatchers: len(c.synced), ListsCompleted: c.lists}
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

// Encoding returns the encoding of o, an object of the cache's state,
// named tag (a representation: "protobuf"), made by enc. The object keeps
// it for the next callers (it never changes: an object is one version)
// while the budget holds it without dropping a state; past that, enc runs
// every time. The bytes are shared: do not modify them.
func (c *Cache) Encoding(o *Object, tag string, enc func(o *Object) ([]byte, error)) ([]byte, error) {
	if b, ok := o.keptEncoding(tag); ok {
		return b, nil
	}
	b, err := enc(o)
	if err != nil {
		return nil, err
	}
	if kept, ok := c.keepOnObject(o, int64(len(b)), func() ([]byte, bool) { return o.keepEncoding(tag, b) }); ok {
		return kept, nil
	}
	return b, nil
}

// keepOnObject has o keep n bytes (keep does; it returns what o keeps and
// whether those are the new bytes) when o is an object of the current state
// and the budget holds n more bytes without dropping a state. ok is false
// when o keeps nothing new. Only an object of the current state keeps
// anything: the budget is given back, and o forgets what it keeps, when the
// state replaces or drops it (applyStateLocked, clearStateLocked), which has
// already happened to an object of an older snapshot.
func (c *Cache) keepOnObject(o *Object, n int64, keep func() ([]byte, bool)) (_ []byte, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return nil, false
	}
	if cur, ok := c.state.Get(o); !ok || cur != o {
		return nil, false
	}
	if !c.budget.fits(c.share, n) {
		return nil, false
	}
	b, kept := keep()
	if kept {
		c.encBytes.Add(n)
	} else {
		c.budget.shrink(c.share, n)
	}
	return b, true
}

// keepInitialFrame has o, an object of the current state, keep a copy of
// frame, the frame of its initial event (Added, at o's revision) for enc
// (whose id in the cache is id), so that watches starting on the same large
// objects share one copy. It does so while the budget holds the copy
// without dropping a state and the frames kept stay within their share of
// the budget (frameShare); it returns the frame o keeps, which callers must
// not modify.
func (c *Cache) keepInitialFrame(o *Object, enc Encoder, id uint32, frame []byte) ([]byte, bool) {
	n := int64(len(frame))
	if !c.budget.reserveFrame(n) {
		return nil, false
	}
	added := false
	b, ok := c.keepOnObject(o, n, func() ([]byte, bool) {
		b, kept := o.keepFrame(enc, id, append(make([]byte, 0, len(frame)), frame...))
		if kept {
			added = true
			c.initBytes.Add(n)
		}
		return b, kept
	})
	if !added {
		c.budget.releaseFrames(n)
	}
	return b, ok
}

// KeepsState reports, once the cache is ready, whether it keeps the state
// (List, Snapshot, SnapshotAt and Get can serve reads).
func (c *Cache) KeepsState(ctx context.Context) (bool, error) {
	if err := c.waitReady(ctx); err != nil {
		return false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		c.readmitSoon()
	}
	return c.state != nil, nil
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
		c.readmitSoon()
		return nil, 0, false
	}
	c.share.touch()
	o, _ := c.state.Get(&Object{Key: key})
	return o, c.rev.Load(), true
}
