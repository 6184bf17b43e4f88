package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage"
)

// Extensions: virtual resource types (Resource.Virtual), whose verbs are
// host functions instead of storage, and custom subresources of stored types
// (Subresources.Custom), whose verbs are host functions that act on the
// parent object through its Store. Both take the same path as stored types:
// authentication, authorization (as resource/subresource), request bodies
// checked against the kind, pruned, defaulted and validated against the
// schema (fieldValidation Strict/Warn/Ignore), admission, dry run.

// Request is what a host function knows about the request it serves.
type Request struct {
	// Verb is the Kubernetes verb: create (POST), update (PUT), get or list
	// (GET).
	Verb string
	// Resource is the virtual type, or the parent type of a subresource.
	Resource meta.GroupVersionResource
	// Subresource is the subresource's name ("" for a virtual type).
	Subresource string
	// Namespace and Name are those of the URL ("" where it has none).
	Namespace string
	Name      string
	// User is the authenticated user (nil for in-process callers).
	User *auth.User
	// DryRun is set for ?dryRun=All: the function must change nothing
	// (admission and validation have already run).
	DryRun bool
	// Query holds the request's query parameters (e.g. follow=true). Do not
	// modify it.
	Query url.Values
	// Parent is the object a subresource request is about, as read when the
	// request arrived (nil for virtual types). Do not modify it: change the
	// object through Store.
	Parent Object
	// Store is the parent type's store for a subresource (act on the parent
	// through it, so that watchers see the change), the virtual type's own
	// store otherwise (which stores nothing).
	Store *Store
}

// ObjectFunc serves a request with a body: obj is the request body after
// the kind check, pruning, defaults, validation and admission. It returns
// the response: an object (kind and apiVersion default to the request's
// kind) or a meta/v1 Status (e.g. from meta.Status). An error that is a
// *meta.StatusError is answered as it is; any other error, or a panic, is a
// 500 Status.
type ObjectFunc func(ctx context.Context, req *Request, obj Object) (Object, error)

// ReadFunc computes the object a read answers with.
type ReadFunc func(ctx context.Context, req *Request) (Object, error)

// ListFunc computes the items of a list of a virtual type.
type ListFunc func(ctx context.Context, req *Request) ([]Object, error)

// StreamFunc writes a response body as it is produced (a log, a follow
// stream). Each Write reaches the client at once. An error returned before
// the first Write is answered as a Status; after it, the stream just ends.
// It must return when ctx ends (the client went away).
type StreamFunc func(ctx context.Context, req *Request, w io.Writer) error

// Virtual holds the verbs of a virtual type. At least one must be set.
// Nothing is stored: objects have no resourceVersion and the type has no
// watch. Discovery lists exactly the verbs set.
type Virtual struct {
	// Create serves POST to the collection (verb create, answered 201):
	// evaluate the object and return it, typically with its status filled
	// in (as SelfSubjectAccessReview).
	Create ObjectFunc
	// Get serves GET of a named object (verb get).
	Get ReadFunc
	// List serves GET of the collection (verb list); the items are answered
	// as the type's ListKind.
	List ListFunc
}

// Verbs returns the verbs the virtual type serves, sorted.
func (v *Virtual) Verbs() []string {
	var verbs []string
	if v.Create != nil {
		verbs = append(verbs, "create")
	}
	if v.Get != nil {
		verbs = append(verbs, "get")
	}
	if v.List != nil {
		verbs = append(verbs, "list")
	}
	return verbs
}

// Subresource is a host-implemented subresource of a stored type. Each verb
// is optional; a method without a handler is answered 405.
type Subresource struct {
	// Kind is the kind of the request body (and what discovery lists as
	// the subresource's kind). Default: the parent's kind.
	Kind meta.GroupVersionKind
	// Schema, when set, is the structural schema of the request body: it is
	// pruned (fieldValidation), defaulted and validated like an object of a
	// stored type. Without it the body is checked for its kind only.
	Schema *schema.Schema
	// Create serves POST (verb create; 201 unless the function returns a
	// Status with another code): an action on the parent, like eviction or
	// binding. An empty body is an empty object of Kind.
	Create ObjectFunc
	// Update serves PUT (verb update; 200).
	Update ObjectFunc
	// Get serves GET with a computed object (verb get; 200): a read-only
	// view of the parent.
	Get ReadFunc
	// Stream serves GET with a byte stream (verb get), like pods/log; set
	// Get or Stream, not both.
	Stream StreamFunc
	// ContentType is the media type of Stream's output. Default
	// "text/plain; charset=utf-8".
	ContentType string
}

// Verbs returns the verbs the subresource serves, sorted.
func (sr *Subresource) Verbs() []string {
	var verbs []string
	if sr.Create != nil {
		verbs = append(verbs, "create")
	}
	if sr.Get != nil || sr.Stream != nil {
		verbs = append(verbs, "get")
	}
	if sr.Update != nil {
		verbs = append(verbs, "update")
	}
	return verbs
}

// StreamContentType returns the media type of Stream's output.
func (sr *Subresource) StreamContentType() string {
	if sr.ContentType == "" {
		return "text/plain; charset=utf-8"
	}
	return sr.ContentType
}

// CustomNames returns the names of the custom subresources, sorted.
func (s Subresources) CustomNames() []string {
	names := make([]string, 0, len(s.Custom))
	for n := range s.Custom {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// completeExtensions checks Virtual and Subresources.Custom and fills the
// subresources' default kinds.
func (r *Resource) completeExtensions() error {
	if v := r.Virtual; v != nil {
		if v.Create == nil && v.Get == nil && v.List == nil {
			return fmt.Errorf("registry: virtual type %s serves no verb", r.GroupResource())
		}
		if r.Subresources.Status || r.Subresources.Scale != nil || len(r.Subresources.Custom) > 0 {
			return fmt.Errorf("registry: virtual type %s cannot have subresources", r.GroupResource())
		}
	}
	if len(r.Subresources.Custom) == 0 {
		return nil
	}
	custom := make(map[string]Subresource, len(r.Subresources.Custom))
	for name, sr := range r.Subresources.Custom {
		switch {
		case !dnsLabelRE.MatchString(name):
			return fmt.Errorf("registry: %s: invalid subresource name %q", r.GroupResource(), name)
		case name == "status" || name == "scale" || name == "finalize":
			return fmt.Errorf("registry: %s: subresource name %q is reserved", r.GroupResource(), name)
		case sr.Create == nil && sr.Update == nil && sr.Get == nil && sr.Stream == nil:
			return fmt.Errorf("registry: %s/%s serves no verb", r.GroupResource(), name)
		case sr.Get != nil && sr.Stream != nil:
			return fmt.Errorf("registry: %s/%s: set Get or Stream, not both", r.GroupResource(), name)
		}
		if sr.Kind.Kind == "" {
			sr.Kind = r.GroupVersionKind()
		} else if !kindRE.MatchString(sr.Kind.Kind) || !versionRE.MatchString(sr.Kind.Version) {
			return fmt.Errorf("registry: %s/%s: invalid kind %s", r.GroupResource(), name, sr.Kind)
		}
		custom[name] = sr
	}
	r.Subresources.Custom = custom // a copy: the caller's map stays as it was
	return nil
}

// Invoke serves one request on a virtual type (req.Subresource empty) or
// on a custom subresource with an object response: create, update, get, or
// list for virtual types. body is the decoded request body of create and
// update (nil means an empty object). It returns the response object and
// the field-validation warnings. A verb without a handler is 405, an
// unknown subresource 404, a missing parent 404; a panicking handler is a
// 500.
func (s *Store) Invoke(ctx context.Context, req *Request, body Object, opts WriteOptions) (Object, []string, error) {
	req.Store, req.Resource, req.DryRun = s, s.res.GroupVersionResource(), opts.DryRun
	if req.User == nil {
		req.User, _ = auth.UserFrom(ctx)
	}
	if req.Subresource == "" {
		return s.invokeVirtual(ctx, req, body, opts)
	}
	sr, ok := s.res.Subresources.Custom[req.Subresource]
	if !ok {
		return nil, nil, meta.NewNotFoundPath()
	}
	var (
		fn     ObjectFunc
		method string
	)
	switch req.Verb {
	case "create":
		fn, method = sr.Create, "POST"
	case "update":
		fn, method = sr.Update, "PUT"
	case "get":
		if sr.Get == nil {
			return nil, nil, meta.NewMethodNotAllowed("GET", "")
		}
	default:
		return nil, nil, meta.NewMethodNotAllowed(strings.ToUpper(req.Verb), "")
	}
	if req.Verb != "get" && fn == nil {
		return nil, nil, meta.NewMethodNotAllowed(method, "")
	}
	parent, err := s.GetObject(ctx, req.Namespace, req.Name)
	if err != nil {
		return nil, nil, err
	}
	req.Parent = parent
	if req.Verb == "get" {
		out, err := s.call(req, func() (Object, error) { return sr.Get(ctx, req) })
		return s.completeResponse(out, sr.Kind), nil, err
	}
	if body == nil {
		body = Object{}
	}
	op := OperationCreate
	if req.Verb == "update" {
		op = OperationUpdate
	}
	warnings, err := s.admitBody(ctx, req, body, sr.Kind, sr.Schema, op, opts)
	if err != nil {
		return nil, nil, err
	}
	out, err := s.call(req, func() (Object, error) { return fn(ctx, req, body) })
	return s.completeResponse(out, sr.Kind), warnings, err
}

func (s *Store) invokeVirtual(ctx context.Context, req *Request, body Object, opts WriteOptions) (Object, []string, error) {
	v := s.res.Virtual
	if v == nil {
		return nil, nil, meta.NewNotFoundPath()
	}
	kind := s.res.GroupVersionKind()
	switch {
	case req.Verb == "create" && v.Create != nil:
		if body == nil {
			body = Object{}
		}
		warnings, err := s.admitBody(ctx, req, body, kind, s.res.Schema, OperationCreate, opts)
		if err != nil {
			return nil, nil, err
		}
		out, err := s.call(req, func() (Object, error) { return v.Create(ctx, req, body) })
		return s.completeResponse(out, kind), warnings, err
	case req.Verb == "get" && v.Get != nil:
		out, err := s.call(req, func() (Object, error) { return v.Get(ctx, req) })
		return s.completeResponse(out, kind), nil, err
	case req.Verb == "list" && v.List != nil:
		var items []Object
		_, err := s.call(req, func() (Object, error) {
			var err error
			items, err = v.List(ctx, req)
			return nil, err
		})
		if err != nil {
			return nil, nil, err
		}
		list := make([]any, 0, len(items))
		for _, it := range items {
			list = append(list, s.completeResponse(it, kind))
		}
		return Object{"kind": s.res.ListKind, "apiVersion": s.res.APIVersion(), "metadata": map[string]any{}, "items": list}, nil, nil
	}
	return nil, nil, meta.NewMethodNotAllowed(strings.ToUpper(req.Verb), "")
}

// Stream serves a streaming subresource: it checks that the parent exists
// and calls the subresource's Stream function. Errors before the first
// Write are Status errors; a panic is a 500 (or ends the stream).
func (s *Store) Stream(ctx context.Context, req *Request, w io.Writer) error {
	req.Store, req.Resource = s, s.res.GroupVersionResource()
	if req.User == nil {
		req.User, _ = auth.UserFrom(ctx)
	}
	sr, ok := s.res.Subresources.Custom[req.Subresource]
	if !ok {
		return meta.NewNotFoundPath()
	}
	if sr.Stream == nil {
		return meta.NewMethodNotAllowed("GET", "")
	}
	parent, err := s.GetObject(ctx, req.Namespace, req.Name)
	if err != nil {
		return err
	}
	req.Parent = parent
	_, err = s.call(req, func() (Object, error) { return nil, sr.Stream(ctx, req, w) })
	return err
}

// notVirtual refuses the generic storage verbs (Create, Update, Delete,
// List, Watch) on a virtual type, whose verbs are its host functions: 405,
// and nothing is read or written under its storage prefix.
func (s *Store) notVirtual() error {
	if s.res.Virtual != nil {
		return meta.NewMethodNotAllowed("", "")
	}
	return nil
}

// call runs a host function, turning a panic into a 500 Status error.
func (s *Store) call(req *Request, fn func() (Object, error)) (out Object, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.reg.cfg.Logger.Error("panic in a host function", "resource", s.res.GroupResource().String(),
				"subresource", req.Subresource, "verb", req.Verb, "panic", v, "stack", string(debug.Stack()))
			out, err = nil, meta.NewInternalError(fmt.Errorf("the handler of %s failed: %v", s.describe(req), v))
		}
	}()
	out, err = fn()
	if err != nil {
		if _, ok := meta.AsStatusError(err); !ok {
			s.reg.cfg.Logger.Error("host function failed", "resource", s.res.GroupResource().String(),
				"subresource", req.Subresource, "verb", req.Verb, "err", err)
			return nil, meta.NewInternalError(fmt.Errorf("%s: %w", s.describe(req), err))
		}
	}
	return out, err
}

func (s *Store) describe(req *Request) string {
	what := s.res.GroupResource().String()
	if req.Subresource != "" {
		what += "/" + req.Subresource
	}
	return req.Verb + " " + what
}

// completeResponse fills kind and apiVersion of a response object.
func (s *Store) completeResponse(out Object, kind meta.GroupVersionKind) Object {
	if out == nil {
		return nil
	}
	if k, _ := out["kind"].(string); k == "" {
		out["kind"] = kind.Kind
	}
	if av, _ := out["apiVersion"].(string); av == "" {
		if out["kind"] == "Status" {
			out["apiVersion"] = "v1" // meta/v1 Status, whatever the subresource's group
		} else {
			out["apiVersion"] = meta.GroupVersion{Group: kind.Group, Version: kind.Version}.String()
		}
	}
	return out
}

// admitBody runs a request body through the write pipeline: kind check,
// namespace and name check, pruning (reported per fieldValidation), schema
// defaults, mutating admission, schema and strategy validation, validating
// admission. obj is changed in place.
func (s *Store) admitBody(ctx context.Context, req *Request, obj Object, kind meta.GroupVersionKind, sch *schema.Schema, op Operation, opts WriteOptions) ([]string, error) {
	apiVersion := meta.GroupVersion{Group: kind.Group, Version: kind.Version}.String()
	k, kok := obj["kind"].(string)
	av, aok := obj["apiVersion"].(string)
	if (obj["kind"] != nil && !kok) || (obj["apiVersion"] != nil && !aok) {
		return nil, meta.NewBadRequest("kind and apiVersion must be strings")
	}
	if (k != "" && k != kind.Kind) || (av != "" && av != apiVersion) {
		if k == "" {
			k = kind.Kind
		}
		return nil, meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the body must be a %s of %s", k, av, kind.Kind, kind.Kind, apiVersion))
	}
	obj["kind"], obj["apiVersion"] = kind.Kind, apiVersion
	md, err := metadataOf(obj)
	if err != nil {
		return nil, err
	}
	if ns, _ := md["namespace"].(string); ns != "" && ns != req.Namespace {
		return nil, meta.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if name, _ := md["name"].(string); req.Subresource != "" && name != "" && name != req.Name {
		return nil, meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, req.Name))
	}
	problems := append([]string{}, opts.UnknownFields...)
	if sch != nil {
		for _, f := range schema.Prune(obj, sch) {
			problems = append(problems, fmt.Sprintf("unknown field %q", f))
		}
	}
	warnings, err := fieldProblems(kind, opts.FieldValidation, problems)
	if err != nil {
		return nil, err
	}
	if _, err := metadataOf(obj); err != nil {
		return nil, err
	}
	if sch != nil {
		schema.Default(obj, sch)
	}
	areq := &AdmissionRequest{Operation: op, Kind: kind, Subresource: req.Subresource, Namespace: req.Namespace, Name: req.Name,
		Object: obj, OldObject: req.Parent, DryRun: opts.DryRun}
	if err := s.admit(ctx, true, areq); err != nil {
		return nil, err
	}
	var errs meta.ErrorList
	if sch != nil {
		errs = schemaValidate(obj, nil, sch)
	}
	if h := s.res.Strategy.Validate; h != nil && req.Subresource == "" {
		errs = append(errs, h(ctx, obj)...)
	}
	if len(errs) > 0 {
		return nil, meta.NewInvalid(kind, req.Name, errs)
	}
	if err := s.admit(ctx, false, areq); err != nil {
		return nil, err
	}
	return warnings, nil
}

// ObjectEvent is one change of a watched object.
type ObjectEvent struct {
	// Type is MODIFIED, DELETED, or ADDED when the object is created again.
	Type string
	// Object is the object after the change (before it, for DELETED), with
	// its resourceVersion.
	Object Object
}

// WatchObject streams the changes of the object ns/name after
// resourceVersion ("" or "0": after now). The channel closes when ctx ends,
// after the object's DELETED event, or when the storage watch ends.
func (s *Store) WatchObject(ctx context.Context, ns, name, resourceVersion string) (<-chan ObjectEvent, error) {
	var from int64
	if resourceVersion != "" && resourceVersion != "0" {
		var err error
		if from, err = parseRV(resourceVersion); err != nil {
			return nil, err
		}
	}
	key := s.key(ns, name)
	// The storage watch lives as long as the goroutine below: it ends with
	// ctx, and also when the goroutine returns (after DELETED or an error).
	ctx, cancel := context.WithCancel(ctx)
	events, err := s.storage.Watch(ctx, storage.WatchOptions{Prefix: key, FromRevision: from})
	if err != nil {
		cancel()
		return nil, storageError(err, s.res.GroupResource(), name)
	}
	out := make(chan ObjectEvent)
	go func() {
		defer close(out)
		defer cancel()
		for ev := range events {
			var oe ObjectEvent
			var err error
			switch {
			case ev.Type == storage.EventError:
				if !errors.Is(ev.Err, context.Canceled) {
					s.reg.cfg.Logger.Debug("object watch ended", "resource", s.res.GroupResource().String(), "name", name, "err", ev.Err)
				}
				return
			case !bytes.Equal(ev.Key, key):
				continue
			case ev.Type == storage.EventPut:
				oe.Type = "MODIFIED"
				if ev.IsCreate() {
					oe.Type = "ADDED"
				}
				oe.Object, err = decodeStored(ev.Value, ev.Revision)
			case ev.Type == storage.EventDelete:
				oe.Type = "DELETED"
				oe.Object, err = decodeStored(ev.PrevValue, ev.Revision)
			default:
				continue
			}
			if err != nil {
				s.reg.cfg.Logger.Error("object watch: undecodable object", "resource", s.res.GroupResource().String(), "name", name, "err", err)
				return
			}
			select {
			case out <- oe:
			case <-ctx.Done():
				return
			}
			if oe.Type == "DELETED" {
				return
			}
		}
	}()
	return out, nil
}
