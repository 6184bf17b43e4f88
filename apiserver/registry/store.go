package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
	"github.com/kapi-dev/kapi/schema"
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
	if v := res.StoredAs; v != nil {
		s.storage = newViewStorage(reg.cfg.Storage, v)
		s.prefix = reg.ResourcePrefix(v.Group, v.Resource, "")
	}
	return s
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

// Get returns the object ns/name as JSON. resourceVersion follows the get
// semantics of the API: "" most recent, "0" any, other values not older than.
func (s *Store) Get(ctx context.Context, ns, name, resourceVersion string) ([]byte, error) {
	if resourceVersion == "0" {
		// "Any": the watch cache's state may serve it (watch.go).
		if body, ok, err := s.getFromCache(ctx, ns, name); ok || err != nil {
			return body, err
		}
	}
	if err := s.waitForRV(ctx, resourceVersion); err != nil {
		return nil, err
	}
	kv, err := s.storage.Get(ctx, s.key(ns, name), 0)
	if err != nil {
		return nil, storageError(err, s.res.GroupResource(), name)
	}
	so, err := parseStored(kv.Value)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("reading %s %q: %w", s.res.GroupResource(), name, err))
	}
	return so.objectJSON(kv.Revision), nil
}

// GetObject returns the decoded object ns/name at the latest revision.
func (s *Store) GetObject(ctx context.Context, ns, name string) (Object, error) {
	kv, err := s.storage.Get(ctx, s.key(ns, name), 0)
	if err != nil {
		return nil, storageError(err, s.res.GroupResource(), name)
	}
	obj, err := decodeStored(kv.Value, kv.Revision)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("reading %s %q: %w", s.res.GroupResource(), name, err))
	}
	return obj, nil
}

// waitForRV makes a "not older than" read wait, briefly, until the store has
// reached resourceVersion; it answers 504 when it does not.
func (s *Store) waitForRV(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" || resourceVersion == "0" {
		return nil
	}
	rv, err := parseRV(resourceVersion)
	if err != nil {
		return err
	}
	return s.waitForRevision(ctx, rv)
}

func (s *Store) waitForRevision(ctx context.Context, rv int64) error {
	st := s.storage
	cur, err := st.CurrentRevision(ctx)
	if err != nil {
		return storageError(err, s.res.GroupResource(), "")
	}
	if cur >= rv {
		return nil
	}
	deadline := s.reg.cfg.Now().Add(s.reg.cfg.FutureRevisionWait)
	for cur < rv {
		if !s.reg.cfg.Now().Before(deadline) {
			return meta.NewTimeout(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
		}
		if err := sleepCtx(ctx, 50); err != nil {
			return err
		}
		if cur, err = st.CurrentRevision(ctx); err != nil {
			return storageError(err, s.res.GroupResource(), "")
		}
	}
	return nil
}

// Create stores a new object in namespace ns. obj is the decoded request body;
// the store takes ownership of it.
func (s *Store) Create(ctx context.Context, ns string, obj Object, opts WriteOptions) (*Result, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
	res := s.res
	gr := res.GroupResource()
	md, warnings, err := s.prepareBody(obj, ns, opts)
	if err != nil {
		return nil, err
	}
	name, _ := md["name"].(string)
	if name == "" {
		if gn, _ := md["generateName"].(string); gn != "" {
			name = generateName(gn)
			md["name"] = name
		}
	}
	if rv, _ := md["resourceVersion"].(string); rv != "" {
		return nil, meta.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if res.Namespaced {
		if err := s.reg.namespaceExists(ctx, ns); errors.Is(err, errNamespaceTerminating) {
			se := meta.NewForbidden(gr, name, fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", ns))
			se.Status.Details.Causes = []meta.StatusCause{{Type: "NamespaceTerminating", Message: fmt.Sprintf("namespace %s is being terminated", ns), Field: "metadata.namespace"}}
			return nil, se
		} else if err != nil {
			return nil, err
		}
	}
	now := s.reg.cfg.Now()
	md["uid"] = s.reg.cfg.NewUID()
	md["creationTimestamp"] = s.reg.stamps.Value(now)
	delete(md, "deletionTimestamp")
	delete(md, "deletionGracePeriodSeconds")
	if res.Options.NoGeneration {
		delete(md, "generation")
	} else {
		md["generation"] = int64(1)
	}
	if res.Subresources.Status {
		delete(obj, "status")
	}
	if h := res.Strategy.PrepareForCreate; h != nil {
		h(ctx, obj)
	}
	areq := &AdmissionRequest{Operation: OperationCreate, Namespace: ns, Name: name, Object: obj, DryRun: opts.DryRun}
	if err := s.admit(ctx, true, areq); err != nil {
		return nil, err
	}
	obj = areq.Object
	s.manageFields(nil, obj, obj, opts)
	if errs := s.validate(ctx, obj, nil); len(errs) > 0 {
		return nil, s.invalid(name, errs)
	}
	if err := s.admit(ctx, false, areq); err != nil {
		return nil, err
	}
	buf := storedBuffers.Get()
	defer storedBuffers.Put(buf, maxPooledStored) // enc and so are not used after the return
	enc, err := encodeStoredInto(buf, obj)
	if err != nil {
		return nil, meta.NewInternalError(err)
	}
	if enc, err = s.fitSize(buf, enc, obj, opts); err != nil {
		return nil, err
	}
	so, _ := parseStored(enc)
	if opts.DryRun {
		_, err := s.storage.Get(ctx, s.key(ns, name), 0)
		if err == nil {
			return nil, meta.NewAlreadyExists(gr, name)
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, storageError(err, gr, name)
		}
		return &Result{JSON: so.objectJSON(0), Object: obj, Warnings: warnings}, nil
	}
	rev, err := s.storage.Create(ctx, s.key(ns, name), enc)
	if err != nil {
		return nil, storageError(err, gr, name)
	}
	s.wrote(rev)
	md["resourceVersion"] = strconv.FormatInt(rev, 10)
	return &Result{JSON: so.objectJSON(rev), Object: obj, Warnings: warnings}, nil
}

// Update replaces the object ns/name with obj (a PUT). The object must
// exist, unless the type creates on update (Options.CreateOnUpdate) and obj
// has no resourceVersion.
func (s *Store) Update(ctx context.Context, ns, name string, obj Object, opts WriteOptions) (*Result, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
	res := s.res
	gr := res.GroupResource()
	md, warnings, err := s.prepareBody(obj, ns, opts)
	if err != nil {
		return nil, err
	}
	if bodyName, _ := md["name"].(string); bodyName != name {
		if bodyName == "" {
			md["name"] = name
		} else {
			return nil, meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", bodyName, name))
		}
	}
	var expected int64
	rvs, _ := md["resourceVersion"].(string)
	if rvs != "" {
		if expected, err = parseObjectRV(rvs); err != nil {
			return nil, err
		}
	}
	st := s.storage
	key := s.key(ns, name)
	buf := storedBuffers.Get()
	defer storedBuffers.Put(buf, maxPooledStored) // enc and so are not used after the return
	for {
		cur, err := st.Get(ctx, key, 0)
		if errors.Is(err, storage.ErrNotFound) && res.Options.CreateOnUpdate && rvs == "" && opts.Subresource == "" {
			r, err := s.Create(ctx, ns, meta.DeepCopyMap(obj), opts) // obj stays the body, should the object appear meanwhile
			if meta.ReasonOf(err) == meta.StatusReasonAlreadyExists {
				continue // created meanwhile: update it
			}
			if r != nil {
				r.Created = true
			}
			return r, err
		}
		if err != nil {
			return nil, storageError(err, gr, name)
		}
		if rvs == "" && !res.Options.UnconditionalUpdate {
			// Only an object that exists needs one: a missing one is a 404,
			// as kube-apiserver answers.
			return nil, meta.NewInvalid(res.GroupVersionKind(), name, meta.ErrorList{
				meta.Invalid(meta.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update"),
			})
		}
		if expected != 0 && cur.Revision != expected {
			return nil, meta.NewConflict(gr, name, meta.ConflictModified)
		}
		old, err := decodeStored(cur.Value, cur.Revision)
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		areq := &AdmissionRequest{Operation: OperationUpdate, Subresource: opts.Subresource, Namespace: ns, Name: name,
			Object: s.updated(ctx, obj, old, opts.Subresource), OldObject: old, DryRun: opts.DryRun}
		next, err := s.admitUpdate(ctx, areq, obj, opts)
		if err != nil {
			return nil, err
		}
		enc, err := encodeStoredInto(buf, next)
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		if enc, err = s.fitSize(buf, enc, next, opts); err != nil {
			return nil, err
		}
		so, _ := parseStored(enc)
		if bytes.Equal(enc, cur.Value) {
			// Nothing changed: kube-apiserver answers with the current object
			// and writes nothing.
			setRV(next, cur.Revision)
			return &Result{JSON: so.objectJSON(cur.Revision), Object: next, Warnings: warnings}, nil
		}
		if opts.DryRun {
			setRV(next, cur.Revision)
			return &Result{JSON: so.objectJSON(cur.Revision), Object: next, Warnings: warnings}, nil
		}
		var rev int64
		if s.finished(next) {
			// The last finalizer of an object being deleted is gone: the
			// object goes, and watchers see it deleted.
			_, rev, err = st.Delete(ctx, key, cur.Revision)
		} else {
			rev, err = st.Update(ctx, key, enc, cur.Revision)
		}
		if errors.Is(err, storage.ErrConflict) && expected == 0 {
			continue // unconditional update: retry on the newer object
		}
		if err != nil {
			return nil, storageError(err, gr, name)
		}
		s.wrote(rev)
		setRV(next, rev)
		return &Result{JSON: so.objectJSON(rev), Object: next, Warnings: warnings}, nil
	}
}

// updated is the object an update of old with obj writes, before
// admission: for /finalize old with obj's spec.finalizers, for /status old
// with obj's status, else obj prepared for the update.
func (s *Store) updated(ctx context.Context, obj, old Object, subresource string) Object {
	switch subresource {
	case "finalize":
		next := shallowCopyWithMeta(old)
		spec, _ := next["spec"].(map[string]any)
		spec = shallowCopy(spec)
		if fins, _, _ := meta.NestedSlice(obj, "spec", "finalizers"); fins != nil {
			spec["finalizers"] = fins
		} else {
			delete(spec, "finalizers")
		}
		next["spec"] = spec
		return next
	case "status":
		next := shallowCopyWithMeta(old)
		if st, ok := obj["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
		return next
	}
	next := shallowCopyWithMeta(obj)
	s.prepareUpdate(next, old)
	if h := s.res.Strategy.PrepareForUpdate; h != nil {
		h(ctx, next, old)
	}
	return next
}

// admitUpdate runs an update's mutating admission, field management,
// validation and validating admission, and returns the object to write.
func (s *Store) admitUpdate(ctx context.Context, areq *AdmissionRequest, obj Object, opts WriteOptions) (Object, error) {
	if err := s.admit(ctx, true, areq); err != nil {
		return nil, err
	}
	next, old := areq.Object, areq.OldObject
	s.manageFields(old, next, obj, opts)
	errs := checkFinalizersOnUpdate(next, old)
	if len(errs) == 0 {
		errs = s.validate(ctx, next, old)
	}
	if len(errs) > 0 {
		return nil, s.invalid(areq.Name, errs)
	}
	if err := s.admit(ctx, false, areq); err != nil {
		return nil, err
	}
	return next, nil
}

// manageFields sets next's metadata.managedFields for a write (the one
// field-management step of the store, after mutating admission and before
// validation): an Update by opts.FieldManager comparing old (nil for a
// create) with next, or, for a server-side apply (opts.Applied), the
// managedFields the apply computed, which req (the request's object) carries.
func (s *Store) manageFields(old, next, req Object, opts WriteOptions) {
	if opts.Applied {
		md, _ := next["metadata"].(map[string]any)
		rmd, _ := req["metadata"].(map[string]any)
		if md == nil || rmd == nil {
			return
		}
		if mf, ok := rmd["managedFields"]; ok {
			md["managedFields"] = mf
		} else {
			delete(md, "managedFields")
		}
		return
	}
	if err := s.fields.Update(old, next, opts.FieldManager, opts.Subresource, s.reg.cfg.Now()); err != nil {
		s.reg.cfg.Logger.Warn("recording managedFields failed; the object is written without them",
			"resource", s.res.GroupResource().String(), "name", meta.GetName(next), "err", err)
	}
}

// prepareUpdate carries over from old what a client may not change through
// the main resource.
func (s *Store) prepareUpdate(obj, old Object) {
	md := obj["metadata"].(map[string]any)
	omd, _ := old["metadata"].(map[string]any)
	for _, k := range []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"} {
		if v, ok := omd[k]; ok {
			md[k] = v
		} else {
			delete(md, k)
		}
	}
	if s.res.Subresources.Status {
		if st, ok := old["status"]; ok {
			obj["status"] = st
		} else {
			delete(obj, "status")
		}
	}
	if !s.res.Options.NoGeneration && !equalIgnoring(obj, old, "metadata", "status") {
		md["generation"] = meta.GetGeneration(old) + 1
	}
}

// prepareBody is the first step of every create and update: it checks the
// body's kind, apiVersion and namespace, prunes unknown fields (returning the
// field-validation warnings) and applies schema defaults. It returns the
// body's metadata.
func (s *Store) prepareBody(obj Object, ns string, opts WriteOptions) (map[string]any, []string, error) {
	if err := s.checkTypeMeta(obj); err != nil {
		return nil, nil, err
	}
	if _, err := metadataOf(obj); err != nil {
		return nil, nil, err
	}
	if h := s.res.Strategy.CheckBody; h != nil {
		if err := h(obj); err != nil {
			return nil, nil, err
		}
	}
	warnings, err := s.pruneAndDefault(obj, opts)
	if err != nil {
		return nil, nil, err
	}
	md := obj["metadata"].(map[string]any)
	if err := s.checkNamespace(md, ns); err != nil {
		return nil, nil, err
	}
	return md, warnings, nil
}

// checkTypeMeta verifies kind and apiVersion of a request body and fills them
// when absent.
func (s *Store) checkTypeMeta(obj Object) error {
	res := s.res
	kind, kok := obj["kind"].(string)
	av, aok := obj["apiVersion"].(string)
	if (obj["kind"] != nil && !kok) || (obj["apiVersion"] != nil && !aok) {
		return meta.NewBadRequest("kind and apiVersion must be strings")
	}
	if kind == "" {
		obj["kind"] = res.Kind
	} else if kind != res.Kind {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, res.APIVersion()) + kindMismatch(kind, res.Kind))
	}
	if av == "" {
		obj["apiVersion"] = res.APIVersion()
	} else if av != res.APIVersion() {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, res.APIVersion()))
	}
	return nil
}

func kindMismatch(got, want string) string {
	return fmt.Sprintf(" or the kind in the data (%s) does not match the expected kind (%s)", got, want)
}

// metadataOf returns obj.metadata, creating it when absent.
func metadataOf(obj Object) (map[string]any, error) {
	switch md := obj["metadata"].(type) {
	case map[string]any:
		return md, nil
	case nil:
		m := map[string]any{}
		obj["metadata"] = m
		return m, nil
	default:
		return nil, meta.NewBadRequest("metadata must be an object")
	}
}

// checkNamespace makes the body's namespace agree with the URL's.
func (s *Store) checkNamespace(md map[string]any, ns string) error {
	bodyNS, _ := md["namespace"].(string)
	if !s.res.Namespaced {
		if bodyNS != "" {
			delete(md, "namespace") // kube-apiserver clears it on cluster-scoped objects
		}
		return nil
	}
	if bodyNS != "" && bodyNS != ns {
		return meta.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	md["namespace"] = ns
	return nil
}

// pruneAndDefault drops unknown fields (reporting them per fieldValidation)
// and applies schema defaults.
func (s *Store) pruneAndDefault(obj Object, opts WriteOptions) ([]string, error) {
	unknown := schema.Prune(obj, s.res.Schema)
	problems := make([]string, 0, len(unknown)+len(opts.UnknownFields))
	problems = append(problems, opts.UnknownFields...)
	for _, f := range unknown {
		problems = append(problems, fmt.Sprintf("unknown field %q", f))
	}
	var warnings []string
	switch opts.FieldValidation {
	case "Strict":
		if len(problems) > 0 {
			return nil, meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
				s.res.Kind, s.res.Version, s.res.Kind, strings.Join(problems, ", ")))
		}
	case "Ignore":
	default:
		warnings = problems
	}
	if _, err := metadataOf(obj); err != nil {
		return nil, err
	}
	schema.Default(obj, s.res.Schema)
	return warnings, nil
}

// validate runs metadata, schema and strategy validation.
func (s *Store) validate(ctx context.Context, obj, old Object) meta.ErrorList {
	res := s.res
	md := obj["metadata"].(map[string]any)
	nameRule := res.Options.NameValidation
	if nameRule == nil {
		nameRule = meta.IsDNS1123Subdomain
	}
	errs := meta.ValidateObjectMeta(md, res.Namespaced, nameRule, meta.NewPath("metadata"))
	errs = append(errs, schemaValidate(obj, res.Schema)...)
	if old == nil {
		if h := res.Strategy.Validate; h != nil {
			errs = append(errs, h(ctx, obj)...)
		}
	} else if h := res.Strategy.ValidateUpdate; h != nil {
		errs = append(errs, h(ctx, obj, old)...)
	} else if h := res.Strategy.Validate; h != nil {
		errs = append(errs, h(ctx, obj)...)
	}
	return errs
}

// invalid is the answer to an object that fails validation: 422 Invalid,
// or, for a type with Options.TypedDecoding, a 400 for a value of the wrong
// JSON type, as kube-apiserver's decoding into Go structs answers.
func (s *Store) invalid(name string, errs meta.ErrorList) error {
	res := s.res
	if res.Options.TypedDecoding {
		for _, e := range errs {
			if e.Type == meta.CauseTypeTypeInvalid && e.BadValue != "null" {
				return meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s: %s",
					res.Kind, res.Version, res.Kind, e.Field, e.Detail))
			}
		}
	}
	return meta.NewInvalid(res.GroupVersionKind(), name, errs)
}

// schemaValidate validates everything but metadata, which the server
// validates itself.
func schemaValidate(obj Object, sch *schema.Schema) meta.ErrorList {
	md := obj["metadata"]
	delete(obj, "metadata")
	errs := schema.Validate(obj, sch)
	obj["metadata"] = md
	return errs
}

// fitSize checks enc, obj's encoding in *buf, against the object size
// limit. Over it, a write that is no server-side apply is encoded again
// without metadata.managedFields, as kube-apiserver retries a write storage
// refuses as too large: only an object too large even so is a 413.
func (s *Store) fitSize(buf *[]byte, enc []byte, obj Object, opts WriteOptions) ([]byte, error) {
	err := s.checkSize(enc)
	md, _ := obj["metadata"].(map[string]any)
	if _, ok := md["managedFields"]; err == nil || opts.Applied || !ok {
		return enc, err
	}
	delete(md, "managedFields")
	if enc, err = encodeStoredInto(buf, obj); err != nil {
		return nil, meta.NewInternalError(err)
	}
	return enc, s.checkSize(enc)
}

func (s *Store) checkSize(enc []byte) error {
	if max := s.reg.cfg.MaxObjectSize; max > 0 && len(enc) > max {
		return meta.NewRequestEntityTooLarge(fmt.Sprintf("object is larger than the limit of %d bytes", max))
	}
	return nil
}

// shallowCopyWithMeta copies obj and its metadata map so that a retried
// update starts from the request body again.
func shallowCopyWithMeta(obj Object) Object {
	out := make(Object, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		out["metadata"] = m
	}
	return out
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func setRV(obj Object, rev int64) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		md["resourceVersion"] = strconv.FormatInt(rev, 10)
	}
}

// equalIgnoring compares two objects without the given top-level fields.
func equalIgnoring(a, b Object, skip ...string) bool {
	count := func(o Object) int {
		n := 0
		for k := range o {
			if !contains(skip, k) {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, av := range a {
		if contains(skip, k) {
			continue
		}
		bv, ok := b[k]
		if !ok || !meta.DeepEqual(av, bv) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
