package registry

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// A storage migration rewrites the objects of a type in several versions
// that are stored in an earlier storage version into the current one, one
// compare-and-swap at a time, and then records that no other version holds
// objects any more (TypeRecord.StoredVersions), so that an old version can
// be removed. The controllers package runs it; these are its steps.

// ErrStorageVersionChanged is the error of a migration step whose target is
// no longer the type's storage version (or whose type is no longer
// registered in several versions): the migration must start again for the
// new one.
var ErrStorageVersionChanged = errors.New("registry: the storage version changed")

// StorageMigration is the migration state of one type registered with
// RegisterVersions.
type StorageMigration struct {
	Group, Resource string
	// StorageVersion is the version the type is written in now: the
	// migration's target.
	StorageVersion string
	// StoredVersions are the versions objects may still be stored in, as
	// the type's record says (TypeRecord.StoredVersions).
	StoredVersions []string
	// Prefix is the storage prefix of the type's objects.
	Prefix []byte

	stored []byte // how a value stored in StorageVersion starts
}

// Pending reports whether objects may be stored in a version other than
// the storage version.
func (m StorageMigration) Pending() bool {
	return !slices.Equal(m.StoredVersions, []string{m.StorageVersion})
}

// InStorageVersion reports whether a stored value (as listed from
// Registry.Storage under Prefix) is in the storage version: such a value
// needs no migration.
func (m StorageMigration) InStorageVersion(value []byte) bool {
	so, err := parseStored(value)
	return err == nil && bytes.HasPrefix(so.json, m.stored)
}

// StorageMigrations returns the migration state of every type registered
// here with RegisterVersions, ordered by group and resource.
func (r *Registry) StorageMigrations(ctx context.Context) ([]StorageMigration, error) {
	recs, err := r.RecordedTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: reading the type records: %w", err)
	}
	byGR := map[meta.GroupResource]TypeRecord{}
	for _, rec := range recs {
		byGR[meta.GroupResource{Group: rec.Group, Resource: rec.Resource}] = rec
	}
	r.mu.RLock()
	out := make([]StorageMigration, 0, len(r.sets))
	for gr, vs := range r.sets {
		out = append(out, StorageMigration{Group: gr.Group, Resource: gr.Resource, StorageVersion: vs.storage,
			StoredVersions: byGR[gr].StoredVersions, Prefix: r.ResourcePrefix(gr.Group, gr.Resource, ""),
			stored: []byte(vs.prefixes[vs.storage])})
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b StorageMigration) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
	})
	return out, nil
}

// MigrateStored rewrites the object kv (as listed from Storage; a nil
// Value is read first) of type gr into the storage version to, with a
// compare-and-swap on its revision: only apiVersion and the fields the
// conversion changes differ, and its resourceVersion moves on, as with
// any write. It reports whether it wrote: an object already in to (written
// since by a client, say) or deleted meanwhile needs nothing. A conflict
// is retried on the newer object. The errors are ErrStorageVersionChanged
// when to is no longer gr's storage version, a *ConversionError, and
// storage errors.
func (r *Registry) MigrateStored(ctx context.Context, gr meta.GroupResource, to string, kv storage.KeyValue) (bool, error) {
	r.mu.RLock()
	vs := r.sets[gr]
	r.mu.RUnlock()
	if vs == nil || vs.storage != to {
		return false, ErrStorageVersionChanged
	}
	prefix := r.ResourcePrefix(gr.Group, gr.Resource, "")
	st := r.cfg.Storage
	for {
		if kv.Value == nil {
			var err error
			if kv, err = st.Get(ctx, kv.Key, 0); errors.Is(err, storage.ErrNotFound) {
				return false, nil
			} else if err != nil {
				return false, fmt.Errorf("registry: migrating %s: %w", kv.Key, err)
			}
		}
		so, err := parseStored(kv.Value)
		if errors.As(err, new(unconvertedError)) {
			// Unreadable (a sealed value that does not open): this object
			// fails, the others go on.
			return false, &ConversionError{Group: vs.group, Kind: vs.kind, From: "?", To: to,
				Object: string(bytes.TrimPrefix(kv.Key, prefix)), Err: err}
		}
		if err != nil {
			return false, fmt.Errorf("registry: migrating %s: %w", kv.Key, err)
		}
		if bytes.HasPrefix(so.json, []byte(vs.prefixes[to])) {
			return false, nil
		}
		from, err := vs.storedVersion(so.json)
		if err != nil {
			return false, &ConversionError{Group: vs.group, Kind: vs.kind, From: "?", To: to,
				Object: string(bytes.TrimPrefix(kv.Key, prefix)), Err: err}
		}
		enc, err := vs.convertStored(kv.Key, prefix, kv.Value, from, to)
		if err != nil {
			return false, err
		}
		if err = vs.guard.enter(); err == nil {
			_, err = st.Update(ctx, kv.Key, enc, kv.Revision)
			vs.guard.exit()
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, errSetRetired):
			return false, ErrStorageVersionChanged
		case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			kv.Value = nil // written or deleted meanwhile: look again
		default:
			return false, fmt.Errorf("registry: migrating %s: %w", kv.Key, err)
		}
	}
}

// CompleteMigration records that every object of gr is stored in the
// storage version to (TypeRecord.StoredVersions becomes [to]), after a
// migration has rewritten them all: the other versions may then be
// removed. It fails with ErrStorageVersionChanged when to is no longer the
// storage version, as registered here and as recorded. The record is
// written with ctx (the migration controller's, fenced under an election).
func (r *Registry) CompleteMigration(ctx context.Context, gr meta.GroupResource, to string) error {
	return r.updateTypeRecord(ctx, gr, func(old TypeRecord) (TypeRecord, error) {
		r.mu.RLock()
		vs := r.sets[gr]
		r.mu.RUnlock()
		if vs == nil || vs.storage != to || old.StorageVersion != to {
			return old, ErrStorageVersionChanged
		}
		old.StoredVersions = []string{to}
		return old, nil
	})
}

// errSetRetired is the error of a write through a registration of a type
// that has since been registered with another storage version: the API
// answers it with a 409, and the client tries again through the new one.
var errSetRetired = errors.New("the storage version of the type changed while the request was served; please try again")

// writeGuard is a registration's guard of its writes: they go through
// its gate, which the registrations of a type that follow one another with
// one storage version share. The gate is set when the registration is
// published, before any write.
type writeGuard struct {
	gate *writeGate
}

// writeGate lets writes through until it is retired: when the type is
// registered again with another storage version, once the writes in flight
// have ended, so that no write in the old storage version lands behind a
// migration that has already passed its key.
type writeGate struct {
	mu      sync.RWMutex
	retired bool
}

// enter lets a write in, unless the gate is retired; exit must follow it.
// Without a guard (or gate) every write goes in.
func (g *writeGuard) enter() error {
	if g == nil || g.gate == nil {
		return nil
	}
	g.gate.mu.RLock()
	if g.gate.retired {
		g.gate.mu.RUnlock()
		return errSetRetired
	}
	return nil
}

// exit ends a write that entered.
func (g *writeGuard) exit() {
	if g != nil && g.gate != nil {
		g.gate.mu.RUnlock()
	}
}

// retire waits for the writes in flight and refuses later ones.
func (g *writeGate) retire() {
	g.mu.Lock()
	g.retired = true
	g.mu.Unlock()
}

// gatedStorage is the storage of a type registered with Register: its
// creates and updates go through a gate that RegisterVersions retires when
// it replaces the type, so that no write of the plain registration lands
// after the type has several versions (and, maybe, another storage
// version a migration is moving objects to).
type gatedStorage struct {
	storage.Store
	guard writeGuard
}

func (g gatedStorage) Create(ctx context.Context, key, value []byte) (int64, error) {
	if err := g.guard.enter(); err != nil {
		return 0, err
	}
	defer g.guard.exit()
	return g.Store.Create(ctx, key, value)
}

func (g gatedStorage) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	if err := g.guard.enter(); err != nil {
		return 0, err
	}
	defer g.guard.exit()
	return g.Store.Update(ctx, key, value, expectedRevision)
}

// newGatedStorage returns st with its creates and updates through gate.
func newGatedStorage(st storage.Store, gate *writeGate) storage.Store {
	return storage.KeepProgress(gatedStorage{Store: st, guard: writeGuard{gate: gate}}, st)
}
