package registry

import (
	"sync/atomic"

	"github.com/kapi-dev/kapi/patch"
	"github.com/kapi-dev/kapi/storage"
)

// Store implements the verbs of one resource type on storage. A Store is
// immutable; re-registering a type makes a new one.
type Store struct {
	reg     *Registry
	res     *Resource
	storage storage.Store       // the registry's, converting for a view (Resource.StoredAs)
	prefix  []byte              // storage prefix of every object of the type, ends in '/'
	fields  *patch.FieldManager // managedFields and server-side apply
	watch   watchCacheHolder    // the type's watch cache, started on first use (watch.go)
	gate    *writeGate          // a plain type's writes, retired when RegisterVersions replaces it

	// written is the highest revision this store has written: a lookup in
	// the watch cache sees this server's own writes once the cache has
	// reached it (see Registry.namespaceExists). Every storage write of the
	// store (Create, Update, Delete, writeBack) records its revision with
	// wrote; a new write path must too.
	written atomic.Int64
}

// wrote records that the store wrote revision rev.
func (s *Store) wrote(rev int64) {
	for {
		cur := s.written.Load()
		if rev <= cur || s.written.CompareAndSwap(cur, rev) {
			return
		}
	}
}

func newStore(reg *Registry, res *Resource) *Store {
	s := &Store{
		reg:     reg,
		res:     res,
		storage: reg.cfg.Storage,
		prefix:  reg.ResourcePrefix(res.Group, res.Resource, ""),
		fields:  patch.NewFieldManager(res.Schema, res.GroupVersionKind(), res.Subresources.Status),
	}
	omitEmptyOnApply(s.fields, res)
	switch v := res.StoredAs; {
	case v != nil:
		s.storage = newViewStorage(reg.cfg.Storage, v)
		s.prefix = reg.ResourcePrefix(v.Group, v.Resource, "")
	case res.Virtual == nil:
		s.gate = &writeGate{}
		s.storage = newGatedStorage(reg.cfg.Storage, s.gate)
	}
	return s
}

// omitEmptyOnApply tells a typed type's field manager which empty values
// the store leaves out, so that an apply differing only by them is a no-op,
// as kube-apiserver's for its built-in types (for custom resources it
// writes, and so does kapi).
func omitEmptyOnApply(fm *patch.FieldManager, res *Resource) {
	if res.Options.TypedDecoding || len(res.Options.OmitEmpty) > 0 {
		fm.SetOmitEmpty(res.Options.OmitEmpty...)
	}
}

// FieldManager returns the field manager of the type: server-side apply and
// metadata.managedFields.
func (s *Store) FieldManager() *patch.FieldManager { return s.fields }

// Resource returns the registration the store serves.
func (s *Store) Resource() *Resource { return s.res }

// key returns the storage key of one object.
func (s *Store) key(ns, name string) []byte {
	k := make([]byte, 0, len(s.prefix)+len(ns)+len(name)+1)
	k = append(k, s.prefix...)
	if s.res.Namespaced {
		k = append(k, ns...)
		k = append(k, '/')
	}
	return append(k, name...)
}

// listPrefix returns the storage prefix of a list in ns ("" = all).
func (s *Store) listPrefix(ns string) []byte {
	if !s.res.Namespaced || ns == "" {
		return s.prefix
	}
	k := make([]byte, 0, len(s.prefix)+len(ns)+1)
	k = append(k, s.prefix...)
	k = append(k, ns...)
	return append(k, '/')
}

// WriteOptions are the options every write verb takes.
type WriteOptions struct {
	// DryRun runs every stage except the storage write.
	DryRun bool
	// FieldValidation is "Ignore", "Warn" (default) or "Strict".
	FieldValidation string
	// UnknownFields are problems the decoder already found (duplicate
	// fields), reported like unknown fields.
	UnknownFields []string
	// Subresource is "status" for writes to /status: only .status changes.
	Subresource string
	// FieldManager is the manager metadata.managedFields records the write
	// under (an Update; "" records "unknown").
	FieldManager string
	// Applied marks a write a server-side apply computed (see
	// patch.FieldManager.Apply): the object's metadata.managedFields are
	// already what they must be, and the store records no Update.
	Applied bool
	// UID, when set, is a precondition of an update: the object's
	// metadata.uid must be this one (a PUT's body carries it; kube-apiserver
	// answers 409 otherwise), so a write never lands on another object of
	// the same name.
	UID string
}

// Result is the outcome of a write: the object as stored, encoded as JSON.
type Result struct {
	// JSON is the object with kind, apiVersion and resourceVersion.
	JSON []byte
	// Object is the decoded object (nil when the store did not decode it).
	Object Object
	// Warnings are sent to the client as Warning headers.
	Warnings []string
	// Created reports whether a PUT created the object.
	Created bool
	// Pending reports, for a delete, that the object is still there waiting
	// for its finalizers (JSON is then the object, not a Status).
	Pending bool
}
