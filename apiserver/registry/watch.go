package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/watch"
)

// WatchOptions are the options of a watch.
type WatchOptions struct {
	// Labels and Fields, when not nil, keep only matching objects. A change
	// that makes an object stop matching is sent as DELETED, one that makes
	// it start matching as ADDED.
	Labels LabelMatcher
	Fields FieldMatcher
	// ResourceVersion follows the watch semantics of the API: "" starts
	// with synthetic ADDED events for the most recent state, "0" for any
	// recent state; any other value streams the changes after it.
	ResourceVersion string
	// SendInitialEvents forces (true) or suppresses (false) the synthetic
	// ADDED events; nil keeps the default of ResourceVersion. With true, a
	// ResourceVersion other than "" and "0" means "not older than".
	SendInitialEvents *bool
	// AllowBookmarks asks for periodic BOOKMARK events and, with
	// SendInitialEvents, for the bookmark that ends the initial events.
	AllowBookmarks bool
	// Encoder turns events into wire frames (one representation). Required.
	// It must be comparable, or a watch.PerWatchEncoder; see watch.Encoder.
	// Its AppendError receives a *meta.StatusError.
	Encoder watch.Encoder
	// Room, when set, bounds the memory of the large frames the watch
	// encodes for itself alone (watch.Options.Room).
	Room watch.Room
}

// Watch starts a watch on the objects in ns ("" = all), served by the type's
// watch cache. Errors before the watch starts are Status errors; afterwards
// an ERROR event carries the Status (410 Expired for a resourceVersion older
// than the retained history, 504 for a start state storage has not reached).
func (s *Store) Watch(ctx context.Context, ns string, opts WatchOptions) (*watch.Watcher, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
	if opts.Encoder == nil {
		return nil, meta.NewInternalError(errors.New("watch without an encoder"))
	}
	gr := s.res.GroupResource()
	var enc watch.Encoder = statusEncoder{Encoder: opts.Encoder, gr: gr}
	if re, ok := opts.Encoder.(watch.RestEncoder); ok {
		enc = restStatusEncoder{perWatchStatusEncoder{statusEncoder{Encoder: opts.Encoder, gr: gr}}, re}
	} else if _, ok := opts.Encoder.(watch.PerWatchEncoder); ok {
		enc = perWatchStatusEncoder{statusEncoder{Encoder: opts.Encoder, gr: gr}}
	}
	var rv int64
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		var err error
		if rv, err = parseRV(opts.ResourceVersion); err != nil {
			return nil, err
		}
	}
	c, err := s.watchCache()
	if err != nil {
		return nil, watchError(err, gr)
	}
	wo := watch.Options{
		Prefix:    s.listPrefix(ns),
		Filter:    selectorFilter(opts.Labels, opts.Fields),
		Encoder:   enc,
		Bookmarks: opts.AllowBookmarks,
		Room:      opts.Room,
	}
	initial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	switch {
	case initial:
		wo.Initial = true
		wo.InitialEventsEnd = opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowBookmarks
		switch opts.ResourceVersion {
		case "":
			wo.Consistent = true
		case "0":
		default:
			// Not older than rv: storage must have reached it.
			if err := s.waitForRevision(ctx, rv); err != nil {
				if meta.ReasonOf(err) == meta.StatusReasonTimeout {
					return watch.NewErrorWatcher(enc, err), nil
				}
				return nil, err
			}
			wo.Revision = rv
		}
	case opts.ResourceVersion == "":
		// No initial events, from the most recent revision.
		cur, err := s.storage.CurrentRevision(ctx)
		if err != nil {
			return nil, storageError(err, gr, "")
		}
		wo.Revision = cur
	case opts.ResourceVersion == "0":
		// From any recent revision: the cache's.
	default:
		wo.Revision = rv
	}
	w, err := c.Watch(ctx, wo)
	if err != nil {
		var future *storage.FutureRevisionError
		if errors.As(err, &future) {
			return watch.NewErrorWatcher(enc, err), nil
		}
		return nil, watchError(err, gr)
	}
	return w, nil
}

// AppendObjectJSON appends to dst the JSON of a stored object value (as a
// watch.Object carries it) with kind, apiVersion and metadata.resourceVersion
// rv. Watch encoders use it.
func AppendObjectJSON(dst, value []byte, rv int64) ([]byte, error) {
	so, err := parseStored(value)
	if err != nil {
		return dst, meta.NewInternalError(err)
	}
	return so.appendJSON(dst, rv, true), nil
}

// statusEncoder hands the encoder of a watch Status errors only. It is
// comparable when the wrapped encoder is.
type statusEncoder struct {
	watch.Encoder
	gr meta.GroupResource
}

func (e statusEncoder) AppendError(dst []byte, err error) []byte {
	return e.Encoder.AppendError(dst, watchError(err, e.gr))
}

// perWatchStatusEncoder is a statusEncoder around a watch.PerWatchEncoder.
type perWatchStatusEncoder struct{ statusEncoder }

func (perWatchStatusEncoder) PerWatch() {}

// restStatusEncoder is a statusEncoder around a watch.RestEncoder, whose
// Rest is wrapped too.
type restStatusEncoder struct {
	perWatchStatusEncoder
	re watch.RestEncoder
}

func (e restStatusEncoder) FirstSent() bool { return e.re.FirstSent() }

func (e restStatusEncoder) Rest() watch.Encoder {
	return statusEncoder{Encoder: e.re.Rest(), gr: e.gr}
}

// watchError turns an error of the watch cache into a Status error.
func watchError(err error, gr meta.GroupResource) *meta.StatusError {
	if se, ok := meta.AsStatusError(err); ok {
		return se
	}
	var compacted *storage.CompactedError
	switch {
	case errors.As(err, &compacted):
		return meta.NewGone(fmt.Sprintf("too old resource version: %d (%d)", compacted.Requested, compacted.Oldest))
	case errors.Is(err, watch.ErrStopped), errors.Is(err, watch.ErrResync):
		return meta.NewServiceUnavailable(fmt.Sprintf("the watch cache of %s is restarting; retry", gr.String()))
	}
	se, _ := meta.AsStatusError(storageError(err, gr, ""))
	return se
}

// watchCacheHolder holds a Store's watch cache, created on first use and
// stopped when the Store stops being served.
type watchCacheHolder struct {
	c       atomic.Pointer[watch.Cache] // read without mu
	mu      sync.Mutex                  // serialises starting and stopping
	stopped bool
}

// watchCache returns the type's watch cache, starting it on first use.
func (s *Store) watchCache() (*watch.Cache, error) {
	h := &s.watch
	if c := h.c.Load(); c != nil {
		return c, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, watch.ErrStopped
	}
	if c := h.c.Load(); c != nil {
		return c, nil // started while this call waited for mu
	}
	st, prevValue := forCache(s.storage)
	c, err := watch.New(watch.Config{
		Settings:  s.reg.cfg.Watch,
		Storage:   st,
		Prefix:    s.prefix,
		Attrs:     s.objectAttrs,
		PrevValue: prevValue,
		Budget:    s.reg.budget,
		Logger:    s.reg.cfg.Logger.With("resource", s.res.GroupResource().String()),
	})
	if err != nil {
		return nil, err
	}
	h.c.Store(c)
	return c, nil
}

// stopWatchCache stops the type's watch cache for good, ending its watches
// (their clients reconnect and find the new registration, if any).
func (s *Store) stopWatchCache() {
	h := &s.watch
	h.mu.Lock()
	c := h.c.Swap(nil)
	h.stopped = true
	h.mu.Unlock()
	if c != nil {
		c.Stop()
	}
}

// Close stops the registry's background work: the watch caches of every
// type (their watches end). Reads and writes keep working.
func (r *Registry) Close() {
	r.mu.RLock()
	stores := make([]*Store, 0, len(r.stores))
	for _, st := range r.stores {
		stores = append(stores, st)
	}
	for _, vs := range r.sets {
		for v, st := range vs.stores {
			if vs.byName[v].Unserved { // the served ones are in r.stores
				stores = append(stores, st)
			}
		}
	}
	r.mu.RUnlock()
	for _, st := range stores {
		st.stopWatchCache()
	}
}

// objectAttrs is what label and field selectors look at, extracted once per
// object version by the watch cache.
type objectAttrs struct {
	name, namespace string
	labels          map[string]string
	fields          map[string]string // selectable fields, by label
}

func (a *objectAttrs) field(f string) (string, bool) {
	switch f {
	case "metadata.name":
		return a.name, true
	case "metadata.namespace":
		return a.namespace, true
	}
	v, ok := a.fields[f]
	return v, ok
}

func (s *Store) objectAttrs(_, value []byte) (any, error) {
	so, err := parseStored(value)
	if errors.As(err, new(unconvertedError)) {
		return unconvertedAttrs{}, nil
	}
	if err != nil {
		return nil, err
	}
	head, err := readSelectorHead(so.json)
	if err != nil {
		return nil, err
	}
	a := &objectAttrs{name: head.Metadata.Name, namespace: head.Metadata.Namespace, labels: head.Metadata.Labels}
	if len(s.res.fieldPaths) > 0 {
		full, err := decodeObject(so.json)
		if err != nil {
			return nil, err
		}
		a.fields = make(map[string]string, len(s.res.fieldPaths))
		for label := range s.res.fieldPaths {
			a.fields[label] = s.fieldValue(full, label)
		}
	}
	return a, nil
}

// unconvertedAttrs are the attributes of an object whose conversion
// failed: every selector passes it, so that the list or watch fails on it
// instead of leaving it out without a word.
type unconvertedAttrs struct{}

// selectorFilter returns the watch filter of the selectors (nil: none).
func selectorFilter(l LabelMatcher, f FieldMatcher) func(any) bool {
	if l == nil && f == nil {
		return nil
	}
	return func(v any) bool {
		if _, ok := v.(unconvertedAttrs); ok {
			return true // let the read of the object report its error
		}
		a, ok := v.(*objectAttrs)
		if !ok {
			return false
		}
		if l != nil && !l.Matches(a.labels) {
			return false
		}
		return f == nil || f.Matches(a.field)
	}
}

// getFromCache serves a get at resourceVersion "0" ("any") from the watch
// cache's state. ok is false when the cache keeps no state.
func (s *Store) getFromCache(ctx context.Context, ns, name string) (_ []byte, ok bool, _ error) {
	c, err := s.watchCache()
	if err != nil {
		return nil, false, nil
	}
	o, _, ok, err := c.Get(ctx, s.key(ns, name))
	if err != nil || !ok {
		return nil, false, nil
	}
	if o == nil {
		return nil, true, meta.NewNotFound(s.res.GroupResource(), name)
	}
	so, err := parseStored(o.Value)
	if err != nil {
		return nil, true, meta.NewInternalError(fmt.Errorf("reading %s %q: %w", s.res.GroupResource(), name, err))
	}
	return so.objectJSON(o.Revision), true, nil
}

// WatchBudget returns the figures of the memory budget the watch caches'
// states share.
func (r *Registry) WatchBudget() watch.BudgetStats { return r.budget.Stats() }

// WatchCacheStats returns the figures of the type's watch cache; ok is false
// when the cache has not started.
func (s *Store) WatchCacheStats() (_ watch.Stats, ok bool) {
	c := s.watch.c.Load()
	if c == nil {
		return watch.Stats{}, false
	}
	return c.Stats(), true
}
