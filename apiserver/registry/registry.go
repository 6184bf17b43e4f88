package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/storage"
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
	// MaxObjectSize limits the encoded size of one object (413 beyond).
	// Default 1.5 MiB, as etcd's default request limit in Kubernetes.
	MaxObjectSize int
}

// Registry is the live set of resource types an API serves. It is safe for
// concurrent use; types may be added, replaced and removed at any time.
type Registry struct {
	cfg Config

	mu        sync.RWMutex
	stores    map[meta.GroupVersionResource]*Store
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
	return &Registry{cfg: cfg, stores: map[meta.GroupVersionResource]*Store{}}, nil
}

// Register adds a resource type, or replaces the registration with the same
// group, version and resource. Stored objects are kept across a replacement.
func (r *Registry) Register(res Resource) error {
	if err := res.complete(); err != nil {
		return err
	}
	gvr := meta.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}
	r.mu.Lock()
	for other, st := range r.stores {
		if other == gvr || other.Group != res.Group || other.Version != res.Version {
			continue
		}
		if st.res.Kind == res.Kind {
			r.mu.Unlock()
			return fmt.Errorf("registry: kind %s is already served by %s", res.Kind, other.Resource)
		}
	}
	r.stores[gvr] = newStore(r, &res)
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	for _, l := range listeners {
		l()
	}
	return nil
}

// Unregister stops serving a resource type. Its stored objects stay in storage
// and are served again if the type is registered again.
func (r *Registry) Unregister(gvr meta.GroupVersionResource) error {
	r.mu.Lock()
	if _, ok := r.stores[gvr]; !ok {
		r.mu.Unlock()
		return fmt.Errorf("registry: %s/%s is not registered", gvr.GroupVersion(), gvr.Resource)
	}
	delete(r.stores, gvr)
	r.gen++
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	for _, l := range listeners {
		l()
	}
	return nil
}

// OnChange registers fn to be called after every Register or Unregister.
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

// Storage returns the storage the registry writes to.
func (r *Registry) Storage() storage.Store { return r.cfg.Storage }

// namespaceExists returns nil when namespace ns exists, a 404 Status error
// when it does not, and nil when no namespaces resource is registered.
func (r *Registry) namespaceExists(ctx context.Context, ns string) error {
	st, ok := r.Store(meta.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if !ok {
		return nil
	}
	_, err := r.cfg.Storage.Get(ctx, st.key("", ns), 0)
	if errors.Is(err, storage.ErrNotFound) {
		return meta.NewNotFound(meta.GroupResource{Resource: "namespaces"}, ns)
	}
	if err != nil {
		return storageError(err, st.res.GroupResource(), ns)
	}
	return nil
}
