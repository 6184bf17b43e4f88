package registry

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/watch"
)

// LabelMatcher selects objects by labels.
type LabelMatcher interface {
	Matches(labels map[string]string) bool
}

// FieldMatcher selects objects by field values.
type FieldMatcher interface {
	Matches(get func(field string) (string, bool)) bool
}

// ListOptions are the options of a list: which objects (selectors, limit,
// continue, resourceVersion), and how Store.List hands them to its sink.
type ListOptions struct {
	// Labels, when not nil, keeps only matching objects.
	Labels LabelMatcher
	// Fields, when not nil, keeps only matching objects.
	Fields FieldMatcher
	// Limit caps the number of items (0 = all). A list at resourceVersion
	// "0" that the watch cache serves ignores it, as kube-apiserver's.
	Limit int64
	// Continue is the token of a previous page.
	Continue string
	// ResourceVersion and ResourceVersionMatch follow the list semantics of
	// the API.
	ResourceVersion      string
	ResourceVersionMatch string
	// FromStorage reads storage without asking the watch cache.
	FromStorage bool

	// Encoding, when not nil, is the encoding in which the sink receives
	// the items, instead of their JSON (see ItemEncoding).
	Encoding *ItemEncoding
	// KeepItems lets the sink keep the items it is given: each is then a
	// slice of its own (one allocation per item, made at the item's size)
	// or an encoding shared with a cache that never changes. Without it an
	// item's slice is valid only until Item returns: List reuses it.
	KeepItems bool
	// Replay asks for a second pass over the same items: ListEnd.Replay.
	Replay bool
}

// ItemEncoding is an encoding of list items other than JSON (protobuf).
// Store.List applies it where it can do better than its sink: an object of
// the watch cache keeps its encoding (watch.Cache.Encoding) from one list to
// the next, and the total size of a list of the cache's objects is
// remembered with the cache's state.
type ItemEncoding struct {
	// Tag names the encoding; objects of the watch cache keep their
	// encoding under it, and list sizes are remembered under it. Two
	// ItemEncodings with the same tag must encode alike.
	Tag string
	// Append appends the encoding of item (a list item's JSON) to dst. Its
	// errors are returned by List as they are.
	Append func(dst, item []byte) ([]byte, error)
	// Shared, when not nil, returns the encoding of an item read from
	// storage from a cache shared between lists (read-only: items so
	// encoded can always be kept); List calls Append for them otherwise.
	Shared func(item []byte) ([]byte, error)
	// FramedSize, when not nil, is the size an item of n encoded bytes
	// takes in the list (the framing added). List then reports the items'
	// total in ListHead.ItemsSize whenever the watch cache serves the list.
	FramedSize func(n int) int
}

// ListHead is what a list knows before its first item.
type ListHead struct {
	// ResourceVersion is the revision of the list's snapshot.
	ResourceVersion int64
	// Continue is the token of the next page ("" on the last one).
	Continue string
	// RemainingItemCount is set when known (not with selectors, not on the
	// last page).
	RemainingItemCount *int64
	// Items is the number of items that follow, or -1 when List does not
	// know it before reading them.
	Items int
	// ItemsSize is the sum of Encoding.FramedSize over the items when List
	// knows it before the first (a list the watch cache serves, with
	// Encoding.FramedSize set), -1 otherwise.
	ItemsSize int
	// KeepItems repeats ListOptions.KeepItems: whether the sink may keep
	// the items' slices.
	KeepItems bool
}

// ListEnd is what a list hands over after its last item.
type ListEnd struct {
	// Replay, when ListOptions.Replay asked for it, reads the items again:
	// the same items of the same snapshot in the same order, encoded
	// alike, under the same ownership rules. It is valid until End
	// returns. A storage snapshot is its revision, so a compaction in
	// between fails the replay; a watch-cache snapshot is kept in memory
	// until End returns. Nil unless asked for.
	Replay ListReplay
}

// ListReplay reads the items of a list again, calling emit with each item
// after the first skip ones (which are neither encoded nor passed on), and
// returns the first error emit returns.
type ListReplay func(skip int, emit func(item []byte) error) error

// ListSink receives a list from Store.List.
//
// Call order: Begin exactly once, then Item once per item in key order,
// then End exactly once. When List fails before Begin, no method is called
// and the error is the list's own (a Status the caller can answer with:
// invalid options, an expired continue token, a storage error, ...). Once
// Begin has been called, a failure (a storage error while streaming, an
// encoding error, a canceled context) returns without End: the caller has
// started its output and can only abort it. An error a method returns ends
// the list at once; List returns it unchanged.
//
// Ownership: the item slices are read-only. Unless ListOptions.KeepItems
// (ListHead.KeepItems) is set, an item's slice is valid only until Item
// returns, and List reuses its memory for the next item; with KeepItems
// the sink may keep it. Encodings given out with ListOptions.Encoding may
// be shared with other lists (the watch cache's and the Shared cache's):
// never modify them.
type ListSink interface {
	Begin(head ListHead) error
	Item(item []byte) error
	End(end ListEnd) error
}

// ListResult is one page of a list, collected: a ListSink. Lists into a
// ListResult should set ListOptions.KeepItems, which spares it a copy of
// each item.
type ListResult struct {
	// Items are the objects as JSON (without kind and apiVersion when the
	// type says so), or as ListOptions.Encoding encodes them.
	Items [][]byte
	// ResourceVersion is the revision of the snapshot.
	ResourceVersion int64
	// Continue is the token of the next page ("" on the last one).
	Continue string
	// RemainingItemCount is set when known (not with selectors, not on the
	// last page).
	RemainingItemCount *int64

	keep bool
}

// Begin records the list's metadata.
func (r *ListResult) Begin(h ListHead) error {
	r.ResourceVersion, r.Continue, r.RemainingItemCount, r.keep = h.ResourceVersion, h.Continue, h.RemainingItemCount, h.KeepItems
	r.Items = r.Items[:0]
	if h.Items >= 0 && cap(r.Items) < h.Items {
		r.Items = make([][]byte, 0, h.Items)
	}
	return nil
}

// Item appends the item (a copy of it unless the list keeps its items).
func (r *ListResult) Item(item []byte) error {
	if !r.keep {
		item = bytes.Clone(item)
	}
	r.Items = append(r.Items, item)
	return nil
}

// End does nothing.
func (r *ListResult) End(ListEnd) error { return nil }

// List lists the objects in namespace ns ("" = all namespaces) into sink:
// the one entry point of every list, whole or paged, in every
// representation. opts select the objects and how they are handed over
// (ListSink says in what order and who owns what). It serves from the
// watch cache when the cache has the snapshot the list needs (see
// cacheObjects), without storage reads; otherwise from storage: a list
// without a limit one page of values at a time (streamPageSize), never
// holding the whole list, and a page of a limited list read before Begin,
// since its continue token and remaining count must come first.
func (s *Store) List(ctx context.Context, ns string, opts ListOptions, sink ListSink) error {
	if err := s.notVirtual(); err != nil {
		return err
	}
	prefix := s.listPrefix(ns)
	rev, start, err := s.listStart(ctx, prefix, opts)
	if err != nil {
		return err
	}
	l := &lister{s: s, ctx: ctx, opts: opts, sink: sink, typeMeta: !s.res.Options.OmitItemTypeMeta}
	if c, sn, objs, crev, ok := s.cacheObjects(ctx, prefix, start, rev, opts); ok {
		l.c = c
		return l.fromCache(sn, objs, crev)
	}
	if opts.Limit > 0 {
		return l.storagePage(prefix, start, rev)
	}
	return l.storageStream(prefix, start, rev)
}

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
		if oldest, err := s.reg.cfg.Storage.CompactedRevision(ctx); err != nil || rev < oldest {
			return nil, nil, nil, 0, false
		}
	case opts.Continue != "":
		return nil, nil, nil, 0, false // a fresh snapshot for an expired token: storage
	default:
		var want int64 // the revision the state must have reached
		if opts.ResourceVersion != "0" {
			if opts.ResourceVersion != "" {
				want, _ = parseRV(opts.ResourceVersion) // listStart parsed it
			} else if want, err = s.reg.cfg.Storage.CurrentRevision(ctx); err != nil {
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

// streamPageSize is the storage page size of a list without a limit: only
// one page of values is held at a time.
const streamPageSize = 500

// lister is one list in progress (Store.List).
type lister struct {
	s        *Store
	ctx      context.Context
	opts     ListOptions
	sink     ListSink
	typeMeta bool
	c        *watch.Cache                          // when the watch cache serves the list
	buf      []byte                                // the item's JSON, reused
	ebuf     []byte                                // its encoding, reused
	encode   func(o *watch.Object) ([]byte, error) // encodeObject, with an Encoding
}

// itemSink takes the items of a pass over a list: the sink, or a replay's
// emit function.
type itemSink interface {
	Item(item []byte) error
}

// emitFunc is an emit function as an itemSink.
type emitFunc func(item []byte) error

func (f emitFunc) Item(item []byte) error { return f(item) }

// itemJSONExtra is what an item's JSON may add to the stored JSON (its
// resourceVersion).
const itemJSONExtra = len(`"resourceVersion":"",`) + 20

// item hands a stored object of revision rev to out, as the list's items
// are handed over (ListOptions.Encoding, KeepItems).
func (l *lister) item(so storedObject, rev int64, out itemSink) error {
	enc := l.opts.Encoding
	if enc == nil && l.opts.KeepItems {
		return out.Item(so.appendJSON(make([]byte, 0, len(so.json)+itemJSONExtra), rev, l.typeMeta))
	}
	if l.buf == nil {
		l.buf = make([]byte, 0, len(so.json)+itemJSONExtra)
	}
	l.buf = so.appendJSON(l.buf[:0], rev, l.typeMeta)
	if enc == nil {
		return out.Item(l.buf)
	}
	if enc.Shared != nil {
		b, err := enc.Shared(l.buf)
		if err != nil {
			return err
		}
		return out.Item(b)
	}
	if l.opts.KeepItems {
		b, err := enc.Append(nil, l.buf)
		if err != nil {
			return err
		}
		return out.Item(b)
	}
	var err error
	if l.ebuf, err = enc.Append(l.ebuf[:0], l.buf); err != nil {
		return err
	}
	return out.Item(l.ebuf)
}

// object hands an object of the watch cache to out: its JSON, or the
// encoding it keeps (watch.Cache.Encoding).
func (l *lister) object(o *watch.Object, out itemSink) error {
	if enc := l.opts.Encoding; enc != nil {
		if l.encode == nil {
			l.encode = l.encodeObject
		}
		b, err := l.c.Encoding(o, enc.Tag, l.encode)
		if err != nil {
			return err
		}
		return out.Item(b)
	}
	so, err := parseStored(o.Value)
	if err != nil {
		return meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
	}
	return l.item(so, o.Revision, out)
}

// encodeObject is the encoding an object of the watch cache keeps.
func (l *lister) encodeObject(o *watch.Object) ([]byte, error) {
	so, err := parseStored(o.Value)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
	}
	l.buf = so.appendJSON(l.buf[:0], o.Revision, l.typeMeta)
	return l.opts.Encoding.Append(nil, l.buf)
}

// selected reports whether an object of the watch cache passes filter.
func (l *lister) selected(o *watch.Object, filter func(any) bool) (bool, error) {
	a, err := l.c.Attrs(o)
	if err != nil {
		return false, meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
	}
	return filter(a), nil
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

// storageError maps a storage error of the list: a continue token whose
// snapshot is compacted is a 410 with a token to resume at the latest
// revision.
func (l *lister) storageError(err error, first []byte) error {
	var compacted *storage.CompactedError
	if l.opts.Continue != "" && errors.As(err, &compacted) {
		return l.s.continueExpired(first[len(l.s.prefix):])
	}
	return storageError(err, l.s.res.GroupResource(), "")
}

// storageStream serves a list without a limit from storage, from key start
// on, at revision rev (0: the latest): one page of streamPageSize values at
// a time. Begin comes before the first item (or after the last page when
// there is none), so that the first page's errors are still the list's own.
func (l *lister) storageStream(prefix, start []byte, rev int64) error {
	begun := false
	begin := func() error {
		begun = true
		return l.sink.Begin(ListHead{ResourceVersion: rev, Items: -1, ItemsSize: -1, KeepItems: l.opts.KeepItems})
	}
	emit := func(item []byte) error {
		if !begun {
			if err := begin(); err != nil {
				return err
			}
		}
		return l.sink.Item(item)
	}
	if err := l.storagePass(prefix, start, &rev, 0, emitFunc(emit)); err != nil {
		return err
	}
	if !begun {
		if err := begin(); err != nil {
			return err
		}
	}
	var end ListEnd
	if l.opts.Replay {
		end.Replay = func(skip int, emit func(item []byte) error) error {
			return l.storagePass(prefix, start, &rev, skip, emitFunc(emit))
		}
	}
	return l.sink.End(end)
}

// storagePass reads a list from storage from key start on, one page of
// streamPageSize values at a time, at revision *rev (0: the latest, which
// the first page then fixes), and emits the selected items after the first
// skip ones.
func (l *lister) storagePass(prefix, start []byte, rev *int64, skip int, out itemSink) error {
	first := start
	filtered := l.opts.Labels != nil || l.opts.Fields != nil
	n := 0
	for {
		page, err := l.s.reg.cfg.Storage.List(l.ctx, storage.ListOptions{Prefix: prefix, StartKey: start, Revision: *rev, Limit: streamPageSize})
		if err != nil {
			return l.storageError(err, first)
		}
		*rev = page.Revision
		for _, kv := range page.Items {
			if !filtered && n < skip {
				n++
				continue
			}
			so, err := parseStored(kv.Value)
			if err != nil {
				return meta.NewInternalError(fmt.Errorf("reading %s: %w", kv.Key, err))
			}
			if filtered {
				ok, err := l.s.matches(so, kv.Revision, l.opts)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if n++; n <= skip {
					continue
				}
			}
			if err := l.item(so, kv.Revision, out); err != nil {
				return err
			}
		}
		if !page.More {
			return nil
		}
		start = page.NextKey
	}
}

// storagePage serves one page of a limited list from storage, from key
// start on, at revision rev (0: the latest). The page's values are read
// before Begin, which needs its continue token and remaining count; they
// are spliced into items only as the sink takes them.
func (l *lister) storagePage(prefix, start []byte, rev int64) error {
	s, opts := l.s, &l.opts
	filtered := opts.Labels != nil || opts.Fields != nil
	first := start // where a continued list resumes
	head := ListHead{ItemsSize: -1, KeepItems: opts.KeepItems}
	var items []storage.KeyValue // the page's
	for {
		req := storage.ListOptions{Prefix: prefix, StartKey: start, Revision: rev, Limit: opts.Limit - int64(len(items))}
		req.Count = !filtered // remainingItemCount is shown only then
		if filtered && req.Limit < 64 {
			req.Limit = 64 // read ahead when filtering
		}
		page, err := s.reg.cfg.Storage.List(l.ctx, req)
		if err != nil {
			return l.storageError(err, first)
		}
		rev = page.Revision
		last := -1 // the index in page.Items of the item that fills the page
		if filtered {
			for i, kv := range page.Items {
				so, err := parseStored(kv.Value)
				if err != nil {
					return meta.NewInternalError(fmt.Errorf("reading %s: %w", kv.Key, err))
				}
				ok, err := s.matches(so, kv.Revision, *opts)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if items = append(items, kv); int64(len(items)) >= opts.Limit {
					last = i
					break
				}
			}
		} else {
			k := int(min(int64(len(page.Items)), opts.Limit-int64(len(items))))
			if items == nil {
				items = page.Items[:k:k] // the whole page in one read (the usual case): no copy
			} else {
				items = append(items, page.Items[:k]...)
			}
			if int64(len(items)) >= opts.Limit {
				last = k - 1
			}
		}
		if last >= 0 {
			if last < len(page.Items)-1 || page.More {
				next := append(append([]byte{}, page.Items[last].Key...), 0)
				if last == len(page.Items)-1 && page.More {
					// Resume at the key storage found next, as its
					// contract asks: storage remembers the count of the
					// keys left under that key, so that paging through N
					// keys costs O(N), not O(N²/limit). (At the token's
					// revision no key lies between the two.)
					next = page.NextKey
				}
				head.Continue = s.reg.encodeContinue(rev, next[len(s.prefix):])
				if !filtered && page.Remaining >= 0 {
					remaining := int64(len(page.Items)-1-last) + page.Remaining
					head.RemainingItemCount = &remaining
				}
			}
			break
		}
		if !page.More {
			break
		}
		start = page.NextKey
	}
	head.ResourceVersion, head.Items = rev, len(items)
	if err := l.sink.Begin(head); err != nil {
		return err
	}
	if err := l.pagePass(items, 0, l.sink); err != nil {
		return err
	}
	var end ListEnd
	if opts.Replay {
		end.Replay = func(skip int, emit func(item []byte) error) error { return l.pagePass(items, skip, emitFunc(emit)) }
	}
	return l.sink.End(end)
}

// pagePass emits the items of a page read from storage after the first skip.
func (l *lister) pagePass(items []storage.KeyValue, skip int, out itemSink) error {
	for _, kv := range items[min(skip, len(items)):] {
		so, err := parseStored(kv.Value)
		if err != nil {
			return meta.NewInternalError(fmt.Errorf("reading %s: %w", kv.Key, err))
		}
		if err := l.item(so, kv.Revision, out); err != nil {
			return err
		}
	}
	return nil
}

// listStart decides the snapshot revision and the first key of a list.
func (s *Store) listStart(ctx context.Context, prefix []byte, opts ListOptions) (rev int64, start []byte, err error) {
	invalid := func(field, value, msg string) error {
		return meta.NewInvalidOptions("ListOptions", meta.ErrorList{meta.Invalid(meta.NewPath(field), value, msg)})
	}
	match := opts.ResourceVersionMatch
	switch match {
	case "", "Exact", "NotOlderThan":
	default:
		return 0, nil, invalid("resourceVersionMatch", match, "must be one of: Exact, NotOlderThan")
	}
	if opts.Continue != "" {
		if match != "" {
			return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch is forbidden when continue is provided")
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return 0, nil, meta.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		rev, rel, err := s.reg.decodeContinue(opts.Continue)
		if err != nil {
			return 0, nil, err
		}
		if rev == latestContinueRV {
			rev = 0 // a fresh snapshot: see continueExpired
		}
		start = append(append([]byte{}, s.prefix...), rel...)
		if !bytes.HasPrefix(start, prefix) {
			return 0, nil, meta.NewBadRequest("continue key is not in the listed collection")
		}
		return rev, start, nil
	}
	if match != "" && opts.ResourceVersion == "" {
		return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	switch {
	case opts.ResourceVersion == "" || opts.ResourceVersion == "0":
		if match == "Exact" {
			return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
		}
		return 0, nil, nil
	}
	want, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return 0, nil, err
	}
	// Either way, a future revision is waited for (then a 504), as
	// kube-apiserver does for any unrecognised resourceVersion.
	if err := s.waitForRevision(ctx, want); err != nil {
		return 0, nil, err
	}
	if match == "Exact" || (match == "" && opts.Limit > 0) {
		return want, nil, nil // a snapshot at exactly that revision
	}
	return 0, nil, nil // not older than: the latest state
}

// matches evaluates the label and field selectors of opts on a stored object.
func (s *Store) matches(so storedObject, rev int64, opts ListOptions) (bool, error) {
	var head struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(so.json, &head); err != nil {
		return false, meta.NewInternalError(err)
	}
	if opts.Labels != nil && !opts.Labels.Matches(head.Metadata.Labels) {
		return false, nil
	}
	if opts.Fields == nil {
		return true, nil
	}
	var full Object
	get := func(field string) (string, bool) {
		switch field {
		case "metadata.name":
			return head.Metadata.Name, true
		case "metadata.namespace":
			return head.Metadata.Namespace, true
		}
		if !s.selectable(field) {
			return "", false
		}
		if full == nil {
			var err error
			if full, err = decodeObject(so.json); err != nil {
				return "", false
			}
		}
		v, ok := lookupPath(full, strings.Split(field, "."))
		if !ok {
			return "", true
		}
		return scalarString(v), true
	}
	return opts.Fields.Matches(get), nil
}

func (s *Store) selectable(field string) bool {
	for _, f := range s.res.SelectableFields {
		if f[1:] == field {
			return true
		}
	}
	return false
}

// Count returns the number of stored objects of the type.
func (s *Store) Count(ctx context.Context) (int64, error) {
	page, err := s.reg.cfg.Storage.List(ctx, storage.ListOptions{Prefix: s.prefix, Limit: 1, KeysOnly: true})
	if err != nil {
		return 0, err
	}
	return int64(len(page.Items)) + max(page.Remaining, 0), nil
}

// SelectableFieldList renders the fields a field selector may use, quoted
// and comma-separated, for error messages.
func (s *Store) SelectableFieldList() string {
	fields := []string{`"metadata.name"`, `"metadata.namespace"`}
	for _, f := range s.res.SelectableFields {
		fields = append(fields, strconv.Quote(f[1:]))
	}
	return strings.Join(fields, ", ")
}

// SupportsField reports whether field may be used in a field selector.
func (s *Store) SupportsField(field string) bool {
	return field == "metadata.name" || field == "metadata.namespace" || s.selectable(field)
}

func lookupPath(obj any, path []string) (any, bool) {
	cur := obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case nil:
		return ""
	}
	if n, ok := numberString(v); ok {
		return n
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Continue tokens are base64url(JSON{"v":1,"rv":N,"start":K}) + "." +
// base64url(HMAC-SHA256(payload)[:16]) under a random key kept in storage (so
// every instance over one store shares it and tokens survive restarts):
// opaque, versioned and tamper-evident, so that a mangled or forged token is
// a 400; K is relative to the type's key prefix and is checked against the
// listed prefix, so no token reads outside its collection.
type continueToken struct {
	V     int    `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

// latestContinueRV is the revision of a continue token that resumes at the
// latest revision instead of a snapshot (as kube-apiserver's -1).
const latestContinueRV = -1

// continueExpired is the 410 for a continue token whose snapshot has been
// compacted away. Like kube-apiserver's, its Status carries a fresh token that
// resumes from the same key at the latest revision: following it gives an
// inconsistent but complete remainder.
func (s *Store) continueExpired(relKey []byte) error {
	se := meta.NewGone("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. " +
		"Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	se.Status.Continue = s.reg.encodeContinue(latestContinueRV, relKey)
	return se
}

func (r *Registry) encodeContinue(rev int64, relKey []byte) string {
	payload, _ := json.Marshal(continueToken{V: 1, RV: rev, Start: string(relKey)})
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(r.continueMAC(payload))
}

// continueMAC signs a continue token's payload with the store's continue key
// (HMAC-SHA256, truncated to 128 bits).
func (r *Registry) continueMAC(payload []byte) []byte {
	mac := hmac.New(sha256.New, r.continueKey)
	mac.Write(payload)
	return mac.Sum(nil)[:16]
}

func (r *Registry) decodeContinue(tok string) (int64, []byte, error) {
	bad := meta.NewBadRequest("continue key is not valid: the token is malformed")
	dot := strings.LastIndexByte(tok, '.')
	if dot < 0 {
		return 0, nil, bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(tok[:dot])
	if err != nil {
		return 0, nil, bad
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil || !hmac.Equal(sig, r.continueMAC(payload)) {
		return 0, nil, bad
	}
	var ct continueToken
	if err := json.Unmarshal(payload, &ct); err != nil || ct.V != 1 || (ct.RV <= 0 && ct.RV != latestContinueRV) {
		return 0, nil, bad
	}
	return ct.RV, []byte(ct.Start), nil
}
