package registry

import (
	"context"
	"fmt"

	"github.com/kapi-dev/kapi/storage"
)

// StoredAs makes a type a second view of the objects another type stores:
// events.k8s.io/v1 events are core v1 events, read and written in another
// form. The view keeps no objects of its own: every read converts the
// stored object into the view's form, every write converts the view's form
// back, and a write through either type is seen through both.
type StoredAs struct {
	// Group and Resource name the type whose objects the view serves; its
	// objects live under ResourcePrefix(Group, Resource, ...).
	Group    string
	Resource string
	// FromStored converts an object as the stored type holds it into the
	// view's form, apiVersion and kind included. It may modify obj and
	// return it. metadata is the same in both forms.
	FromStored func(obj Object) (Object, error)
	// ToStored converts an object of the view into the stored type's form,
	// apiVersion and kind included. It may modify obj and return it.
	ToStored func(obj Object) (Object, error)
}

// newViewStorage returns the storage of a view over st.
func newViewStorage(st storage.Store, view *StoredAs) storage.Store {
	return newConvertingStorage(st,
		func(key, value []byte) ([]byte, error) { return convertStored(key, value, view.FromStored) },
		func(key, value []byte) ([]byte, error) { return convertStored(key, value, view.ToStored) })
}

// convertStored decodes a stored value, converts it with fn and encodes the
// result for storage.
func convertStored(key, value []byte, fn func(Object) (Object, error)) ([]byte, error) {
	so, err := parseStored(value)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", key, err)
	}
	obj, err := decodeObject(so.json)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", key, err)
	}
	if obj, err = fn(obj); err != nil {
		return nil, fmt.Errorf("converting %s: %w", key, err)
	}
	return encodeStored(obj)
}

// convertingStorage is the storage a Store reads and writes through when
// the stored form of its objects is not the form it serves (a view, or a
// version other than the storage version): the underlying keys and
// revisions, with every value converted on its way out (fromStored) and in
// (toStored), so that the store, its lists and its watch cache see the
// served form only (and the cache converts each change once for all its
// watchers).
type convertingStorage struct {
	storage.Store
	fromStored func(key, value []byte) ([]byte, error) // never called with a nil value
	toStored   func(key, value []byte) ([]byte, error)
	// rawPrev: watch events carry their previous values as stored, for a
	// watch cache that converts one only when its state lacks it
	// (forCache).
	rawPrev bool
	// guard, for a version of a type in several versions, lets creates
	// and updates through only while the registration is current (see
	// writeGuard).
	guard *writeGuard
}

// out converts a value read from storage; nil stays nil (no previous
// value). A value it cannot convert becomes an unconvertedValue, which
// fails every read of that object with the conversion's error and leaves
// the others (and the watch cache) alone: a list or watch that reaches it
// reports it.
func (v convertingStorage) out(key, value []byte) ([]byte, error) {
	if value == nil {
		return nil, nil
	}
	out, err := v.fromStored(key, value)
	if err != nil {
		return unconvertedValue(err), nil
	}
	return out, nil
}

func (v convertingStorage) Get(ctx context.Context, key []byte, revision int64) (storage.KeyValue, error) {
	kv, err := v.Store.Get(ctx, key, revision)
	if err == nil {
		kv.Value, err = v.out(kv.Key, kv.Value)
	}
	return kv, err
}

func (v convertingStorage) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	page, err := v.Store.List(ctx, opts)
	if err != nil || opts.KeysOnly {
		return page, err
	}
	for i := range page.Items {
		kv := &page.Items[i]
		if kv.Value, err = v.out(kv.Key, kv.Value); err != nil {
			return storage.ListResult{}, err
		}
	}
	return page, nil
}

func (v convertingStorage) Create(ctx context.Context, key, value []byte) (int64, error) {
	value, err := v.toStored(key, value)
	if err != nil {
		return 0, err
	}
	if err := v.guard.enter(); err != nil {
		return 0, err
	}
	defer v.guard.exit()
	return v.Store.Create(ctx, key, value)
}

func (v convertingStorage) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	value, err := v.toStored(key, value)
	if err != nil {
		return 0, err
	}
	if err := v.guard.enter(); err != nil {
		return 0, err
	}
	defer v.guard.exit()
	return v.Store.Update(ctx, key, value, expectedRevision)
}

func (v convertingStorage) Delete(ctx context.Context, key []byte, expectedRevision int64) (storage.KeyValue, int64, error) {
	kv, rev, err := v.Store.Delete(ctx, key, expectedRevision)
	if err == nil {
		kv.Value, err = v.out(kv.Key, kv.Value)
	}
	return kv, rev, err
}

// Watch converts the values of every change; a change it cannot convert
// ends the watch with an error event naming the key (and the backend's
// watch with it).
func (v convertingStorage) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	return mapWatch(ctx, v.Store, opts, func(ev storage.Event) storage.Event {
		var err error
		if ev.Value, err = v.out(ev.Key, ev.Value); err == nil && !v.rawPrev {
			ev.PrevValue, err = v.out(ev.Key, ev.PrevValue)
		}
		if err != nil {
			return storage.Event{Type: storage.EventError, Err: err}
		}
		return ev
	})
}

// forCache returns the storage a watch cache follows and the conversion
// of previous values the cache applies (watch.Config.PrevValue): over a
// converting storage, the watch leaves previous values as stored, so that
// a change the cache's state already holds the previous version of is
// converted once. Other storage is returned as it is, with no conversion.
func forCache(st storage.Store) (storage.Store, func(key, value []byte) []byte) {
	inner := st
	if u, ok := st.(interface{ Unwrap() storage.Store }); ok {
		inner = u.Unwrap()
	}
	v, ok := inner.(convertingStorage)
	if !ok {
		return st, nil
	}
	conv := func(key, value []byte) []byte {
		out, _ := v.out(key, value) // never fails: a failure is an unconverted value
		return out
	}
	v.rawPrev = true
	return storage.KeepProgress(v, v.Store), conv
}

// newConvertingStorage returns st with values converted by fromStored on
// their way out and toStored on their way in.
func newConvertingStorage(st storage.Store, fromStored, toStored func(key, value []byte) ([]byte, error)) storage.Store {
	return newGuardedConvertingStorage(st, fromStored, toStored, nil)
}

// newGuardedConvertingStorage is newConvertingStorage whose creates and
// updates go through guard.
func newGuardedConvertingStorage(st storage.Store, fromStored, toStored func(key, value []byte) ([]byte, error), guard *writeGuard) storage.Store {
	return storage.KeepProgress(convertingStorage{Store: st, fromStored: fromStored, toStored: toStored, guard: guard}, st)
}
