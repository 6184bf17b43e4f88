package watch

import "bytes"

// dispatchLocked hands ev to every synced watcher that wants it. It never
// blocks: a watcher whose queue is full is no longer synced, and catches up
// from the window at its own pace.
func (c *Cache) dispatchLocked(ev *Event) {
	for w := range c.synced {
		if ev.Revision <= w.from {
			continue
		}
		typ, ok := w.match(ev)
		if !ok {
			continue
		}
		w.mu.Lock()
		if len(w.queue) >= c.cfg.WatcherBuffer {
			w.synced = false
			clear(w.queue)
			w.queue = w.queue[:0]
			w.mu.Unlock()
			c.log.Debug("watch cache: watcher is behind; it will replay from the window", "watcher", w.id)
			delete(c.synced, w)
			w.signal()
			continue
		}
		w.queue = append(w.queue, delivery{ev: ev, typ: typ})
		w.mu.Unlock()
		w.signal()
	}
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
