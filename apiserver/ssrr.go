package apiserver

import (
	"context"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// SelfSubjectRulesReview (authorization.k8s.io/v1, the body of `kubectl
// auth can-i --list`) is a virtual type the server registers itself:
// create-only, it lists the rules the server's authorizer applies to the
// requesting user in a namespace, when the authorizer is an
// auth.RulesLister.

// selfSubjectRulesReview is authorization.k8s.io/v1 SelfSubjectRulesReview.
type selfSubjectRulesReview struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          struct {
		Namespace string `json:"namespace,omitempty" doc:"The namespace to evaluate rules for."`
	} `json:"spec" kapi:"required" doc:"The namespace to evaluate rules for."`
	Status struct {
		ResourceRules    []resourceRule    `json:"resourceRules" doc:"The verbs the user may perform on resources in the namespace."`
		NonResourceRules []nonResourceRule `json:"nonResourceRules" doc:"The verbs the user may perform on non-resource paths."`
		Incomplete       bool              `json:"incomplete" doc:"Whether the rules may be incomplete: the authorizer could not list them all."`
		EvaluationError  string            `json:"evaluationError,omitempty" doc:"Why the rules could not all be listed, if they could not."`
	} `json:"status,omitempty" doc:"Filled in by the server: the user's rules."`
}

type resourceRule struct {
	Verbs         []string `json:"verbs"`
	APIGroups     []string `json:"apiGroups,omitempty"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

type nonResourceRule struct {
	Verbs           []string `json:"verbs"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// ssrrMessage is the protobuf message of SelfSubjectRulesReview.
var ssrrMessage = func() *codec.Message {
	strs := func(name string, n int) codec.Field {
		return codec.Field{Name: name, Number: protowire.Number(n), Kind: codec.String, Repeated: true}
	}
	rr := codec.MustMessage("ResourceRule", strs("verbs", 1), strs("apiGroups", 2), strs("resources", 3), strs("resourceNames", 4))
	nrr := codec.MustMessage("NonResourceRule", strs("verbs", 1), strs("nonResourceURLs", 2))
	spec := codec.MustMessage("SelfSubjectRulesReviewSpec", codec.Field{Name: "namespace", Number: 1, Kind: codec.String})
	status := codec.MustMessage("SubjectRulesReviewStatus",
		codec.Field{Name: "resourceRules", Number: 1, Kind: codec.MessageKind, Message: rr, Repeated: true},
		codec.Field{Name: "nonResourceRules", Number: 2, Kind: codec.MessageKind, Message: nrr, Repeated: true},
		codec.Field{Name: "incomplete", Number: 3, Kind: codec.Bool, Keep: true},
		codec.Field{Name: "evaluationError", Number: 4, Kind: codec.String})
	return codec.MustMessage("SelfSubjectRulesReview",
		codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
		codec.Field{Name: "spec", Number: 2, Kind: codec.MessageKind, Message: spec},
		codec.Field{Name: "status", Number: 3, Kind: codec.MessageKind, Message: status})
}()

// selfSubjectRulesReviews is the registration of selfsubjectrulesreviews.
func (s *Server) selfSubjectRulesReviews() (registry.Resource, error) {
	return registry.ForType[selfSubjectRulesReview](registry.Resource{
		Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews", Kind: "SelfSubjectRulesReview",
		Protobuf: ssrrMessage,
		Virtual:  &registry.Virtual{Create: s.reviewSelfRules},
	})
}

// reviewSelfRules answers "what may I do in this namespace?" from the
// server's authorizer. As kube-apiserver, the answer carries the status
// only (an empty spec).
func (s *Server) reviewSelfRules(ctx context.Context, req *registry.Request, obj registry.Object) (registry.Object, error) {
	var in selfSubjectRulesReview
	if err := convertObject(obj, &in); err != nil {
		return nil, meta.NewBadRequest("error decoding SelfSubjectRulesReview: " + err.Error())
	}
	rules, incomplete, err := auth.ListRules(ctx, s.authorizer, req.User, in.Spec.Namespace)
	var review selfSubjectRulesReview
	st := &review.Status
	st.ResourceRules, st.NonResourceRules = []resourceRule{}, []nonResourceRule{}
	for _, r := range append(rules, publicRule()) {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, nonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		} else if len(r.Resources) > 0 {
			st.ResourceRules = append(st.ResourceRules, resourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
	}
	st.Incomplete = incomplete || err != nil
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return toObject(review)
}
