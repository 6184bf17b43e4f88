package registry

import (
	"context"

	"github.com/kapi-dev/kapi/storage"
)

// sealingStorage is the registry's storage with encryption at rest: values
// under the sensitive types' prefixes are sealed on their way in and
// opened on their way out; every other key passes through untouched (a
// list or watch that cannot reach a sensitive key costs nothing more).
// A value that cannot be opened comes out as an unconvertedValue naming
// the object and the key, so that every read of that object is a 500 and
// the others (lists, watch caches) carry on.
type sealingStorage struct {
	storage.Store
	s *sealer
}

// newSealingStorage returns st sealing the values s makes sensitive,
// forwarding storage.ProgressRequester when st has it.
func newSealingStorage(st storage.Store, s *sealer) storage.Store {
	return storage.KeepProgress(sealingStorage{Store: st, s: s}, st)
}

// out opens a value read from storage; nil stays nil.
func (v sealingStorage) out(key, value []byte) []byte {
	if value == nil || !v.s.sensitive(key) {
		return value
	}
	plain, _, err := v.s.open(key, value)
	if err != nil {
		return unconvertedValue(err)
	}
	return plain
}

func (v sealingStorage) Get(ctx context.Context, key []byte, revision int64) (storage.KeyValue, error) {
	kv, err := v.Store.Get(ctx, key, revision)
	if err == nil {
		kv.Value = v.out(kv.Key, kv.Value)
	}
	return kv, err
}

func (v sealingStorage) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	page, err := v.Store.List(ctx, opts)
	if err != nil || opts.KeysOnly || !v.s.overlaps(opts.Prefix) {
		return page, err
	}
	for i := range page.Items {
		kv := &page.Items[i]
		kv.Value = v.out(kv.Key, kv.Value)
	}
	return page, nil
}

func (v sealingStorage) Create(ctx context.Context, key, value []byte) (int64, error) {
	if v.s.sensitive(key) {
		var err error
		if value, err = v.s.seal(key, value); err != nil {
			return 0, err
		}
	}
	return v.Store.Create(ctx, key, value)
}

func (v sealingStorage) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	if v.s.sensitive(key) {
		var err error
		if value, err = v.s.seal(key, value); err != nil {
			return 0, err
		}
	}
	return v.Store.Update(ctx, key, value, expectedRevision)
}

func (v sealingStorage) Delete(ctx context.Context, key []byte, expectedRevision int64) (storage.KeyValue, int64, error) {
	kv, rev, err := v.Store.Delete(ctx, key, expectedRevision)
	if err == nil {
		kv.Value = v.out(kv.Key, kv.Value)
	}
	return kv, rev, err
}

// Watch opens the values and previous values of the changes to sensitive
// keys; a watch that cannot reach one is the backend's own.
func (v sealingStorage) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if !v.s.overlaps(opts.Prefix) {
		return v.Store.Watch(ctx, opts)
	}
	return mapWatch(ctx, v.Store, opts, func(ev storage.Event) storage.Event {
		ev.Value = v.out(ev.Key, ev.Value)
		ev.PrevValue = v.out(ev.Key, ev.PrevValue)
		return ev
	})
}
