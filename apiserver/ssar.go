package apiserver

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// SelfSubjectAccessReview (authorization.k8s.io/v1, the body of `kubectl
// auth can-i`) is a virtual type the server registers itself, through the
// same mechanism as a host's virtual types: create-only, evaluated by the
// server's authorizer for the requesting user, nothing stored.

// selfSubjectAccessReview is authorization.k8s.io/v1 SelfSubjectAccessReview.
type selfSubjectAccessReview struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		ResourceAttributes    *resourceAttributes    `json:"resourceAttributes,omitempty" doc:"Information for a resource access request." kapi:"definition=io.k8s.api.authorization.v1.ResourceAttributes"`
		NonResourceAttributes *nonResourceAttributes `json:"nonResourceAttributes,omitempty" doc:"Information for a non-resource access request." kapi:"definition=io.k8s.api.authorization.v1.NonResourceAttributes"`
	} `json:"spec" kapi:"required,definition=io.k8s.api.authorization.v1.SelfSubjectAccessReviewSpec" doc:"The attributes being checked."`
	Status struct {
		Allowed         bool   `json:"allowed" doc:"Whether the action is allowed."`
		Denied          bool   `json:"denied,omitempty" doc:"Whether the action is explicitly denied."`
		Reason          string `json:"reason,omitempty" doc:"Why the action is allowed or denied."`
		EvaluationError string `json:"evaluationError,omitempty" doc:"Why the authorizer failed, if it did."`
	} `json:"status,omitempty" kapi:"definition=io.k8s.api.authorization.v1.SubjectAccessReviewStatus" doc:"Filled in by the server: whether the request is allowed."`
}

type resourceAttributes struct {
	Namespace     string         `json:"namespace,omitempty"`
	Verb          string         `json:"verb,omitempty"`
	Group         string         `json:"group,omitempty"`
	Version       string         `json:"version,omitempty"`
	Resource      string         `json:"resource,omitempty"`
	Subresource   string         `json:"subresource,omitempty"`
	Name          string         `json:"name,omitempty"`
	FieldSelector map[string]any `json:"fieldSelector,omitempty"`
	LabelSelector map[string]any `json:"labelSelector,omitempty"`
}

type nonResourceAttributes struct {
	Path string `json:"path,omitempty"`
	Verb string `json:"verb,omitempty"`
}

// ssarMessage is the protobuf message of SelfSubjectAccessReview (kubectl
// auth can-i sends and reads protobuf).
var ssarMessage = func() *codec.Message {
	str := func(name string, n int) codec.Field {
		return codec.Field{Name: name, Number: protowire.Number(n), Kind: codec.String}
	}
	requirement := codec.MustMessage("SelectorRequirement", str("key", 1), str("operator", 2),
		codec.Field{Name: "values", Number: 3, Kind: codec.String, Repeated: true})
	selector := codec.MustMessage("SelectorAttributes", str("rawSelector", 1),
		codec.Field{Name: "requirements", Number: 2, Kind: codec.MessageKind, Message: requirement, Repeated: true})
	ra := codec.MustMessage("ResourceAttributes", str("namespace", 1), str("verb", 2), str("group", 3), str("version", 4),
		str("resource", 5), str("subresource", 6), str("name", 7),
		codec.Field{Name: "fieldSelector", Number: 8, Kind: codec.MessageKind, Message: selector},
		codec.Field{Name: "labelSelector", Number: 9, Kind: codec.MessageKind, Message: selector})
	nra := codec.MustMessage("NonResourceAttributes", str("path", 1), str("verb", 2))
	spec := codec.MustMessage("SelfSubjectAccessReviewSpec",
		codec.Field{Name: "resourceAttributes", Number: 1, Kind: codec.MessageKind, Message: ra},
		codec.Field{Name: "nonResourceAttributes", Number: 2, Kind: codec.MessageKind, Message: nra})
	status := codec.MustMessage("SubjectAccessReviewStatus",
		codec.Field{Name: "allowed", Number: 1, Kind: codec.Bool, Keep: true}, str("reason", 2), str("evaluationError", 3),
		codec.Field{Name: "denied", Number: 4, Kind: codec.Bool})
	return codec.MustMessage("SelfSubjectAccessReview",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "spec", Number: 2, Kind: codec.MessageKind, Message: spec},
		codec.Field{Name: "status", Number: 3, Kind: codec.MessageKind, Message: status})
}()

// selfSubjectAccessReviews is the registration of selfsubjectaccessreviews.
func (s *Server) selfSubjectAccessReviews() (registry.Resource, error) {
	return registry.ForType[selfSubjectAccessReview](registry.Resource{
		Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview",
		Protobuf: ssarMessage,
		Strategy: registry.Strategy{Validate: validateSSAR},
		Virtual:  &registry.Virtual{Create: s.reviewSelfAccess},
	})
}

func validateSSAR(_ context.Context, obj registry.Object) meta.ErrorList {
	spec, _ := obj["spec"].(map[string]any)
	_, ra := spec["resourceAttributes"].(map[string]any)
	_, nra := spec["nonResourceAttributes"].(map[string]any)
	if ra == nra {
		return meta.ErrorList{meta.Invalid(meta.NewPath("spec"), "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

// reviewSelfAccess answers "may I?" for the requesting user from the
// server's own authorizer.
func (s *Server) reviewSelfAccess(ctx context.Context, req *registry.Request, obj registry.Object) (registry.Object, error) {
	var review selfSubjectAccessReview
	if err := convertObject(obj, &review); err != nil {
		return nil, meta.NewBadRequest("error decoding SelfSubjectAccessReview: " + err.Error())
	}
	var a auth.Attributes
	if ra := review.Spec.ResourceAttributes; ra != nil {
		a = auth.Attributes{ResourceRequest: true, Verb: ra.Verb, APIGroup: ra.Group, APIVersion: ra.Version, Resource: ra.Resource,
			Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
	} else {
		a = auth.Attributes{Verb: review.Spec.NonResourceAttributes.Verb, Path: review.Spec.NonResourceAttributes.Path}
	}
	a.User = req.User
	d, reason, err := s.authorizer.Authorize(ctx, a)
	review.Status.Allowed = d == auth.Allow && err == nil
	review.Status.Denied = d == auth.Deny
	review.Status.Reason = reason
	review.Status.EvaluationError = ""
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	return toObject(review)
}

// toObject converts a typed review into the generic object a Create answers.
func toObject(v any) (registry.Object, error) {
	var out registry.Object
	if err := convertObject(v, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func convertObject(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	return nil
}
