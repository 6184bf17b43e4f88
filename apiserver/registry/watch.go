package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/storage"
)

// WatchOptions are the options of a watch.
type WatchOptions struct {
	Labels LabelMatcher
	Fields FieldMatcher
	// ResourceVersion follows the watch semantics of the API: "" and "0"
	// start with synthetic ADDED events for the current state; any other
	// value streams the changes after it.
	ResourceVersion string
	// SendInitialEvents forces (true) or suppresses (false) the synthetic
	// ADDED events; nil keeps the default of ResourceVersion.
	SendInitialEvents *bool
	// ProgressInterval asks for Bookmark events at about this interval.
	ProgressInterval time.Duration
}

// Event types of a watch, as on the wire.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
	Error    = "ERROR"
)

// WatchEvent is one event of a watch. Object is the object's JSON (for
// Bookmark: nil, the caller builds it from Revision; for Error: nil, Err holds
// a StatusError).
type WatchEvent struct {
	Type     string
	Object   []byte
	Revision int64
	// InitialEventsEnd marks the bookmark that ends the initial events.
	InitialEventsEnd bool
	Err              error
}

// Watch streams the changes of the objects in ns ("" = all). The channel
// closes when ctx ends or after an Error event.
func (s *Store) Watch(ctx context.Context, ns string, opts WatchOptions) (<-chan WatchEvent, error) {
	initial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	var from int64
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		rv, err := parseRV(opts.ResourceVersion)
		if err != nil {
			return nil, err
		}
		from = rv
	}
	lo := ListOptions{Labels: opts.Labels, Fields: opts.Fields}
	var items [][]byte
	if initial {
		if from > 0 {
			if err := s.waitForRevision(ctx, from); err != nil {
				return nil, err
			}
		}
		list, err := s.listAll(ctx, ns, lo)
		if err != nil {
			return nil, err
		}
		items, from = list.Items, list.ResourceVersion
	} else if from == 0 {
		cur, err := s.reg.cfg.Storage.CurrentRevision(ctx)
		if err != nil {
			return nil, storageError(err, s.res.GroupResource(), "")
		}
		from = cur
	}
	out := make(chan WatchEvent, 64)
	evs, err := s.reg.cfg.Storage.Watch(ctx, storage.WatchOptions{Prefix: s.listPrefix(ns), FromRevision: from, ProgressInterval: opts.ProgressInterval})
	if err != nil {
		var compacted *storage.CompactedError
		if errors.As(err, &compacted) {
			// kube-apiserver answers 200 and one ERROR event carrying 410.
			go func() {
				defer close(out)
				sendEvent(ctx, out, WatchEvent{Type: Error, Err: meta.NewGone(fmt.Sprintf("too old resource version: %d (%d)", from, compacted.Oldest))})
			}()
			return out, nil
		}
		return nil, storageError(err, s.res.GroupResource(), "")
	}
	typeMeta := true
	go func() {
		defer close(out)
		for _, it := range items {
			if !sendEvent(ctx, out, WatchEvent{Type: Added, Object: it}) {
				return
			}
		}
		if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
			if !sendEvent(ctx, out, WatchEvent{Type: Bookmark, Revision: from, InitialEventsEnd: true}) {
				return
			}
		}
		for ev := range evs {
			var we WatchEvent
			switch ev.Type {
			case storage.EventProgress:
				we = WatchEvent{Type: Bookmark, Revision: ev.Revision}
			case storage.EventError:
				we = WatchEvent{Type: Error, Err: storageError(ev.Err, s.res.GroupResource(), "")}
			case storage.EventPut, storage.EventDelete:
				var ok bool
				var err error
				we, ok, err = s.convertEvent(ev, lo, typeMeta)
				if err != nil {
					we = WatchEvent{Type: Error, Err: err}
				} else if !ok {
					continue
				}
			default:
				continue
			}
			if !sendEvent(ctx, out, we) || we.Type == Error {
				return
			}
		}
	}()
	return out, nil
}

// convertEvent turns a storage event into a watch event, applying the
// selectors to the new and the old object as kube-apiserver does: an object
// that stops matching is sent as DELETED, one that starts as ADDED.
func (s *Store) convertEvent(ev storage.Event, lo ListOptions, typeMeta bool) (WatchEvent, bool, error) {
	filtered := lo.Labels != nil || lo.Fields != nil
	var cur, prev storedObject
	var curOK, prevOK bool
	if ev.Type == storage.EventPut {
		so, err := parseStored(ev.Value)
		if err != nil {
			return WatchEvent{}, false, meta.NewInternalError(err)
		}
		cur, curOK = so, true
		if filtered {
			m, err := s.matches(so, ev.Revision, lo)
			if err != nil {
				return WatchEvent{}, false, err
			}
			curOK = m
		}
	}
	if ev.PrevValue != nil {
		so, err := parseStored(ev.PrevValue)
		if err != nil {
			return WatchEvent{}, false, meta.NewInternalError(err)
		}
		prev, prevOK = so, true
		if filtered {
			m, err := s.matches(so, ev.PrevRevision, lo)
			if err != nil {
				return WatchEvent{}, false, err
			}
			prevOK = m
		}
	}
	switch {
	case curOK && prevOK:
		return WatchEvent{Type: Modified, Object: cur.appendJSON(nil, ev.Revision, typeMeta), Revision: ev.Revision}, true, nil
	case curOK:
		return WatchEvent{Type: Added, Object: cur.appendJSON(nil, ev.Revision, typeMeta), Revision: ev.Revision}, true, nil
	case prevOK && ev.Type == storage.EventDelete:
		return WatchEvent{Type: Deleted, Object: prev.appendJSON(nil, ev.Revision, typeMeta), Revision: ev.Revision}, true, nil
	case prevOK:
		// Modified out of the selection: the watcher sees it leave.
		return WatchEvent{Type: Deleted, Object: cur.appendJSON(nil, ev.Revision, typeMeta), Revision: ev.Revision}, true, nil
	}
	return WatchEvent{}, false, nil
}

// listAll lists every matching object of ns at the latest revision.
func (s *Store) listAll(ctx context.Context, ns string, lo ListOptions) (*ListResult, error) {
	lo.Limit = 0
	return s.listWithTypeMeta(ctx, ns, lo, true)
}

func sendEvent(ctx context.Context, out chan<- WatchEvent, ev WatchEvent) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
