package registry

import (
	"context"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/watch"
)

// streamPageSize is the storage page size of a list without a limit: only
// one page of values is held at a time. pageBytes bounds the values of
// every storage page a list holds, of a limited list too: such a page may
// then hold fewer than limit items, with a continue token, as the API
// allows.
const (
	streamPageSize = 500
	pageBytes      = 4 << 20
)

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
