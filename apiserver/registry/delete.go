package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// Finalizers the library itself manages, as Kubernetes names them.
const (
	// FinalizerOrphan makes the garbage collector remove the owner
	// references to the object from its dependents before it goes.
	FinalizerOrphan = "orphan"
	// FinalizerForeground makes the garbage collector delete the object's
	// dependents before it goes.
	FinalizerForeground = "foregroundDeletion"
)

// Propagation policies of a delete.
const (
	PropagationOrphan     = "Orphan"
	PropagationBackground = "Background"
	PropagationForeground = "Foreground"
)

// DeleteOptions are the options of a delete.
type DeleteOptions struct {
	DryRun bool
	// PreconditionUID, when set, must equal the object's uid (409 otherwise).
	PreconditionUID string
	// PreconditionResourceVersion, when set, must equal the object's
	// resourceVersion (409 otherwise).
	PreconditionResourceVersion string
	// PropagationPolicy is Orphan, Background (the default) or Foreground.
	PropagationPolicy string
	// GracePeriodSeconds is accepted and has no effect: kapi's types have no
	// graceful termination of their own, so an object waiting for its
	// finalizers records deletionGracePeriodSeconds 0 whatever it says, as
	// kube-apiserver does for every type but pods (negative values too).
	GracePeriodSeconds *int64
}

// Delete deletes the object ns/name. An object without finalizers is removed
// at once and Result.Pending is false. An object with finalizers (or whose
// propagation policy adds one) gets a deletionTimestamp and stays until its
// last finalizer is removed; Result.Pending is then true and Result.JSON is
// the object as it now is. Deleting an object that is already being deleted
// changes nothing and answers like the first delete.
func (s *Store) Delete(ctx context.Context, ns, name string, opts DeleteOptions) (*Result, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
	gr := s.res.GroupResource()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	st := s.storage
	key := s.key(ns, name)
	for {
		cur, err := st.Get(ctx, key, 0)
		if err != nil {
			return nil, storageError(err, gr, name)
		}
		so, err := parseStored(cur.Value)
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		obj, err := decodeObject(so.objectJSON(cur.Revision))
		if err != nil {
			return nil, meta.NewInternalError(err)
		}
		if err := opts.check(gr, name, obj); err != nil {
			return nil, err
		}
		areq := &AdmissionRequest{Operation: OperationDelete, Namespace: ns, Name: name, OldObject: obj, DryRun: opts.DryRun}
		if err := s.admit(ctx, true, areq); err != nil {
			return nil, err
		}
		if err := s.admit(ctx, false, areq); err != nil {
			return nil, err
		}
		md := obj["metadata"].(map[string]any)
		if _, deleting := md["deletionTimestamp"]; deleting {
			// Already being deleted: a later delete may only ask for the
			// orphan or foreground behaviour it did not ask for before.
			fins, changed := opts.withPolicyFinalizer(meta.GetFinalizers(obj))
			if !changed || opts.DryRun {
				return &Result{JSON: so.objectJSON(cur.Revision), Object: obj, Pending: true}, nil
			}
			meta.SetFinalizers(obj, fins)
			res, err := s.writeBack(ctx, key, obj, cur.Revision)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			return res, err
		}

		fins, _ := opts.withPolicyFinalizer(meta.GetFinalizers(obj))
		pending := len(fins) > 0 || (s.res.Strategy.PendingFinalization != nil && s.res.Strategy.PendingFinalization(obj))
		if !pending {
			if opts.DryRun {
				return &Result{JSON: so.objectJSON(cur.Revision), Object: obj}, nil
			}
			_, rev, err := st.Delete(ctx, key, cur.Revision)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, storageError(err, gr, name)
			}
			s.wrote(rev)
			return &Result{JSON: so.objectJSON(cur.Revision), Object: obj}, nil
		}
		// Graceful: mark the object and let its finalizers run.
		s.markDeleting(ctx, obj, fins)
		if opts.DryRun {
			enc, err := encodeStored(obj)
			if err != nil {
				return nil, meta.NewInternalError(err)
			}
			so, _ := parseStored(enc)
			return &Result{JSON: so.objectJSON(cur.Revision), Object: obj, Pending: true}, nil
		}
		res, err := s.writeBack(ctx, key, obj, cur.Revision)
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		return res, err
	}
}

// validate refuses a propagation policy or grace period kube-apiserver
// refuses (422).
func (opts DeleteOptions) validate() error {
	switch opts.PropagationPolicy {
	case "", PropagationOrphan, PropagationBackground, PropagationForeground:
	default:
		return meta.NewInvalidOptions("DeleteOptions", meta.ErrorList{meta.NotSupported(meta.NewPath("propagationPolicy"), opts.PropagationPolicy,
			[]string{PropagationForeground, PropagationBackground, PropagationOrphan})})
	}
	return nil
}

// withPolicyFinalizer adds the finalizer of the orphan or foreground
// policy to fins, reporting whether it was not there yet.
func (opts DeleteOptions) withPolicyFinalizer(fins []string) ([]string, bool) {
	switch opts.PropagationPolicy {
	case PropagationOrphan:
		return addFinalizer(fins, FinalizerOrphan)
	case PropagationForeground:
		return addFinalizer(fins, FinalizerForeground)
	}
	return fins, false
}

// markDeleting sets what a graceful deletion writes: the finalizers, the
// deletion timestamp and grace period, the next generation, and the type's
// own PrepareForDelete.
func (s *Store) markDeleting(ctx context.Context, obj Object, fins []string) {
	md := obj["metadata"].(map[string]any)
	meta.SetFinalizers(obj, fins)
	md["deletionTimestamp"] = meta.NewTime(s.reg.cfg.Now()).UTC().Format(meta.TimeFormat)
	md["deletionGracePeriodSeconds"] = int64(0)
	if !s.res.Options.NoGeneration {
		md["generation"] = meta.GetGeneration(obj) + 1
	}
	if h := s.res.Strategy.PrepareForDelete; h != nil {
		h(ctx, obj)
	}
}

// writeBack stores obj (read at revision rev) again, for the server's own
// lifecycle changes. A storage conflict is returned as storage.ErrConflict so
// that callers can retry.
func (s *Store) writeBack(ctx context.Context, key []byte, obj Object, rev int64) (*Result, error) {
	enc, err := encodeStored(obj)
	if err != nil {
		return nil, meta.NewInternalError(err)
	}
	newRev, err := s.storage.Update(ctx, key, enc, rev)
	if err != nil {
		if errors.Is(err, storage.ErrConflict) {
			return nil, err
		}
		return nil, storageError(err, s.res.GroupResource(), meta.GetName(obj))
	}
	s.wrote(newRev)
	so, _ := parseStored(enc)
	setRV(obj, newRev)
	return &Result{JSON: so.objectJSON(newRev), Object: obj, Pending: true}, nil
}

func addFinalizer(fins []string, f string) ([]string, bool) {
	for _, x := range fins {
		if x == f {
			return fins, false
		}
	}
	return append(fins, f), true
}

func (o DeleteOptions) check(gr meta.GroupResource, name string, obj Object) error {
	if o.PreconditionUID != "" {
		if uid := meta.GetUID(obj); uid != o.PreconditionUID {
			return meta.NewConflict(gr, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", o.PreconditionUID, uid))
		}
	}
	if o.PreconditionResourceVersion != "" {
		if rv := meta.GetResourceVersion(obj); rv != o.PreconditionResourceVersion {
			return meta.NewConflict(gr, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", o.PreconditionResourceVersion, rv))
		}
	}
	return nil
}

// checkFinalizersOnUpdate refuses finalizers added to an object that is
// being deleted, as Kubernetes does.
func checkFinalizersOnUpdate(obj, old Object) meta.ErrorList {
	omd, _ := old["metadata"].(map[string]any)
	if _, deleting := omd["deletionTimestamp"]; !deleting {
		return nil
	}
	had := map[string]bool{}
	for _, f := range meta.GetFinalizers(old) {
		had[f] = true
	}
	var added []string
	for _, f := range meta.GetFinalizers(obj) {
		if !had[f] {
			added = append(added, strconv.Quote(f))
		}
	}
	if len(added) == 0 {
		return nil
	}
	return meta.ErrorList{meta.Forbidden(meta.NewPath("metadata", "finalizers"),
		fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers []string{%s}", joinComma(added)))}
}

// finished reports whether an object being deleted has nothing left to wait
// for and can be removed from storage.
func (s *Store) finished(obj Object) bool {
	md, _ := obj["metadata"].(map[string]any)
	if _, deleting := md["deletionTimestamp"]; !deleting {
		return false
	}
	if len(meta.GetFinalizers(obj)) > 0 {
		return false
	}
	return s.res.Strategy.PendingFinalization == nil || !s.res.Strategy.PendingFinalization(obj)
}

func joinComma(list []string) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}
