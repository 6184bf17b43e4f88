package registry

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/watch"
)

// Config configures a Registry.
type Config struct {
	// Storage is where objects live. Required.
	Storage storage.Store
	// KeyPrefix is prepended to every storage key, so several APIs can share
	// one store. Default "/registry/".
	KeyPrefix string
	// Logger receives operational messages. Default: discard.
	Logger *slog.Logger
	// Now returns the current time (tests may fix it). Default time.Now.
	Now func() time.Time
	// NewUID returns a fresh object uid. Default: random RFC 4122 v4 UUIDs.
	NewUID func() string
	// FutureRevisionWait is how long a read at a resourceVersion newer than
	// the store's waits before a 504. Default 3s, as kube-apiserver.
	FutureRevisionWait time.Duration
	// Admission hooks run for every type, before the type's own.
	Admission []AdmissionHook
	// MaxObjectSize limits the encoded size of one object (413 beyond).
	// Default 1.5 MiB, as etcd's default request limit in Kubernetes.
	MaxObjectSize int
	// Watch tunes the watch caches (one per type and served version,
	// started by the first watch or resourceVersion=0 read). Their states
	// share one memory budget of Watch.StateBytes (watch.Budget). The zero
	// value is the default.
	Watch watch.Settings
	// Encryption, when set, seals the values of the sensitive types in
	// storage (encryption at rest). New fails when a configured key is not
	// the one values were sealed with, or when values are sealed under a
	// key that is not configured (encryptioncheck.go).
	Encryption *Encryption
}

// Registry is the live set of resource types an API serves. It is safe for
// concurrent use; types may be added, replaced and removed at any time.
type Registry struct {
	cfg Config
	// raw is the storage as given (Config.Storage); cfg.Storage is the
	// same with encryption at rest, which seals and opens the values of
	// the sensitive types (sealer, nil without Config.Encryption).
	raw    storage.Store
	budget *watch.Budget // shared by every watch cache's state
	sealer *sealer
	// continueKey signs continue tokens; it lives in storage so that every
	// instance over one store shares it.
	continueKey []byte

	stamps meta.Stamps // creationTimestamp of creates
	// nsStates remembers, per namespace, whether it is terminating at a
	// revision (nsState), for the namespace check of every create.
	nsStates     sync.Map
	nsStateCount atomic.Int64

	mu        sync.RWMutex
	stores    map[meta.GroupVersionResource]*Store // the served types
	sets      map[meta.GroupResource]*versionSet   // types registered with RegisterVersions
	gen       uint64
	listeners []func()
}

// New returns an empty registry over cfg.Storage.
func New(cfg Config) (*Registry, error) {
	if cfg.Storage == nil {
		return nil, errors.New("registry: Config.Storage is required")
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "/registry/"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewUID == nil {
		cfg.NewUID = newUUID
	}
	if cfg.FutureRevisionWait <= 0 {
		cfg.FutureRevisionWait = 3 * time.Second
	}
	if cfg.MaxObjectSize <= 0 {
		cfg.MaxObjectSize = 3 << 19
	}
	r := &Registry{cfg: cfg, raw: cfg.Storage, budget: watch.NewBudget(cfg.Watch.StateBytes), stores: map[meta.GroupVersionResource]*Store{}, sets: map[meta.GroupResource]*versionSet{}}
	if cfg.Encryption != nil {
		var err error
		r.sealer, err = newSealer(cfg.Encryption, func(gr meta.GroupResource) []byte { return r.ResourcePrefix(gr.Group, gr.Resource, "") })
		if err != nil {
			return nil, err
		}
	}
	if err := r.checkEncryption(r.raw, r.sealer); err != nil {
		return nil, err
	}
	if r.sealer != nil {
		r.cfg.Storage = newSealingStorage(r.raw, r.sealer)
	}
	if err := r.loadContinueKey(); err != nil {
		return nil, err
	}
	return r, nil
}

// continueKeyName is where, under the key prefix, the continue-token key is
// kept.
const continueKeyName = "_kapi/continue-key"

// loadContinueKey reads the continue-token signing key from storage,
// creating a random one the first time.
func (r *Registry) loadContinueKey() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []byte(r.cfg.KeyPrefix + continueKeyName)
	for {
		kv, err := r.cfg.Storage.Get(ctx, key, 0)
		if err == nil {
			if len(kv.Value) < 32 {
				return fmt.Errorf("registry: the continue-token key in storage is corrupt")
			}
			r.continueKey = kv.Value
			return nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("registry: reading the continue-token key: %w", err)
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		if _, err := r.cfg.Storage.Create(ctx, key, secret); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("registry: creating the continue-token key: %w", err)
		}
	}
}

// Register adds a resource type, or replaces the registration with the same
// group, version and resource. Stored objects are kept across a replacement.
func (r *Registry) Register(res Resource) error {
	if err := res.complete(); err != nil {
		return err
	}
	if res.Unserved {
		return fmt.Errorf("registry: %s %s: Unserved is for a version registered with RegisterVersions", res.GroupResource(), res.Version)
	}
	gvr := meta.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}
	if res.Virtual == nil { // a virtual type stores nothing; a view records the type it stores as
		if err := r.recordType(&res); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if _, ok := r.sets[res.GroupResource()]; ok {
		r.mu.Unlock()
		return fmt.Errorf("registry: %s is registered in several versions: change it with RegisterVersions", res.GroupResource())
	}
	for other, st := range r.stores {
		if other != gvr && other.Group == res.Group && other.Resource == res.Resource && (st.res.Virtual == nil) != (res.Virtual == nil) {
			r.mu.Unlock()
			return fmt.Errorf("registry: %s cannot be both virtual and stored (version %s)", res.GroupResource(), other.Version)
		}
		if other == gvr || other.Group != res.Group || other.Version != res.Version {
			continue
		}
		if st.res.Kind == res.Kind {
			r.mu.Unlock()
			return fmt.Errorf("registry: kind %s is already served by %s", res.Kind, other.Resource)
		}
	}
	old := r.stores[gvr]
	r.stores[gvr] = newStore(r, &res)
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	if old != nil {
		old.stopWatchCache() // its watches end; clients reconnect to the new one
	}
	for _, l := range listeners {
		l()
	}
	return nil
}

// Unregister stops serving a resource type. Its stored objects stay in storage
// and are served again if the type is registered again.
func (r *Registry) Unregister(gvr meta.GroupVersionResource) error {
	r.mu.Lock()
	if vs, ok := r.sets[meta.GroupResource{Group: gvr.Group, Resource: gvr.Resource}]; ok {
		r.mu.Unlock()
		return r.unregisterVersion(vs, gvr.Version)
	}
	old, ok := r.stores[gvr]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("registry: %s/%s is not registered", gvr.GroupVersion(), gvr.Resource)
	}
	delete(r.stores, gvr)
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	old.stopWatchCache()
	for _, l := range listeners {
		l()
	}
	return nil
}

// typesPrefix is where the registry records, under its key prefix, every
// type it has served, so that the namespace controller knows which storage
// prefixes hold namespaced objects even for types not registered (yet) in
// this process.
const typesPrefix = "_kapi/types/"

// TypeRecord is the record of one stored type the registry has served (see
// RecordedTypes).
type TypeRecord struct {
	Group      string `json:"group"`
	Resource   string `json:"resource"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
	// StorageVersion is the version objects are written in, for a type
	// registered with RegisterVersions.
	StorageVersion string `json:"storageVersion,omitempty"`
	// StoredVersions are the versions objects of the type may still be
	// stored in (a CRD's status.storedVersions): every storage version
	// since the last completed migration. Set by RegisterVersions.
	StoredVersions []string `json:"storedVersions,omitempty"`
}

func (r *Registry) recordType(res *Resource) error {
	rec := TypeRecord{Group: res.Group, Resource: res.Resource, Kind: res.Kind, Namespaced: res.Namespaced}
	if v := res.StoredAs; v != nil {
		rec.Group, rec.Resource = v.Group, v.Resource // the objects are the stored type's
		if _, served := r.StoreForGroupResource(meta.GroupResource{Group: v.Group, Resource: v.Resource}); served {
			return nil // recorded by its own registration, with its kind
		}
	}
	return r.updateTypeRecord(context.Background(), meta.GroupResource{Group: rec.Group, Resource: rec.Resource}, func(old TypeRecord) (TypeRecord, error) {
		if len(old.StoredVersions) > 0 && res.StoredAs == nil && !slices.Equal(old.StoredVersions, []string{res.Version}) {
			return rec, fmt.Errorf("registry: %s: objects may be stored in versions %v: register the type with RegisterVersions, with every one of them", res.GroupResource(), old.StoredVersions)
		}
		rec.StorageVersion, rec.StoredVersions = old.StorageVersion, old.StoredVersions
		return rec, nil
	})
}

// typeRecordKey is the storage key of the record of gr.
func (r *Registry) typeRecordKey(gr meta.GroupResource) []byte {
	return []byte(r.cfg.KeyPrefix + typesPrefix + groupDir(gr.Group) + "/" + gr.Resource)
}

// updateTypeRecord replaces the record of gr with what fn makes of the
// current one (the zero record when there is none), unless fn fails. ctx
// bounds it (and at most 30 s) and may carry a storage.Fence.
func (r *Registry) updateTypeRecord(ctx context.Context, gr meta.GroupResource, fn func(old TypeRecord) (TypeRecord, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := r.typeRecordKey(gr)
	for {
		kv, err := r.cfg.Storage.Get(ctx, key, 0)
		var old TypeRecord
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return fmt.Errorf("registry: reading the record of type %s: %w", gr, err)
		default:
			if err := json.Unmarshal(kv.Value, &old); err != nil {
				return fmt.Errorf("registry: corrupt type record %q: %w", key, err)
			}
		}
		rec, err := fn(old)
		if err != nil {
			return err
		}
		val, _ := json.Marshal(rec)
		switch {
		case kv.Value == nil:
			_, err = r.cfg.Storage.Create(ctx, key, val)
		case !bytes.Equal(kv.Value, val):
			_, err = r.cfg.Storage.Update(ctx, key, val, kv.Revision)
		}
		if errors.Is(err, storage.ErrAlreadyExists) || errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("registry: recording type %s: %w", gr, err)
		}
		return nil
	}
}

// RecordedTypes returns every stored (not virtual) type ever registered on
// the registry's storage, by this process or by another one sharing the
// storage, registered now or not: what a controller that must find every
// object in a namespace looks through (ResourcePrefix gives where the
// objects of a type that is not registered here live).
func (r *Registry) RecordedTypes(ctx context.Context) ([]TypeRecord, error) {
	page, err := r.cfg.Storage.List(ctx, storage.ListOptions{Prefix: []byte(r.cfg.KeyPrefix + typesPrefix)})
	if err != nil {
		return nil, err
	}
	out := make([]TypeRecord, 0, len(page.Items))
	for _, kv := range page.Items {
		var tr TypeRecord
		if err := json.Unmarshal(kv.Value, &tr); err != nil {
			return nil, fmt.Errorf("registry: corrupt type record %q: %w", kv.Key, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

// TypeRecordOf returns the record of one type (see RecordedTypes); ok is
// false when the type was never registered on the storage.
func (r *Registry) TypeRecordOf(ctx context.Context, gr meta.GroupResource) (rec TypeRecord, ok bool, err error) {
	key := r.typeRecordKey(gr)
	kv, err := r.cfg.Storage.Get(ctx, key, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("registry: reading the record of type %s: %w", gr, err)
	}
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return rec, false, fmt.Errorf("registry: corrupt type record %q: %w", key, err)
	}
	return rec, true, nil
}

// OnChange registers fn to be called after every Register or Unregister. fn
// must not block: it runs in the goroutine that changed the set of types.
func (r *Registry) OnChange(fn func()) {
	r.mu.Lock()
	r.listeners = append(r.listeners, fn)
	r.mu.Unlock()
}

// Generation increases with every change to the set of types.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// Store returns the store of a resource.
func (r *Registry) Store(gvr meta.GroupVersionResource) (*Store, bool) {
	r.mu.RLock()
	st, ok := r.stores[gvr]
	r.mu.RUnlock()
	return st, ok
}

// StoreForGroupResource returns the store of a stored (not virtual) type by
// group and resource: for a type in several versions, its storage
// version's (served or not). When the type itself is not registered, a
// view of its objects (Resource.StoredAs) serves them.
func (r *Registry) StoreForGroupResource(gr meta.GroupResource) (*Store, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if vs, ok := r.sets[gr]; ok {
		return vs.stores[vs.storage], true
	}
	var view *Store
	for gvr, st := range r.stores {
		switch v := st.res.StoredAs; {
		case st.res.Virtual != nil:
		case gvr.Group == gr.Group && gvr.Resource == gr.Resource && v == nil:
			return st, true
		case v != nil && v.Group == gr.Group && v.Resource == gr.Resource:
			view = st
		}
	}
	return view, view != nil
}

// StoreForKind returns the store of the stored (not virtual) type of kind
// in apiVersion ("group/version", or "version" for the core group), or in
// another version of the group when that version is not served: what an
// owner reference names.
func (r *Registry) StoreForKind(apiVersion, kind string) (*Store, bool) {
	gv, ok := meta.ParseGroupVersion(apiVersion)
	if !ok {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, vs := range r.sets {
		if vs.group == gv.Group && vs.kind == kind {
			if st, ok := vs.stores[gv.Version]; ok {
				return st, true
			}
			return vs.stores[vs.storage], true
		}
	}
	var fallback *Store
	for gvr, st := range r.stores {
		if gvr.Group != gv.Group || st.res.Kind != kind || st.res.Virtual != nil {
			continue
		}
		if gvr.Version == gv.Version {
			return st, true
		}
		fallback = st
	}
	return fallback, fallback != nil
}

// StoreForKey returns the store of the stored (not virtual) type whose
// objects live under the storage key key (its storage version's for a type
// in several versions, a view of them when the type itself is not
// registered), as a storage list or watch under KeyPrefix returns it. Keys
// of types not registered, and the registry's own records, have none.
func (r *Registry) StoreForKey(key []byte) (*Store, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, vs := range r.sets {
		if st := vs.stores[vs.storage]; bytes.HasPrefix(key, st.prefix) {
			return st, true
		}
	}
	var view *Store
	for _, st := range r.stores {
		if st.res.Virtual != nil || !bytes.HasPrefix(key, st.prefix) {
			continue
		}
		if st.res.StoredAs == nil {
			return st, true
		}
		view = st
	}
	return view, view != nil
}

// KeyPrefix returns the prefix of every storage key the registry writes
// (Config.KeyPrefix): a controller that lists or watches Storage directly
// reads everything under it. Object values there are read with StoredJSON
// and StoredMetadataMayHave; keys that are not objects have no
// StoreForKey.
func (r *Registry) KeyPrefix() string { return r.cfg.KeyPrefix }

// ResourcePrefix returns the storage key prefix of the objects of
// group/resource, or of those in namespace when namespace is not empty,
// whether or not the type is registered. It ends in '/'.
func (r *Registry) ResourcePrefix(group, resource, namespace string) []byte {
	p := r.cfg.KeyPrefix + groupDir(group) + "/" + resource + "/"
	if namespace != "" {
		p += namespace + "/"
	}
	return []byte(p)
}

// groupDir is the storage directory of group: "core" for the core group.
func groupDir(group string) string {
	if group == "" {
		return "core"
	}
	return group
}

// Resources returns every registered resource, ordered by group, version and
// resource name. The returned values must not be modified.
func (r *Registry) Resources() []*Resource {
	r.mu.RLock()
	out := make([]*Resource, 0, len(r.stores))
	for _, st := range r.stores {
		out = append(out, st.res)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	return out
}

// Storage returns the storage the registry writes to. With encryption at
// rest (Config.Encryption) it seals and opens the values of the sensitive
// types: what it reads and writes is plaintext.
func (r *Registry) Storage() storage.Store { return r.cfg.Storage }

// namespaceExists returns nil when namespace ns exists, a 404 Status error
// when it does not, errNamespaceTerminating when it is being deleted, and nil
// when no namespaces resource is registered.
//
// Like kube-apiserver's NamespaceLifecycle admission, it looks in the
// namespaces' watch cache first and reads storage when the cache does not
// have the namespace. The cache answers only once it has caught up with
// every namespace write this server made (Store.written), so a namespace
// created or deleted through this server is seen at once; a change made
// through another server sharing the storage is seen when the cache
// receives it (milliseconds), as with kube-apiserver.
func (r *Registry) namespaceExists(ctx context.Context, ns string) error {
	st, ok := r.Store(meta.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if !ok {
		return nil
	}
	key := st.key("", ns)
	if c, err := st.watchCache(); err == nil {
		if o, rev, ok := c.Peek(key); ok && o != nil && rev >= st.written.Load() {
			return r.namespaceStateOf(ns, o.Value, o.Revision)
		}
	}
	kv, err := r.cfg.Storage.Get(ctx, key, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return meta.NewNotFound(meta.GroupResource{Resource: "namespaces"}, ns)
	}
	if err != nil {
		return storageError(err, st.res.GroupResource(), ns)
	}
	return r.namespaceStateOf(ns, kv.Value, kv.Revision)
}

// nsStateMemoSize bounds the namespace state memo; past it, it starts over.
const nsStateMemoSize = 4096

// nsState is namespaceState's answer for one revision of a namespace.
type nsState struct {
	rev         int64
	terminating bool
}

// namespaceStateOf is namespaceState of namespace ns at revision rev,
// remembered per namespace: a revision's answer never changes, and creates
// ask it of the same few namespaces over and over.
func (r *Registry) namespaceStateOf(ns string, value []byte, rev int64) error {
	if v, ok := r.nsStates.Load(ns); ok {
		if st := v.(nsState); st.rev == rev {
			if st.terminating {
				return errNamespaceTerminating
			}
			return nil
		}
	}
	err := namespaceState(value, rev)
	if err != nil && !errors.Is(err, errNamespaceTerminating) {
		return err // not remembered
	}
	if _, replaced := r.nsStates.Swap(ns, nsState{rev: rev, terminating: err != nil}); !replaced && r.nsStateCount.Add(1) > nsStateMemoSize {
		r.nsStates.Clear()
		r.nsStateCount.Store(0)
	}
	return err
}

// namespaceState returns errNamespaceTerminating when the stored namespace
// is being deleted.
func namespaceState(value []byte, rev int64) error {
	if !bytes.Contains(value, []byte(`"deletionTimestamp":`)) {
		return nil
	}
	obj, err := decodeStored(value, rev)
	if err != nil {
		return meta.NewInternalError(err)
	}
	if _, deleting := obj["metadata"].(map[string]any)["deletionTimestamp"]; deleting {
		return errNamespaceTerminating
	}
	return nil
}

// errNamespaceTerminating marks a create refused because its namespace is
// being deleted; the store turns it into kube-apiserver's 403.
var errNamespaceTerminating = errors.New("namespace is terminating")
