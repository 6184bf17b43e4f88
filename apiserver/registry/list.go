package registry

import (
	"bytes"
	"context"
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
