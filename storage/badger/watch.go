package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// Watch fan-out.
//
// Every watcher has its own goroutine and its own buffer, so a slow consumer
// only ever slows itself. A watcher is in one of two modes:
//
//   - catching up: it reads the change log from the revision after the last
//     one it delivered, in bounded chunks, up to the current revision, and
//     sends the events;
//   - synced: the sequencer appends each published batch's matching events to
//     the watcher's buffer (never blocking) and the goroutine sends them.
//
// The hand-over is exact because the current revision only changes under
// hub.mu, in publish: after replaying the log up to revision S, the watcher
// takes hub.mu and, if the current revision is still S, turns synced; every
// batch published afterwards has revisions above S and reaches its buffer.
// Otherwise it replays the (short) rest of the log and tries again.
//
// A watch with storage.WatchOptions.BufferBytes has that bound instead of
// Options.WatchBufferBytes, reads the change log in chunks of it, and its
// sender waits while the events in its channel hold it.
//
// A synced watcher whose buffer exceeds Options.WatchBufferSize events or
// its byte bound is hopelessly behind: publish drops its buffer
// and sends it back to catching up from the change log, from the revision
// after the last one it took. It sees every
// event exactly once as long as that revision is still retained; once
// compaction has passed it, the watch ends with an EventError carrying a
// *storage.CompactedError (the API turns that into 410 Gone).

const (
	catchUpMaxEvents = 512     // events per change-log chunk
	catchUpMaxScan   = 8192    // log entries scanned per chunk
	catchUpMaxBytes  = 8 << 20 // value bytes per chunk
	outBuffer        = 64      // capacity of a watch channel
)

type hub struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
}

type watcher struct {
	s        *Store
	ctx      context.Context
	prefix   []byte
	from     int64 // events with a revision above this one are wanted
	progress time.Duration
	maxBytes int64 // bound of buf
	bounded  bool  // WatchOptions.BufferBytes: maxBytes also bounds chunks and the channel
	out      chan storage.Event
	notify   chan struct{} // capacity 1: buffer changed or watcher fell behind

	// Guarded by hub.mu.
	synced   bool
	buf      []storage.Event
	bufBytes int64 // keys and values in buf
	through  int64 // synced: every matching event up to this revision is taken or in buf
	askedFor bool  // RequestProgress asked for a progress event
}

// publish makes revision rev current and hands the batch's events to the
// synced watchers. It is called by the sequencer only.
func (h *hub) publish(s *Store, rev int64, events []storage.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.current.Store(rev)
	for w := range h.watchers {
		if !w.synced {
			continue
		}
		added := false
		for i := range events {
			if events[i].Revision > w.from && bytes.HasPrefix(events[i].Key, w.prefix) {
				w.buf = append(w.buf, events[i])
				w.bufBytes += int64(len(events[i].Key) + len(events[i].Value) + len(events[i].PrevValue))
				added = true
			}
		}
		w.through = rev
		if len(w.buf) > s.opts.WatchBufferSize || w.bufBytes > w.maxBytes {
			s.log.Debug("watcher fell behind; catching up from the change log",
				"prefix", string(w.prefix), "buffered", len(w.buf), "bytes", w.bufBytes)
			w.synced, w.buf, w.bufBytes = false, nil, 0
		}
		if added {
			select {
			case w.notify <- struct{}{}:
			default:
			}
		}
	}
}

// RequestProgress asks every synced watch with a progress interval for a
// progress event now; see storage.ProgressRequester.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		if w.progress <= 0 {
			continue
		}
		w.askedFor = true
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
}

// Watch streams the changes under opts.Prefix after opts.FromRevision; see
// storage.Store. Events share their byte slices with other watchers: do not
// modify them. A consumer must keep reading or cancel ctx; the final event
// (an EventError) is sent only when it is read or ctx ends.
func (s *Store) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	switch {
	case len(opts.Prefix) == 0:
		return nil, fmt.Errorf("watch: empty prefix: %w", storage.ErrInvalid)
	case opts.FromRevision < 0:
		return nil, fmt.Errorf("watch: negative revision %d: %w", opts.FromRevision, storage.ErrInvalid)
	case opts.ProgressInterval < 0:
		return nil, fmt.Errorf("watch: negative progress interval: %w", storage.ErrInvalid)
	case opts.BufferBytes < 0:
		return nil, fmt.Errorf("watch: negative buffer bound %d: %w", opts.BufferBytes, storage.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, storage.ErrClosed
	}
	defer s.leave()
	w := &watcher{
		s:        s,
		ctx:      ctx,
		prefix:   bytes.Clone(opts.Prefix),
		from:     opts.FromRevision,
		progress: opts.ProgressInterval,
		maxBytes: s.opts.WatchBufferBytes,
		out:      make(chan storage.Event, outBuffer),
		notify:   make(chan struct{}, 1),
	}
	if opts.BufferBytes > 0 {
		w.maxBytes, w.bounded = opts.BufferBytes, true
	}
	s.hub.mu.Lock()
	if w.from == 0 {
		// From now: synced at once, nothing to replay.
		w.from = s.current.Load()
		w.synced, w.through = true, w.from
	} else if c := s.compacted.Load(); w.from < c {
		s.hub.mu.Unlock()
		return nil, &storage.CompactedError{Requested: w.from, Oldest: c}
	}
	s.hub.watchers[w] = struct{}{}
	s.hub.mu.Unlock()
	go w.run()
	return w.out, nil
}

// errStopped means the watch ended because its context ended or the store
// is closing; run then decides what, if anything, to send last.
var errStopped = errors.New("watch stopped")

func (w *watcher) run() {
	defer close(w.out)
	defer w.s.hub.remove(w)

	st := &sendState{w: w, next: w.from + 1, lastSent: time.Now()}
	var tick <-chan time.Time
	if w.progress > 0 {
		t := time.NewTicker(w.progress)
		defer t.Stop()
		tick = t.C
	}
	err := st.loop(tick)
	switch {
	case w.ctx.Err() != nil:
		// The consumer is gone; nothing to say.
	case errors.Is(err, errStopped) || errors.Is(err, storage.ErrClosed):
		w.final(storage.ErrClosed)
	default:
		w.s.log.Debug("watch ended with an error", "prefix", string(w.prefix), "error", err)
		w.final(err)
	}
}

// final sends the closing EventError, unless the consumer goes away first.
func (w *watcher) final(err error) {
	select {
	case w.out <- storage.Event{Type: storage.EventError, Err: err}:
	case <-w.ctx.Done():
	}
}

// sendState is the watcher goroutine's own state.
type sendState struct {
	w        *watcher
	next     int64 // the first revision not yet delivered
	lastSent time.Time

	// A bounded watch's sends: sizes[i%outBuffer] is the size of send i, so
	// that the last len(out) of them are what the channel holds.
	sent  int64
	sizes [outBuffer]int64
}

func (st *sendState) loop(tick <-chan time.Time) error {
	w, h := st.w, &st.w.s.hub
	for {
		h.mu.Lock()
		synced := w.synced
		h.mu.Unlock()
		if !synced {
			if err := st.catchUp(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-w.notify:
			h.mu.Lock()
			if !w.synced {
				h.mu.Unlock()
				continue // fell behind: catch up from st.next
			}
			events, through, asked := w.buf, w.through, w.askedFor
			w.buf, w.bufBytes, w.askedFor = nil, 0, false
			h.mu.Unlock()
			for i := range events {
				if events[i].Revision >= st.next {
					if err := st.send(events[i]); err != nil {
						return err
					}
				}
			}
			st.next = max(st.next, through+1)
			if asked {
				if err := st.sendProgress(through); err != nil {
					return err
				}
			}
		case <-tick:
			if time.Since(st.lastSent) < w.progress {
				continue
			}
			h.mu.Lock()
			rev, ok := w.through, w.synced && len(w.buf) == 0
			h.mu.Unlock()
			if ok {
				if err := st.sendProgress(rev); err != nil {
					return err
				}
			}
		case <-w.ctx.Done():
			return errStopped
		case <-w.s.closing:
			return errStopped
		}
	}
}

// catchUp replays the change log from st.next up to the current revision and
// turns the watcher synced once nothing newer has been published.
func (st *sendState) catchUp() error {
	w, s := st.w, st.w.s
	for {
		target := s.current.Load()
		for st.next <= target {
			chunk := int64(catchUpMaxBytes)
			if w.bounded {
				chunk = min(chunk, w.maxBytes)
			}
			events, end, err := s.readLog(w.prefix, st.next, target, chunk)
			if err != nil {
				return err
			}
			for i := range events {
				if err := st.send(events[i]); err != nil {
					return err
				}
			}
			st.next = end + 1
			if w.progress > 0 && time.Since(st.lastSent) >= w.progress {
				if err := st.sendProgress(end); err != nil {
					return err
				}
			}
		}
		s.hub.mu.Lock()
		if cur := s.current.Load(); cur < st.next {
			w.synced, w.buf, w.bufBytes, w.through = true, nil, 0, cur
			s.hub.mu.Unlock()
			return nil
		}
		s.hub.mu.Unlock()
		select {
		case <-w.ctx.Done():
			return errStopped
		case <-s.closing:
			return errStopped
		default:
		}
	}
}

func (st *sendState) send(ev storage.Event) error {
	if st.w.bounded {
		size := int64(len(ev.Key) + len(ev.Value) + len(ev.PrevValue))
		if err := st.waitRoom(size); err != nil {
			return err
		}
		st.sizes[st.sent%outBuffer] = size
	}
	select {
	case st.w.out <- ev:
		st.lastSent = time.Now()
		st.sent++
		return nil
	case <-st.w.ctx.Done():
		return errStopped
	case <-st.w.s.closing:
		return errStopped
	}
}

// waitRoom waits until the events a bounded watch's channel holds leave
// room for size more bytes of its bound, or the channel is empty: a
// consumer that does not read holds at most the bound there. The channel
// says how many events it holds, not when one leaves, so this polls, at a
// slowing pace; small events never wait.
func (st *sendState) waitRoom(size int64) error {
	for pause := time.Millisecond; ; pause = min(2*pause, 64*time.Millisecond) {
		n := int64(len(st.w.out))
		held := size
		for i := st.sent - n; i < st.sent; i++ {
			held += st.sizes[i%outBuffer]
		}
		if n == 0 || held <= st.w.maxBytes {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-st.w.ctx.Done():
			t.Stop()
			return errStopped
		case <-st.w.s.closing:
			t.Stop()
			return errStopped
		}
	}
}

// sendProgress reports that every change up to rev was delivered. Nothing is
// reported below the watch's start revision (a watch from the future).
func (st *sendState) sendProgress(rev int64) error {
	if rev < st.w.from {
		return nil
	}
	return st.send(storage.Event{Type: storage.EventProgress, Revision: rev})
}

// readLog reads one bounded chunk of the change log: the events under prefix
// with revisions from..to, as of snapshot to, of at most about maxBytes. It
// returns the events and the last revision covered (to, unless a bound
// stopped the chunk early).
func (s *Store) readLog(prefix []byte, from, to, maxBytes int64) ([]storage.Event, int64, error) {
	if !s.enter() {
		return nil, 0, storage.ErrClosed
	}
	defer s.leave()
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	if s.dbErr != nil {
		return nil, 0, s.dbErr
	}
	if c := s.compacted.Load(); from-1 < c {
		return nil, 0, &storage.CompactedError{Requested: from - 1, Oldest: c}
	}
	txn := s.db.NewTransactionAt(uint64(to), false)
	defer txn.Discard()
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}})
	defer it.Close()

	var (
		events  []storage.Event
		scanned int
		size    int64
	)
	end := to
	for it.Seek(logKey(from)); it.Valid(); it.Next() {
		item := it.Item()
		rev, err := parseLogKey(item.Key())
		if err != nil {
			return nil, 0, err
		}
		if rev > to {
			break
		}
		var le logEntry
		err = item.Value(func(v []byte) error {
			var err error
			if le, err = decodeLog(v); err == nil && bytes.HasPrefix(le.key, prefix) {
				le.key = bytes.Clone(le.key)
			} else {
				le.key = nil
			}
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("change log at revision %d: %w", rev, err)
		}
		if le.key != nil {
			ev, err := s.eventAt(rev, le)
			if err != nil {
				return nil, 0, fmt.Errorf("change log at revision %d: %w", rev, err)
			}
			events = append(events, ev)
			size += int64(len(ev.Key) + len(ev.Value) + len(ev.PrevValue))
		}
		if scanned++; scanned >= catchUpMaxScan || len(events) >= catchUpMaxEvents || size >= maxBytes {
			end = rev
			break
		}
	}
	return events, end, nil
}

// eventAt rebuilds the event of revision rev from its log entry and the data
// versions: the value written at rev and the value as of rev-1.
func (s *Store) eventAt(rev int64, le logEntry) (storage.Event, error) {
	ev := storage.Event{Type: storage.EventPut, Key: le.key, Revision: rev,
		PrevRevision: le.prevRev, CreateRevision: le.createRev}
	if le.op == logDelete {
		ev.Type = storage.EventDelete
	} else {
		kv, err := s.versionAt(le.key, rev)
		if err != nil {
			return ev, err
		}
		if kv.Revision != rev {
			return ev, fmt.Errorf("data of %q at revision %d has revision %d", le.key, rev, kv.Revision)
		}
		ev.Value = kv.Value
	}
	if le.prevRev != 0 {
		kv, err := s.versionAt(le.key, rev-1)
		if err != nil {
			return ev, err
		}
		if kv.Revision != le.prevRev {
			return ev, fmt.Errorf("data of %q at revision %d has revision %d, the log says %d",
				le.key, rev-1, kv.Revision, le.prevRev)
		}
		ev.PrevValue = kv.Value
	}
	return ev, nil
}

// versionAt reads key as of revision rev.
func (s *Store) versionAt(key []byte, rev int64) (storage.KeyValue, error) {
	txn := s.db.NewTransactionAt(uint64(rev), false)
	defer txn.Discard()
	item, err := txn.Get(dataKey(key))
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("read %q at revision %d: %w", key, rev, err)
	}
	return readItem(txn, item, key, false)
}
