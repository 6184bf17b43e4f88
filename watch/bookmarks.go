package watch

import "time"

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
