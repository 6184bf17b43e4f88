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

// ListOptions are the options of a list.
type ListOptions struct {
	// Labels, when not nil, keeps only matching objects.
	Labels LabelMatcher
	// Fields, when not nil, keeps only matching objects.
	Fields FieldMatcher
	// Limit caps the number of items (0 = all).
	Limit int64
	// Continue is the token of a previous page.
	Continue string
	// ResourceVersion and ResourceVersionMatch follow the list semantics of
	// the API.
	ResourceVersion      string
	ResourceVersionMatch string
	// FromStorage reads storage without asking the watch cache: for a
	// caller that has just asked it (ListCached) and was declined, so that
	// one list does not wait for a lagging cache twice.
	FromStorage bool
}

// ListResult is one page of a list.
type ListResult struct {
	// Items are the objects as JSON (without kind and apiVersion when the
	// type says so).
	Items [][]byte
	// ResourceVersion is the revision of the snapshot.
	ResourceVersion int64
	// Continue is the token of the next page ("" on the last one).
	Continue string
	// RemainingItemCount is set when known (not with selectors, not on the
	// last page).
	RemainingItemCount *int64
}

// List returns the objects in namespace ns ("" = all namespaces).
func (s *Store) List(ctx context.Context, ns string, opts ListOptions) (*ListResult, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
	return s.list(ctx, ns, opts, !s.res.Options.OmitItemTypeMeta)
}

// streamPageSize is the storage page size of a streamed list: only one page
// of values is held at a time.
const streamPageSize = 500

// ListStream lists a whole collection (opts.Limit and opts.Continue must be
// unset) without collecting it: begin is called once with the list's
// revision before the first item, then emit with each item as it is read
// from storage (or from the watch cache's state, for resourceVersion "0").
// The item slice is reused after emit returns. An error returned before
// begin was called is the list's own (a Status); after it, the caller has
// started the response and can only abort it.
func (s *Store) ListStream(ctx context.Context, ns string, opts ListOptions, begin func(rev int64) error, emit func(item []byte) error) error {
	return s.ListStreamReplay(ctx, ns, opts, begin, emit, nil)
}

// ListReplay reads the items of a streamed list again, from the same
// snapshot and in the same order, calling emit with each item after the
// first skip ones (which are neither copied nor passed on).
type ListReplay func(skip int, emit func(item []byte) error) error

// ListStreamReplay is ListStream; once every item has been emitted, end (if
// not nil) is called with a ListReplay of the same list, valid until end
// returns. A second pass lets a caller that must know the size of the whole
// encoded list before writing it (the protobuf envelope) stream it without
// holding it: the first pass measures, the second writes. The snapshot of a
// storage read is its revision (a compaction in between fails the replay);
// that of a watch-cache read is kept in memory until end returns.
func (s *Store) ListStreamReplay(ctx context.Context, ns string, opts ListOptions, begin func(rev int64) error, emit func(item []byte) error, end func(replay ListReplay) error) error {
	if err := s.notVirtual(); err != nil {
		return err
	}
	if opts.Limit > 0 || opts.Continue != "" {
		return meta.NewInternalError(errors.New("ListStream: limit and continue are not supported"))
	}
	typeMeta := !s.res.Options.OmitItemTypeMeta
	prefix := s.listPrefix(ns)
	rev, _, err := s.listStart(ctx, prefix, opts)
	if err != nil {
		return err
	}
	var pass ListReplay
	if c, _, objs, crev, ok := s.cacheObjects(ctx, prefix, nil, rev, opts); ok {
		rev = crev
		pass = s.cachePass(ctx, c, objs, opts, typeMeta)
	}
	if pass == nil {
		// The first page fixes the revision of the snapshot (0: latest).
		pass = s.storagePass(ctx, prefix, &rev, opts, typeMeta)
	}
	begun := false
	first := func(item []byte) error {
		if !begun {
			begun = true
			if err := begin(rev); err != nil {
				return err
			}
		}
		return emit(item)
	}
	if err := pass(0, first); err != nil {
		return err
	}
	if !begun {
		begun = true
		if err := begin(rev); err != nil {
			return err
		}
	}
	if end == nil {
		return nil
	}
	return end(pass)
}

// CachedList is a list, or one page of one, that the watch cache serves
// (Store.ListCached).
type CachedList struct {
	// Objects are the items, in key order; shared: do not modify them
	// (AppendItemJSON renders one as a list item).
	Objects []*watch.Object
	// ResourceVersion is the revision of the snapshot.
	ResourceVersion int64
	// Continue is the token of the next page ("" on the last one).
	Continue string
	// RemainingItemCount is set on a page that is not the last, without
	// selectors.
	RemainingItemCount *int64

	cache *watch.Cache
	sn    *watch.Snapshot // set when Objects are a stretch of sn (no selector)
}

// SizeMemo returns a memo for the total size of the list's objects in the
// representation tag names (see watch.Snapshot.Memo): every list of the same
// stretch of the same state reuses it. It is nil when the list was filtered
// by a selector, or is empty.
func (cl *CachedList) SizeMemo(tag string) func(f func() (int, error)) (int, error) {
	if cl.sn == nil || len(cl.Objects) == 0 {
		return nil
	}
	// The stretch is named by where it starts in the snapshot's array and
	// its length.
	key := struct {
		tag   string
		first **watch.Object
		n     int
	}{tag, &cl.Objects[0], len(cl.Objects)}
	return func(f func() (int, error)) (int, error) { return cl.sn.Memo(key, f) }
}

// Encoding returns an encoding of o (one of the list's objects) that tag
// names, made by enc; see watch.Cache.Encoding (the object may keep it for
// later lists). The bytes are shared: do not modify them.
func (cl *CachedList) Encoding(o *watch.Object, tag string, enc func(o *watch.Object) ([]byte, error)) ([]byte, error) {
	return cl.cache.Encoding(o, tag, enc)
}

// ListCached returns the list (or the page of it) that opts asks for when
// the watch cache can serve it (see cacheObjects); ok is false when the
// caller must read storage (List, ListStream).
func (s *Store) ListCached(ctx context.Context, ns string, opts ListOptions) (_ *CachedList, ok bool, _ error) {
	if err := s.notVirtual(); err != nil {
		return nil, false, err
	}
	prefix := s.listPrefix(ns)
	rev, start, err := s.listStart(ctx, prefix, opts)
	if err != nil {
		return nil, false, err
	}
	return s.cachedList(ctx, prefix, start, rev, opts)
}

// cachedList is ListCached after listStart. A page that leaves objects
// behind keeps the cache's snapshot of its revision (watch.Cache.Retain), so
// that the next pages come from memory too. As in kube-apiserver, a list at
// resourceVersion "0" ignores the limit: the whole (selected) collection
// comes back in one response, which spares an informer's first sync its
// pages.
func (s *Store) cachedList(ctx context.Context, prefix, start []byte, rev int64, opts ListOptions) (*CachedList, bool, error) {
	c, sn, objs, rev, ok := s.cacheObjects(ctx, prefix, start, rev, opts)
	if !ok {
		return nil, false, nil
	}
	limit := opts.Limit
	if opts.ResourceVersion == "0" && opts.Continue == "" {
		limit = 0
	}
	out := &CachedList{ResourceVersion: rev, cache: c}
	next := func(o *watch.Object) {
		out.Continue = s.reg.encodeContinue(rev, o.Key[len(s.prefix):])
		c.Retain(sn)
	}
	filter := selectorFilter(opts.Labels, opts.Fields)
	if filter == nil {
		out.Objects, out.sn = objs, sn
		if limit > 0 && int64(len(objs)) > limit {
			out.Objects = objs[:limit:limit]
			remaining := int64(len(objs)) - limit
			out.RemainingItemCount = &remaining
			next(objs[limit])
		}
		return out, true, nil
	}
	for _, o := range objs {
		a, err := c.Attrs(o)
		if err != nil {
			return nil, false, meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
		}
		if !filter(a) {
			continue
		}
		if limit > 0 && int64(len(out.Objects)) >= limit {
			next(o) // the first object of the next page
			break
		}
		out.Objects = append(out.Objects, o)
	}
	return out, true, nil
}

// AppendItemJSON appends o (from ListCached) as the JSON of a list item.
func (s *Store) AppendItemJSON(dst []byte, o *watch.Object) ([]byte, error) {
	return s.appendItemJSON(dst, o, !s.res.Options.OmitItemTypeMeta)
}

func (s *Store) appendItemJSON(dst []byte, o *watch.Object, typeMeta bool) ([]byte, error) {
	so, err := parseStored(o.Value)
	if err != nil {
		return dst, meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
	}
	return so.appendJSON(dst, o.Revision, typeMeta), nil
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

// cachePass streams the watch cache's objects: the values are the cache's
// (shared, never modified), each item is spliced into one reused buffer.
func (s *Store) cachePass(ctx context.Context, c *watch.Cache, objs []*watch.Object, opts ListOptions, typeMeta bool) ListReplay {
	filter := selectorFilter(opts.Labels, opts.Fields)
	return func(skip int, emit func(item []byte) error) error {
		var buf []byte
		n := 0
		for i, o := range objs {
			if i&255 == 255 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if filter != nil {
				a, err := c.Attrs(o)
				if err != nil {
					return meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
				}
				if !filter(a) {
					continue
				}
			}
			if n++; n <= skip {
				continue
			}
			so, err := parseStored(o.Value)
			if err != nil {
				return meta.NewInternalError(fmt.Errorf("reading %s: %w", o.Key, err))
			}
			buf = so.appendJSON(buf[:0], o.Revision, typeMeta)
			if err := emit(buf); err != nil {
				return err
			}
		}
		return nil
	}
}

// storagePass streams a list from storage, one page of streamPageSize values
// at a time, at revision *rev (0: the latest, which the first page then
// fixes).
func (s *Store) storagePass(ctx context.Context, prefix []byte, rev *int64, opts ListOptions, typeMeta bool) ListReplay {
	filtered := opts.Labels != nil || opts.Fields != nil
	return func(skip int, emit func(item []byte) error) error {
		var (
			buf   []byte
			start []byte
			n     int
		)
		for {
			page, err := s.reg.cfg.Storage.List(ctx, storage.ListOptions{Prefix: prefix, StartKey: start, Revision: *rev, Limit: streamPageSize})
			if err != nil {
				return storageError(err, s.res.GroupResource(), "")
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
					ok, err := s.matches(so, kv.Revision, opts)
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
				buf = so.appendJSON(buf[:0], kv.Revision, typeMeta)
				if err := emit(buf); err != nil {
					return err
				}
			}
			if !page.More {
				return nil
			}
			start = page.NextKey
		}
	}
}

// list reads a list (one page of it when opts.Limit is set).
func (s *Store) list(ctx context.Context, ns string, opts ListOptions, typeMeta bool) (*ListResult, error) {
	prefix := s.listPrefix(ns)
	rev, start, err := s.listStart(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	first := start // where a continued list resumes
	if cl, ok, err := s.cachedList(ctx, prefix, start, rev, opts); err != nil || ok {
		if err != nil {
			return nil, err
		}
		out := &ListResult{ResourceVersion: cl.ResourceVersion, Continue: cl.Continue, RemainingItemCount: cl.RemainingItemCount}
		out.Items = make([][]byte, 0, len(cl.Objects))
		for _, o := range cl.Objects {
			item, err := s.appendItemJSON(nil, o, typeMeta)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, item)
		}
		return out, nil
	}
	filtered := opts.Labels != nil || opts.Fields != nil
	out := &ListResult{}
	st := s.reg.cfg.Storage
	for {
		req := storage.ListOptions{Prefix: prefix, StartKey: start, Revision: rev}
		if opts.Limit > 0 {
			req.Count = !filtered // remainingItemCount is shown only then
			req.Limit = opts.Limit - int64(len(out.Items))
			if filtered && req.Limit < 64 {
				req.Limit = 64 // read ahead when filtering
			}
		}
		page, err := st.List(ctx, req)
		if err != nil {
			var compacted *storage.CompactedError
			if opts.Continue != "" && errors.As(err, &compacted) {
				return nil, s.continueExpired(first[len(s.prefix):])
			}
			return nil, storageError(err, s.res.GroupResource(), "")
		}
		rev = page.Revision
		for i, kv := range page.Items {
			so, err := parseStored(kv.Value)
			if err != nil {
				return nil, meta.NewInternalError(fmt.Errorf("reading %s: %w", kv.Key, err))
			}
			if filtered {
				ok, err := s.matches(so, kv.Revision, opts)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
			}
			out.Items = append(out.Items, so.appendJSON(nil, kv.Revision, typeMeta))
			if opts.Limit > 0 && int64(len(out.Items)) >= opts.Limit {
				more := i < len(page.Items)-1 || page.More
				if more {
					next := append(append([]byte{}, kv.Key...), 0)
					if i == len(page.Items)-1 && page.More {
						// Resume at the key storage found next, as its
						// contract asks: storage remembers the count of
						// the keys left under that key, so that paging
						// through N keys costs O(N), not O(N²/limit).
						// (At the token's revision no key lies between
						// the two.)
						next = page.NextKey
					}
					out.Continue = s.reg.encodeContinue(rev, next[len(s.prefix):])
					if !filtered {
						remaining := int64(len(page.Items)-1-i) + max(page.Remaining, 0)
						if page.Remaining >= 0 {
							out.RemainingItemCount = &remaining
						}
					}
				}
				out.ResourceVersion = rev
				return out, nil
			}
		}
		if !page.More {
			break
		}
		start = page.NextKey
	}
	out.ResourceVersion = rev
	return out, nil
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
