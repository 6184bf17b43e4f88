package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// Create stores a new object in namespace ns. obj is the decoded request body;
// the store takes ownership of it.
func (s *Store) Create(ctx context.Context, ns string, obj Object, opts WriteOptions) (*Result, error) {
	if err := s.notVirtual(); err != nil {
		return nil, err
	}
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
	if err := s.creatableIn(ctx, ns, name); err != nil {
		return nil, err
	}
	s.stampNew(obj, md)
	if h := s.res.Strategy.PrepareForCreate; h != nil {
		h(ctx, obj)
	}
	areq := &AdmissionRequest{Operation: OperationCreate, Namespace: ns, Name: name, Object: obj, DryRun: opts.DryRun}
	if err := s.admit(ctx, true, areq); err != nil {
		return nil, err
	}
	obj = areq.Object
	meta.OmitEmpty(obj, s.res.Options.OmitEmpty...)
	s.manageFields(nil, obj, obj, opts)
	errs, vwarnings := s.validate(ctx, obj, nil)
	if len(errs) > 0 {
		return nil, s.invalid(name, errs, warnings)
	}
	warnings = append(warnings, vwarnings...)
	if err := s.admit(ctx, false, areq); err != nil {
		return nil, err
	}
	return s.storeNew(ctx, ns, name, obj, opts, warnings)
}

// creatableIn refuses a create in a namespace that does not exist (404) or
// is being deleted (kube-apiserver's 403).
func (s *Store) creatableIn(ctx context.Context, ns, name string) error {
	if !s.res.Namespaced {
		return nil
	}
	err := s.reg.namespaceExists(ctx, ns)
	if errors.Is(err, errNamespaceTerminating) {
		se := meta.NewForbidden(s.res.GroupResource(), name, fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", ns))
		se.Status.Details.Causes = []meta.StatusCause{{Type: "NamespaceTerminating", Message: fmt.Sprintf("namespace %s is being terminated", ns), Field: "metadata.namespace"}}
		return se
	}
	return err
}

// stampNew sets what the server owns in a new object's metadata (md): uid,
// creationTimestamp, generation; a type with a status subresource starts
// without status.
func (s *Store) stampNew(obj Object, md map[string]any) {
	md["uid"] = s.reg.cfg.NewUID()
	md["creationTimestamp"] = s.reg.stamps.Value(s.reg.cfg.Now())
	delete(md, "deletionTimestamp")
	delete(md, "deletionGracePeriodSeconds")
	if s.res.Options.NoGeneration {
		delete(md, "generation")
	} else {
		md["generation"] = int64(1)
	}
	if s.res.Subresources.Status {
		delete(obj, "status")
	}
}

// storeNew encodes an admitted, valid new object and creates it in
// storage; a dry run only checks that the name is free.
func (s *Store) storeNew(ctx context.Context, ns, name string, obj Object, opts WriteOptions, warnings []string) (*Result, error) {
	gr := s.res.GroupResource()
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
			return nil, s.createError(err, name)
		}
		return &Result{JSON: so.objectJSON(0), Object: obj, Warnings: warnings}, nil
	}
	rev, err := s.storage.Create(ctx, s.key(ns, name), enc)
	if err != nil {
		return nil, s.createError(err, name)
	}
	s.wrote(rev)
	setRV(obj, rev)
	return &Result{JSON: so.objectJSON(rev), Object: obj, Warnings: warnings}, nil
}

// createError is the answer to a failed create: a name too long for the
// storage's keys is an invalid name (422), where a read of it finds nothing.
func (s *Store) createError(err error, name string) error {
	if errors.Is(err, storage.ErrKeyTooLong) {
		return meta.NewInvalid(s.res.GroupVersionKind(), name, meta.ErrorList{
			meta.TooLong(meta.NewPath("metadata", "name"), name, -1), // the storage's limit: its key holds more than the name
		})
	}
	return storageError(err, s.res.GroupResource(), name)
}
