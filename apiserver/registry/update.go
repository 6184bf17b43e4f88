package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

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
	key := s.key(ns, name)
	buf := storedBuffers.Get()
	defer storedBuffers.Put(buf, maxPooledStored) // enc and so are not used after the return
	for {
		cur, err := s.storage.Get(ctx, key, 0)
		if errors.Is(err, storage.ErrNotFound) && res.Options.CreateOnUpdate && rvs == "" && opts.Subresource == "" {
			if opts.UID != "" { // no object has that uid
				return nil, uidConflict(gr, name, opts.UID, "")
			}
			r, err := s.Create(ctx, ns, meta.DeepCopyMap(obj), opts) // obj stays the body, should the object appear meanwhile
			if meta.ReasonOf(err) == meta.StatusReasonAlreadyExists {
				continue // created meanwhile: update it
			}
			if r != nil {
				r.Created = true
				// The body was pruned before: its field warnings are the first pass's.
				r.Warnings = append(slices.Clip(warnings), r.Warnings...)
			}
			return r, err
		}
		if err != nil {
			return nil, storageError(err, gr, name)
		}
		r, err := s.replace(ctx, ns, name, obj, cur, expected, rvs == "", opts, warnings, buf)
		if errors.Is(err, errRetry) {
			continue // unconditional update: retry on the newer object
		}
		return r, err
	}
}

// uidConflict is kube-apiserver's answer to an update whose uid
// precondition fails.
func uidConflict(gr meta.GroupResource, name, want, have string) error {
	return meta.NewConflict(gr, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", want, have))
}

// errRetry asks Update to read the object again and retry.
var errRetry = errors.New("retry the update")

// replace writes obj over cur, the object as read (a PUT's second half):
// the preconditions, prepare hooks, admission, field management,
// validation and the compare-and-swap write. An update that changes nothing
// writes nothing. It returns errRetry when an unconditional update lost a
// race.
func (s *Store) replace(ctx context.Context, ns, name string, obj Object, cur storage.KeyValue, expected int64, noRV bool, opts WriteOptions, warnings []string, buf *[]byte) (*Result, error) {
	res := s.res
	gr := res.GroupResource()
	if noRV && !res.Options.UnconditionalUpdate {
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
	if opts.UID != "" && opts.UID != meta.GetUID(old) {
		return nil, uidConflict(gr, name, opts.UID, meta.GetUID(old))
	}
	areq := &AdmissionRequest{Operation: OperationUpdate, Subresource: opts.Subresource, Namespace: ns, Name: name,
		Object: s.updated(ctx, obj, old, opts.Subresource), OldObject: old, DryRun: opts.DryRun}
	next, vwarnings, err := s.admitUpdate(ctx, areq, obj, opts, warnings)
	if err != nil {
		return nil, err
	}
	warnings = append(slices.Clip(warnings), vwarnings...) // a retried attempt must not write into the caller's slice
	enc, err := encodeStoredInto(buf, next)
	if err != nil {
		return nil, meta.NewInternalError(err)
	}
	if enc, err = s.fitSize(buf, enc, next, opts); err != nil {
		return nil, err
	}
	so, _ := parseStored(enc)
	if bytes.Equal(enc, cur.Value) || opts.DryRun {
		// Nothing changed: kube-apiserver answers with the current object
		// and writes nothing; nor does a dry run.
		setRV(next, cur.Revision)
		return &Result{JSON: so.objectJSON(cur.Revision), Object: next, Warnings: warnings}, nil
	}
	key := s.key(ns, name)
	var rev int64
	if s.finished(next) {
		// The last finalizer of an object being deleted is gone: the
		// object goes, and watchers see it deleted.
		_, rev, err = s.storage.Delete(ctx, key, cur.Revision)
	} else {
		rev, err = s.storage.Update(ctx, key, enc, cur.Revision)
	}
	if errors.Is(err, storage.ErrConflict) && expected == 0 {
		return nil, errRetry
	}
	if err != nil {
		return nil, storageError(err, gr, name)
	}
	s.wrote(rev)
	setRV(next, rev)
	return &Result{JSON: so.objectJSON(rev), Object: next, Warnings: warnings}, nil
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
		if fins, _, _ := meta.NestedSlice(obj, "spec", "finalizers"); len(fins) > 0 {
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
// validation and validating admission, and returns the object to write;
// warnings, the request's before validation, go with a validation error.
func (s *Store) admitUpdate(ctx context.Context, areq *AdmissionRequest, obj Object, opts WriteOptions, warnings []string) (Object, []string, error) {
	if err := s.admit(ctx, true, areq); err != nil {
		return nil, nil, err
	}
	next, old := areq.Object, areq.OldObject
	meta.OmitEmpty(next, s.res.Options.OmitEmpty...)
	s.manageFields(old, next, obj, opts)
	errs := checkFinalizersOnUpdate(next, old)
	var vwarnings []string
	if len(errs) == 0 {
		errs, vwarnings = s.validate(ctx, next, old)
	}
	if h := s.res.Strategy.ValidateStatusUpdate; h != nil && opts.Subresource == "status" {
		errs = append(errs, h(ctx, next, old)...)
	}
	if len(errs) > 0 {
		return nil, nil, s.invalid(areq.Name, errs, warnings)
	}
	if err := s.admit(ctx, false, areq); err != nil {
		return nil, nil, err
	}
	return next, vwarnings, nil
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
