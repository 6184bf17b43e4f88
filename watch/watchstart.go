package watch

import (
	"context"
	"errors"

	"github.com/kapi-dev/kapi/storage"
)

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
		c.readmitSoon()
		c.mu.Unlock()
		return false, nil
	}
	c.share.touch()
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
// which must be at least minRev. Only its first page is read here; the
// watcher reads the next ones as it sends them (appendInitial), so that a
// watch of a collection larger than memory holds one page at a time.
func (c *Cache) startFromSnapshot(ctx context.Context, w *Watcher, minRev int64) error {
	if err := w.reserveStorage(); err != nil {
		return err
	}
	objs, next, rev, err := c.initialPage(ctx, w.prefix, nil, 0)
	if err != nil {
		return err
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
	w.initial, w.initialNext = objs, next
	if objs == nil {
		w.initial = []*Object{}
	}
	return nil
}

// initialPage reads a page of objects under prefix from start at revision
// rev (0: the latest) and returns them with the key of the next page (nil
// after the last) and the page's revision: the pages of a watch's initial
// events and of a state brought back (readmit).
func (c *Cache) initialPage(ctx context.Context, prefix, start []byte, rev int64) ([]*Object, []byte, int64, error) {
	page, err := c.cfg.Storage.List(ctx, storage.ListOptions{Prefix: prefix, StartKey: start, Revision: rev, Limit: listPageSize, MaxBytes: listPageBytes})
	if err != nil {
		return nil, nil, 0, err
	}
	objs := make([]*Object, 0, len(page.Items))
	for _, kv := range page.Items {
		objs = append(objs, &Object{Key: kv.Key, Value: kv.Value, Revision: kv.Revision})
	}
	var next []byte
	if page.More {
		next = page.NextKey
	}
	return objs, next, page.Revision, nil
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
	if err := w.reserveStorage(); err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(w.ctx)
	ch, err := c.cfg.Storage.Watch(fctx, storage.WatchOptions{Prefix: w.prefix, FromRevision: rev, ProgressInterval: c.cfg.ProgressInterval, BufferBytes: listPageBytes})
	if err != nil {
		cancel()
		w.dropStorage()
		if errors.Is(err, storage.ErrCompacted) {
			w.fail = err
			return nil
		}
		return err
	}
	w.feed, w.feedCancel = ch, cancel
	return nil
}
