package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/kapi-dev/kapi/storage"
)

// watchBuffer is the number of events a watch holds for a slow consumer
// (the etcd client buffers more behind it).
const watchBuffer = 128

// streamContext gives ctx gRPC metadata of its own: the etcd client shares
// one watch stream among the watches whose contexts carry the same metadata,
// and etcd answers a progress request on a stream only once every watch on
// it has caught up. A stream per storage watch keeps a watch that replays
// history from holding back the progress of the others.
func streamContext(ctx context.Context) context.Context {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, "kapi-watch", hex.EncodeToString(id[:])))
}

// Watch implements storage.Store.
func (s *Store) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if len(opts.Prefix) == 0 {
		return nil, fmt.Errorf("%w: empty watch prefix", storage.ErrInvalid)
	}
	if opts.FromRevision < 0 {
		return nil, fmt.Errorf("%w: negative revision %d", storage.ErrInvalid, opts.FromRevision)
	}
	if opts.BufferBytes < 0 {
		return nil, fmt.Errorf("%w: negative buffer bound %d", storage.ErrInvalid, opts.BufferBytes)
	}
	done, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	from := opts.FromRevision
	if from == 0 {
		// Everything after the current revision: read it here rather than
		// let etcd pick it when the watch reaches it, so that every write
		// acknowledged after Watch returns is delivered.
		if from, err = s.currentRevision(ctx); err != nil {
			return nil, err
		}
	} else {
		// Watching from a revision means reading the state at it: below
		// the compacted revision that fails. A future revision is allowed.
		_, err := s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly(), clientv3.WithRev(from))
		if err != nil && !errors.Is(err, rpctypes.ErrFutureRev) {
			return nil, s.readError(ctx, err, from)
		}
	}
	w := &watcher{s: s, ctx: ctx, prefix: opts.Prefix, interval: opts.ProgressInterval, last: from,
		maxBytes: opts.BufferBytes, out: make(chan storage.Event, watchBuffer), poke: make(chan struct{}, 1)}
	if w.interval > 0 {
		s.pokesMu.Lock()
		if s.pokes == nil {
			s.pokes = map[chan struct{}]struct{}{}
		}
		s.pokes[w.poke] = struct{}{}
		s.pokesMu.Unlock()
	}
	go w.run()
	return w.out, nil
}

// RequestProgress asks every open watch with a progress interval to ask etcd
// for a progress report now; see storage.ProgressRequester.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.pokesMu.Lock()
	defer s.pokesMu.Unlock()
	for p := range s.pokes {
		select {
		case p <- struct{}{}:
		default:
		}
	}
	return nil
}

type watcher struct {
	s        *Store
	ctx      context.Context // the caller's
	prefix   []byte
	interval time.Duration
	last     int64 // every change up to this revision was delivered
	out      chan storage.Event
	poke     chan struct{} // RequestProgress: ask for progress now

	// A bounded watch (maxBytes > 0) knows the sizes of the events it sent,
	// by their number, so that it can tell what the channel holds (fits).
	maxBytes int64
	sizes    [watchBuffer]int64
	sent     uint64
}

// errRetry says the etcd watch ended in a way worth resuming from.
var errRetry = errors.New("etcd watch interrupted")

func (w *watcher) run() {
	defer close(w.out)
	defer func() {
		w.s.pokesMu.Lock()
		delete(w.s.pokes, w.poke)
		w.s.pokesMu.Unlock()
	}()
	// ctx ends with the caller's context or the store.
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	stop := context.AfterFunc(w.s.ctx, cancel)
	defer stop()

	backoff := 50 * time.Millisecond
	for {
		err := w.follow(ctx)
		if w.ctx.Err() != nil {
			return // the caller is gone: just close
		}
		if w.s.ctx.Err() != nil {
			w.fail(storage.ErrClosed)
			return
		}
		if p, ok := errors.AsType[pausedError](err); ok {
			w.waitRoom(ctx, p.size) // an end of ctx is reported on the next turn
			backoff = 50 * time.Millisecond
			continue
		}
		if !errors.Is(err, errRetry) {
			w.fail(err)
			return
		}
		w.s.log.Debug("etcd watch resuming", "prefix", string(w.prefix), "from", w.last+1, "err", err)
		select {
		case <-ctx.Done():
			continue // reported above on the next turn
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// progressRetry is how long a requested progress report may take before it
// is asked for again.
const progressRetry = 50 * time.Millisecond

// askProgress asks etcd for a progress report on this watch's stream (wctx).
// Until the watch has reached its start revision etcd would not answer, so
// a quorum read tells whether the watch is simply up to date (and the
// progress event is sent from here). asked reports whether etcd was asked;
// ok is false when the consumer is gone.
func (w *watcher) askProgress(ctx, wctx context.Context, start int64, canProgress *bool) (asked, ok bool) {
	s := w.s
	if !*canProgress {
		cur, err := s.currentRevision(ctx)
		if err != nil {
			return false, true
		}
		if cur < start {
			if cur == w.last && w.fits(0) {
				return false, w.send(ctx, storage.Event{Type: storage.EventProgress, Revision: cur})
			}
			return false, true
		}
		*canProgress = true
	}
	// etcd answers on this watch's own stream once the watch has caught
	// up; the answer arrives as a progress response. A request etcd refused
	// is not retried (the interval's reports still come).
	return s.cli.RequestProgress(wctx) == nil, true
}

// fail sends the final error event.
func (w *watcher) fail(err error) {
	select {
	case w.out <- storage.Event{Type: storage.EventError, Err: err}:
	case <-w.ctx.Done():
	}
}

// follow runs one etcd watch for the changes after w.last until it ends: errRetry when it
// may resume, another error when the watch must end, nil when ctx ended.
func (w *watcher) follow(ctx context.Context) error {
	wctx, cancel := context.WithCancel(streamContext(ctx))
	defer cancel()
	s := w.s
	ew := etcdWatch{w: w, ctx: ctx, wctx: wctx, start: w.last + 1, quiet: true}
	ch := s.cli.Watch(wctx, s.key(w.prefix),
		clientv3.WithRange(s.rangeEnd(w.prefix)), clientv3.WithRev(ew.start), clientv3.WithPrevKV())
	var tick <-chan time.Time
	if w.interval > 0 {
		t := time.NewTicker(w.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			ok = ew.tick()
		case <-w.poke:
			ok = ew.askAgain()
		case <-ew.retry:
			ok = ew.askAgain()
		case resp, open := <-ch:
			if !open {
				return errRetry
			}
			var err error
			if ok, err = ew.handle(&resp); err != nil {
				return err
			}
		}
		if !ok {
			return nil
		}
	}
}

// etcdWatch is one etcd watch that follow runs, and what it knows of its
// progress reports.
type etcdWatch struct {
	w         *watcher
	ctx, wctx context.Context // the watch's, and that of its own etcd stream
	start     int64           // the revision the etcd watch starts at
	// canProgress: etcd answers progress requests only for watches whose
	// start revision it has reached. Until then (no write anywhere since the
	// watch began), a quorum read tells whether the watch is simply up to
	// date.
	canProgress bool
	quiet       bool // nothing sent since the last tick
	// retry: a requested progress report (RequestProgress) is asked again
	// until one arrives: etcd drops a request that reaches it before the
	// watch is set up on its stream.
	retry <-chan time.Time
}

// tick asks for a progress report after an interval in which nothing was
// sent. It reports false when the consumer is gone.
func (ew *etcdWatch) tick() bool {
	if !ew.quiet {
		ew.quiet = true
		return true
	}
	_, ok := ew.w.askProgress(ew.ctx, ew.wctx, ew.start, &ew.canProgress)
	return ok
}

// askAgain asks for a requested progress report, and again after
// progressRetry until one arrives. It reports false when the consumer is
// gone.
func (ew *etcdWatch) askAgain() bool {
	asked, ok := ew.w.askProgress(ew.ctx, ew.wctx, ew.start, &ew.canProgress)
	if ew.retry = nil; asked {
		ew.retry = time.After(progressRetry)
	}
	return ok
}

// handle delivers what an etcd watch response carries: a progress report or
// events. It reports false when the consumer is gone, and an error when the
// watch ends (errRetry when it may resume).
func (ew *etcdWatch) handle(resp *clientv3.WatchResponse) (bool, error) {
	w := ew.w
	if resp.Header.Revision >= ew.start {
		ew.canProgress = true
	}
	if resp.CompactRevision > 0 {
		return false, &storage.CompactedError{Requested: w.last, Oldest: resp.CompactRevision}
	}
	if err := resp.Err(); err != nil {
		if permanent(err) {
			return false, fmt.Errorf("etcd: watch: %w", err)
		}
		return false, fmt.Errorf("%w: %v", errRetry, err)
	}
	if resp.IsProgressNotify() {
		ew.retry = nil
		if !w.fits(0) {
			return false, pausedError{}
		}
		if rev := resp.Header.Revision; rev >= w.last {
			w.last = rev
			if !w.send(ew.ctx, storage.Event{Type: storage.EventProgress, Revision: rev}) {
				return false, nil
			}
			ew.quiet = false
		}
		return true, nil
	}
	for _, ev := range resp.Events {
		if ev.Kv.ModRevision <= w.last {
			continue // already delivered before a resume
		}
		size := eventSize(ev)
		if !w.fits(size) {
			return false, pausedError{size}
		}
		e, err := w.convert(ew.ctx, ev)
		if err != nil {
			return false, err
		}
		if !w.sendSized(ew.ctx, e, size) {
			return false, nil
		}
		w.last = e.Revision
		ew.quiet = false
	}
	return true, nil
}

func (w *watcher) send(ctx context.Context, e storage.Event) bool {
	return w.sendSized(ctx, e, 0)
}

// sendSized sends e, which holds size bytes (fits).
func (w *watcher) sendSized(ctx context.Context, e storage.Event, size int64) bool {
	select {
	case w.out <- e:
		w.sizes[w.sent%watchBuffer] = size
		w.sent++
		return true
	case <-ctx.Done():
		return false
	}
}

// convert turns an etcd event into a storage event.
func (w *watcher) convert(ctx context.Context, ev *clientv3.Event) (storage.Event, error) {
	s := w.s
	kv, prev := ev.Kv, ev.PrevKv
	e := storage.Event{Key: s.strip(kv.Key), Revision: kv.ModRevision}
	// etcd reads the previous value when it sends the event; if history was
	// compacted in between, the previous value is missing, and an event
	// without it would pass an update for a create. End the watch instead.
	needPrev := ev.Type == mvccpb.DELETE || kv.Version > 1
	if needPrev && prev == nil {
		oldest, err := s.compactedRevision(ctx)
		if err != nil {
			oldest = 0
		}
		return e, &storage.CompactedError{Requested: kv.ModRevision - 1, Oldest: oldest}
	}
	switch ev.Type {
	case mvccpb.PUT:
		e.Type = storage.EventPut
		e.Value = value(kv.Value)
		e.CreateRevision = kv.CreateRevision
		if needPrev {
			e.PrevValue, e.PrevRevision = value(prev.Value), prev.ModRevision
		}
	case mvccpb.DELETE:
		e.Type = storage.EventDelete
		e.PrevValue, e.PrevRevision, e.CreateRevision = value(prev.Value), prev.ModRevision, prev.CreateRevision
	default:
		return e, fmt.Errorf("etcd: unknown event type %v", ev.Type)
	}
	return e, nil
}

// permanent reports whether a watch error will not go away by retrying.
func permanent(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrInvalidAuthToken) ||
		errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrUserEmpty)
}
