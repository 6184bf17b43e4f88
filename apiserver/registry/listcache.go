package registry

import (
	"bytes"
	"context"
	"slices"

	"github.com/kapi-dev/kapi/watch"
)

// cacheObjects returns the objects of a list (from key start on) when the
// watch cache can serve it, which is whenever it keeps its state and has
// the snapshot the list needs:
//
//   - resourceVersion "0" ("any"): the cache's state as it is;
//   - resourceVersion "" (the most recent): the cache's state once it has
//     caught up with storage's current revision (Fresh), as kube-apiserver's
//     consistent reads from its cache;
//   - resourceVersion N, not older than: the state once the cache has
//     reached N;
//   - an exact snapshot (resourceVersionMatch=Exact, a limited list at N, or
//     a continue token at rev): the state at that revision, if the cache
//     still has it (the current one, or one Retain kept).
//
// rev is listStart's: the exact snapshot's revision, 0 otherwise. ok is
// false when storage must be read instead.
func (s *Store) cacheObjects(ctx context.Context, prefix, start []byte, rev int64, opts ListOptions) (_ *watch.Cache, _ *watch.Snapshot, _ []*watch.Object, _ int64, ok bool) {
	if opts.FromStorage {
		return nil, nil, nil, 0, false
	}
	c, err := s.watchCache()
	if err != nil {
		return nil, nil, nil, 0, false
	}
	if keeps, err := c.KeepsState(ctx); err != nil || !keeps {
		return nil, nil, nil, 0, false
	}
	var sn *watch.Snapshot
	switch {
	case rev > 0:
		if sn, ok = c.SnapshotAt(rev); !ok {
			return nil, nil, nil, 0, false
		}
		// A snapshot older than storage's history is gone for the API too
		// (410), whether or not the cache still holds it.
		if oldest, err := s.storage.CompactedRevision(ctx); err != nil || rev < oldest {
			return nil, nil, nil, 0, false
		}
	case opts.Continue != "":
		return nil, nil, nil, 0, false // a fresh snapshot for an expired token: storage
	default:
		var want int64 // the revision the state must have reached
		if opts.ResourceVersion != "0" {
			if opts.ResourceVersion != "" {
				want, _ = parseRV(opts.ResourceVersion) // listStart parsed it
			} else if want, err = s.storage.CurrentRevision(ctx); err != nil {
				return nil, nil, nil, 0, false
			}
		}
		if fresh, err := c.Fresh(ctx, want); err != nil || !fresh {
			return nil, nil, nil, 0, false
		}
		if sn, ok, err = c.Snapshot(ctx); err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				s.reg.cfg.Logger.Warn("watch cache unavailable for a list; reading storage", "resource", s.res.GroupResource().String(), "error", err)
			}
			return nil, nil, nil, 0, false
		}
		rev = sn.Revision()
	}
	objs := sn.Under(prefix)
	if len(start) > 0 {
		i, _ := slices.BinarySearchFunc(objs, start, func(o *watch.Object, k []byte) int { return bytes.Compare(o.Key, k) })
		objs = objs[i:]
	}
	return c, sn, objs, rev, true
}

// fromCache serves the list from the watch cache's snapshot sn: objs are
// its objects from the list's first key on, rev its revision. A page that
// leaves objects behind keeps the snapshot (watch.Cache.Retain), so that the
// next pages come from memory too. As in kube-apiserver, a list at
// resourceVersion "0" ignores the limit: the whole (selected) collection
// comes back in one response, which spares an informer's first sync its
// pages.
func (l *lister) fromCache(sn *watch.Snapshot, objs []*watch.Object, rev int64) error {
	s, opts := l.s, &l.opts
	limit := opts.Limit
	if opts.ResourceVersion == "0" && opts.Continue == "" {
		limit = 0
	}
	head := ListHead{ResourceVersion: rev, Items: -1, ItemsSize: -1, KeepItems: opts.KeepItems}
	filter := selectorFilter(opts.Labels, opts.Fields)
	stretch := filter == nil // objs are a stretch of sn's array
	switch {
	case filter == nil:
		if limit > 0 && int64(len(objs)) > limit {
			remaining := int64(len(objs)) - limit
			head.RemainingItemCount = &remaining
			head.Continue = s.reg.encodeContinue(rev, objs[limit].Key[len(s.prefix):])
			l.c.Retain(sn)
			objs = objs[:limit:limit]
		}
		head.Items = len(objs)
	case limit > 0:
		// The continue token comes first: select the page before it.
		var page []*watch.Object
		for _, o := range objs {
			ok, err := l.selected(o, filter)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if int64(len(page)) >= limit {
				head.Continue = s.reg.encodeContinue(rev, o.Key[len(s.prefix):]) // the next page's first
				l.c.Retain(sn)
				break
			}
			page = append(page, o)
		}
		objs, filter = page, nil
		head.Items = len(objs)
	}
	var encs [][]byte // the items' encodings, when measuring fetched them
	if enc := opts.Encoding; enc != nil && enc.FramedSize != nil {
		measure := func() (int, error) {
			encs = make([][]byte, 0, len(objs))
			size := 0
			err := l.cachePass(objs, filter, nil, 0, emitFunc(func(b []byte) error {
				encs = append(encs, b)
				size += enc.FramedSize(len(b))
				return nil
			}))
			return size, err
		}
		var err error
		if stretch && len(objs) > 0 {
			// Every list of the same stretch of the same state shares the
			// size: the stretch is named by where it starts in the
			// snapshot's array and its length.
			key := struct {
				tag   string
				first **watch.Object
				n     int
			}{enc.Tag, &objs[0], len(objs)}
			head.ItemsSize, err = sn.Memo(key, measure)
		} else {
			head.ItemsSize, err = measure()
		}
		if err != nil {
			return err
		}
		if encs != nil {
			head.Items = len(encs)
		}
	}
	if err := l.sink.Begin(head); err != nil {
		return err
	}
	if err := l.cachePass(objs, filter, encs, 0, l.sink); err != nil {
		return err
	}
	var end ListEnd
	if opts.Replay {
		end.Replay = func(skip int, emit func(item []byte) error) error {
			return l.cachePass(objs, filter, encs, skip, emitFunc(emit))
		}
	}
	return l.sink.End(end)
}

// cachePass emits the objects that filter (when not nil) selects, after the
// first skip ones; encs, when not nil, are the selected objects' encodings.
func (l *lister) cachePass(objs []*watch.Object, filter func(any) bool, encs [][]byte, skip int, out itemSink) error {
	if encs != nil {
		for i, b := range encs[min(skip, len(encs)):] {
			if i&255 == 255 {
				if err := l.ctx.Err(); err != nil {
					return err
				}
			}
			if err := out.Item(b); err != nil {
				return err
			}
		}
		return nil
	}
	if enc := l.opts.Encoding; enc != nil && filter == nil {
		// Every object, in its kept encoding: the hot loop of a protobuf
		// list from the watch cache.
		if l.encode == nil {
			l.encode = l.encodeObject
		}
		for i, o := range objs[min(skip, len(objs)):] {
			if i&255 == 255 {
				if err := l.ctx.Err(); err != nil {
					return err
				}
			}
			b, err := l.c.Encoding(o, enc.Tag, l.encode)
			if err != nil {
				return err
			}
			if err := out.Item(b); err != nil {
				return err
			}
		}
		return nil
	}
	n := 0
	for i, o := range objs {
		if i&255 == 255 {
			if err := l.ctx.Err(); err != nil {
				return err
			}
		}
		if filter != nil {
			ok, err := l.selected(o, filter)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if n++; n <= skip {
			continue
		}
		if err := l.object(o, out); err != nil {
			return err
		}
	}
	return nil
}
