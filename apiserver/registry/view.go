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

// viewStorage is the storage a view's Store reads and writes through: the
// stored type's keys and revisions, with every value converted on its way
// in and out, so that the store, its lists and its watch cache see the
// view's form only (and the cache converts each change once for all its
// watchers).
type viewStorage struct {
	storage.Store
	view *StoredAs
}

// fromStored converts a stored value into the view's stored-format value.
func (v viewStorage) fromStored(key, value []byte) ([]byte, error) {
	if value == nil {
		return nil, nil
	}
	return v.convert(key, value, v.view.FromStored)
}

func (v viewStorage) toStored(key, value []byte) ([]byte, error) {
	return v.convert(key, value, v.view.ToStored)
}

func (v viewStorage) convert(key, value []byte, fn func(Object) (Object, error)) ([]byte, error) {
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

func (v viewStorage) Get(ctx context.Context, key []byte, revision int64) (storage.KeyValue, error) {
	kv, err := v.Store.Get(ctx, key, revision)
	if err == nil {
		kv.Value, err = v.fromStored(kv.Key, kv.Value)
	}
	return kv, err
}

func (v viewStorage) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	page, err := v.Store.List(ctx, opts)
	if err != nil {
		return page, err
	}
	for i := range page.Items {
		kv := &page.Items[i]
		if kv.Value, err = v.fromStored(kv.Key, kv.Value); err != nil {
			return storage.ListResult{}, err
		}
	}
	return page, nil
}

func (v viewStorage) Create(ctx context.Context, key, value []byte) (int64, error) {
	value, err := v.toStored(key, value)
	if err != nil {
		return 0, err
	}
	return v.Store.Create(ctx, key, value)
}

func (v viewStorage) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	value, err := v.toStored(key, value)
	if err != nil {
		return 0, err
	}
	return v.Store.Update(ctx, key, value, expectedRevision)
}

func (v viewStorage) Delete(ctx context.Context, key []byte, expectedRevision int64) (storage.KeyValue, int64, error) {
	kv, rev, err := v.Store.Delete(ctx, key, expectedRevision)
	if err == nil {
		kv.Value, err = v.fromStored(kv.Key, kv.Value)
	}
	return kv, rev, err
}

// Watch converts the values of every change; a change it cannot convert
// ends the watch with an error event naming the key (and the backend's
// watch with it).
func (v viewStorage) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	in, err := v.Store.Watch(ctx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan storage.Event, cap(in))
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in { // let the backend's watch end
			}
		}()
		for ev := range in {
			if ev.Type == storage.EventPut || ev.Type == storage.EventDelete {
				var err error
				if ev.Value, err = v.fromStored(ev.Key, ev.Value); err == nil {
					ev.PrevValue, err = v.fromStored(ev.Key, ev.PrevValue)
				}
				if err != nil {
					ev = storage.Event{Type: storage.EventError, Err: err}
				}
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Type == storage.EventError {
				return
			}
		}
	}()
	return out, nil
}

// progressViewStorage is a viewStorage over storage that can request
// progress events, which it forwards.
type progressViewStorage struct {
	viewStorage
}

func (v progressViewStorage) RequestProgress(ctx context.Context) error {
	return v.Store.(storage.ProgressRequester).RequestProgress(ctx)
}

// newViewStorage returns the storage of a view over st.
func newViewStorage(st storage.Store, view *StoredAs) storage.Store {
	v := viewStorage{Store: st, view: view}
	if _, ok := st.(storage.ProgressRequester); ok {
		return progressViewStorage{v}
	}
	return v
}
