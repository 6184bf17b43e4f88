package apiserver

import (
	"context"
	"slices"

	"github.com/kapi-dev/kapi/apiserver/auth"
)

// basicUserRules are what Kubernetes' system:basic-user role (bound to
// system:authenticated) grants: asking who one is and what one may do.
var basicUserRules = []auth.Rule{
	{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
	{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
}

// basicUser allows the basicUserRules to members of system:authenticated.
// It only allows: it never denies, so for anyone else (system:anonymous)
// the next authorizer decides.
type basicUser struct{}

func (basicUser) Authorize(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
	if a.User == nil || !a.User.InGroup(auth.GroupAuthenticated) || !a.ResourceRequest || a.Subresource != "" {
		return auth.NoOpinion, "", nil
	}
	for _, r := range basicUserRules {
		if slices.Contains(r.Verbs, a.Verb) && slices.Contains(r.APIGroups, a.APIGroup) && slices.Contains(r.Resources, a.Resource) {
			return auth.Allow, "", nil
		}
	}
	return auth.NoOpinion, "", nil
}

// RulesFor lists the basic rules for authenticated users.
func (basicUser) RulesFor(_ context.Context, u *auth.User, _ string) ([]auth.Rule, bool, error) {
	if u == nil || !u.InGroup(auth.GroupAuthenticated) {
		return nil, false, nil
	}
	return slices.Clone(basicUserRules), false, nil
}

// withBasicUser puts the basic-user rule in front of a: every
// authenticated user may ask about themselves, whatever a says.
func withBasicUser(a auth.Authorizer) auth.Authorizer {
	return auth.Chain(basicUser{}, a)
}
