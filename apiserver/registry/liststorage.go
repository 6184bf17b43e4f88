package registry

import (
	"errors"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

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
		page, err := l.s.storage.List(l.ctx, storage.ListOptions{Prefix: prefix, StartKey: start, Revision: *rev, Limit: streamPageSize, MaxBytes: pageBytes})
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
// are spliced into items only as the sink takes them. The page ends at
// opts.Limit items or at the item that brings its values to pageBytes.
func (l *lister) storagePage(prefix, start []byte, rev int64) error {
	s, opts := l.s, &l.opts
	filtered := opts.Labels != nil || opts.Fields != nil
	first := start // where a continued list resumes
	head := ListHead{ItemsSize: -1, KeepItems: opts.KeepItems}
	var (
		items []storage.KeyValue // the page's
		size  int64              // their keys' and values' bytes
	)
	// full adds kv, the page's nth item, and reports whether it fills the page.
	full := func(n int, kv storage.KeyValue) bool {
		size += int64(len(kv.Key) + len(kv.Value))
		return int64(n) >= opts.Limit || size >= pageBytes
	}
	for {
		req := storage.ListOptions{Prefix: prefix, StartKey: start, Revision: rev, Limit: opts.Limit - int64(len(items)), MaxBytes: pageBytes - size}
		req.Count = !filtered // remainingItemCount is shown only then
		if filtered && req.Limit < 64 {
			req.Limit = 64 // read ahead when filtering
		}
		page, err := s.storage.List(l.ctx, req)
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
				if items = append(items, kv); full(len(items), kv) {
					last = i
					break
				}
			}
		} else {
			k := len(page.Items)
			for i, kv := range page.Items {
				if full(len(items)+i+1, kv) {
					last, k = i, i+1
					break
				}
			}
			if items == nil {
				items = page.Items[:k:k] // the whole page in one read (the usual case): no copy
			} else {
				items = append(items, page.Items[:k]...)
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
