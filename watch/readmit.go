package watch

import (
	"time"
)

// readmitSoon starts bringing back a dropped state when the budget has room
// for about its size and the last attempt is Settings.ReadmitInterval old (c.mu held
// for reading or writing; a read that finds no state calls it).
func (c *Cache) readmitSoon() {
	if c.err != nil || c.budget.limit < 0 ||
		time.Now().UnixNano()-c.readmitAt.Load() < int64(c.cfg.ReadmitInterval) ||
		c.budget.keeps(c.share) || // no state yet, but one is being listed
		c.budget.room() < c.estimate || !c.readmitting.CompareAndSwap(false, true) {
		return
	}
	c.readmitAt.Store(time.Now().UnixNano())
	go c.readmit()
}

// readmit lists the prefix at the cache's revision, brings the list up to
// date with the window's events and installs it as the state, if the budget
// still has room for it then. The list is abandoned as soon as it outgrows
// the room, and when the window no longer holds every change after its
// revision (the next attempt starts over).
func (c *Cache) readmit() {
	defer c.readmitting.Store(false)
	c.mu.RLock()
	lists := c.lists
	c.mu.RUnlock()
	rev := c.rev.Load()
	room := c.budget.room()
	state := newStateTree()
	var size int64
	for start := c.cfg.Prefix; start != nil; {
		objs, next, _, err := c.initialPage(c.ctx, c.cfg.Prefix, start, rev)
		if err != nil {
			c.log.Debug("watch cache: listing to bring the state back failed", "error", err)
			return
		}
		for _, o := range objs {
			state.ReplaceOrInsert(o)
			size += o.size()
		}
		if size > room {
			c.mu.Lock()
			c.estimate = max(c.estimate, size)
			c.mu.Unlock()
			return
		}
		start = next
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.state != nil || c.lists != lists || c.oldest > rev {
		return
	}
	for i := range c.window.len() {
		ev := c.window.at(i)
		if ev.Revision <= rev {
			continue
		}
		if old, ok := applyToState(state, ev); ok {
			size -= old.size()
		}
		if ev.Type != Deleted {
			size += ev.Object.size()
		}
	}
	if !c.budget.readmit(c.share, size) {
		c.estimate = size
		return
	}
	c.share.touch() // the read that asked for it: not the coldest at once
	c.clearStateLocked()
	c.state = state
	c.stateBytes.Store(size)
	c.stateRev = c.rev.Load()
	c.log.Info("watch cache: state brought back into the memory budget", "objects", state.Len(), "bytes", size)
}
