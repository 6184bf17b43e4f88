package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
)

// Operation is what an admission hook is asked about.
type Operation string

// Admission operations, as Kubernetes names them.
const (
	OperationCreate  Operation = "CREATE"
	OperationUpdate  Operation = "UPDATE"
	OperationDelete  Operation = "DELETE"
	OperationConnect Operation = "CONNECT"
)

// SideEffects declares what a hook does besides answering, as an admission
// webhook's sideEffects field.
type SideEffects int

// Side-effect classes.
const (
	// SideEffectsUnknown (the zero value) is treated like SideEffectsSome.
	SideEffectsUnknown SideEffects = iota
	// SideEffectsNone: the hook only looks at the request.
	SideEffectsNone
	// SideEffectsNoneOnDryRun: the hook has side effects but skips them when
	// AdmissionRequest.DryRun is set.
	SideEffectsNoneOnDryRun
	// SideEffectsSome: the hook has side effects even for dry runs; dry-run
	// requests that would reach it fail.
	SideEffectsSome
)

// AdmissionRequest is what a hook sees.
type AdmissionRequest struct {
	Operation   Operation
	Resource    meta.GroupVersionResource
	Kind        meta.GroupVersionKind
	Subresource string
	Namespace   string
	Name        string
	// Object is the object as it would be stored (nil for deletes); mutating
	// hooks may change it.
	Object Object
	// OldObject is the stored object (nil for creates).
	OldObject Object
	DryRun    bool
	// User is the requesting user (nil for the server's own controllers).
	User *auth.User
}

// AdmissionHook is one admission plugin. Mutating hooks run first, in order,
// then validating hooks, in order; global hooks (Config.Admission) before the
// type's own. A hook returning an error refuses the request: a
// *meta.StatusError is answered as it is, any other error as 403 Forbidden.
type AdmissionHook struct {
	Name string
	// Operations the hook applies to; empty means all.
	Operations []Operation
	// Resources limits the hook to these types, each named by its resource
	// ("widgets") or resource and group ("widgets.example.dev"); "*" is
	// every type. Empty means every type the hook is registered for (all
	// types for Config.Admission), except the server's own reviews
	// (selfsubjectaccessreviews, selfsubjectrulesreviews, selfsubjectreviews):
	// a hook sees those only when it names them ("selfsubjectaccessreviews"
	// or "selfsubjectaccessreviews.authorization.k8s.io").
	Resources []string
	// Subresources selects the requests the hook sees by subresource, as the
	// rules of a Kubernetes admission webhook do ("widgets" vs
	// "widgets/status" or "widgets/*"): "" is the main resource (creates,
	// updates and deletes of the objects themselves, and the requests of
	// virtual types), a name such as "status", "scale" or a custom
	// subresource's selects that subresource, and "*" selects the main
	// resource and every subresource. Empty means the main resource only.
	Subresources []string
	// Mutate, when set, may change req.Object (creates and updates).
	Mutate func(ctx context.Context, req *AdmissionRequest) error
	// Validate, when set, checks the request after mutation and validation.
	Validate    func(ctx context.Context, req *AdmissionRequest) error
	SideEffects SideEffects
}

func (h *AdmissionHook) applies(op Operation) bool {
	if len(h.Operations) == 0 {
		return true
	}
	for _, o := range h.Operations {
		if o == op {
			return true
		}
	}
	return false
}

// selects reports whether the hook is for requests on res (and subresource
// sub, "" for the main resource).
func (h *AdmissionHook) selects(res *Resource, sub string) bool {
	gr := res.GroupResource()
	named := func(n string) bool { return n == gr.Resource || n == gr.String() }
	switch {
	case len(h.Resources) == 0:
		if serverReview(res) {
			return false
		}
	case !slices.ContainsFunc(h.Resources, func(n string) bool { return named(n) || (n == "*" && !serverReview(res)) }):
		return false
	}
	if len(h.Subresources) == 0 {
		return sub == ""
	}
	return slices.Contains(h.Subresources, sub) || slices.Contains(h.Subresources, "*")
}

// serverReview reports whether res is one of the server's own review types
// (selfsubjectaccessreviews, selfsubjectrulesreviews, selfsubjectreviews),
// which hooks see only when they name them.
func serverReview(res *Resource) bool {
	if res.Virtual == nil {
		return false
	}
	switch res.Group + "/" + res.Resource {
	case "authorization.k8s.io/selfsubjectaccessreviews", "authorization.k8s.io/selfsubjectrulesreviews",
		"authentication.k8s.io/selfsubjectreviews":
		return true
	}
	return false
}

// admit runs the mutating (mutate true) or validating hooks for a request.
func (s *Store) admit(ctx context.Context, mutate bool, req *AdmissionRequest) error {
	hooks := append(append([]AdmissionHook{}, s.reg.cfg.Admission...), s.res.Admission...)
	if len(hooks) == 0 {
		return nil
	}
	req.Resource = meta.GroupVersionResource{Group: s.res.Group, Version: s.res.Version, Resource: s.res.Resource}
	if req.Kind.Kind == "" {
		req.Kind = s.res.GroupVersionKind() // a custom subresource sets its own
	}
	req.User, _ = auth.UserFrom(ctx)
	for i := range hooks {
		h := &hooks[i]
		fn := h.Validate
		if mutate {
			fn = h.Mutate
		}
		if fn == nil || !h.applies(req.Operation) || !h.selects(s.res, req.Subresource) {
			continue
		}
		if req.DryRun && (h.SideEffects == SideEffectsUnknown || h.SideEffects == SideEffectsSome) {
			return meta.NewBadRequest(fmt.Sprintf("admission hook %q has side effects and does not support dry run", h.Name))
		}
		if err := fn(ctx, req); err != nil {
			if _, ok := meta.AsStatusError(err); ok {
				return err
			}
			return meta.NewForbidden(s.res.GroupResource(), req.Name, fmt.Sprintf("admission hook %q denied the request: %v", h.Name, err))
		}
	}
	return nil
}
