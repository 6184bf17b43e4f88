package auth

import (
	"context"
	"errors"
)

// RulesLister is implemented by authorizers that can say what they allow a
// user, which SelfSubjectRulesReview (`kubectl auth can-i --list`) reports.
//
// RulesFor returns the rules under which the authorizer allows u's requests
// in namespace: the cluster-wide ones and, when namespace is not "", those
// that hold in that namespace. A rule with NonResourceURLs is a non-resource
// rule; any other grants Resources. incomplete reports that the authorizer
// may allow more than the rules say (part of it cannot list its rules). On
// error, the rules are those found before it and incomplete is true.
type RulesLister interface {
	RulesFor(ctx context.Context, u *User, namespace string) (rules []Rule, incomplete bool, err error)
}

// ErrRulesNotListed is the evaluation error of an authorizer that does not
// implement RulesLister: its rules are unknown.
var ErrRulesNotListed = errors.New("the authorizer cannot list the rules it allows")

// ListRules returns a's rules for u in namespace when a is a RulesLister;
// otherwise no rules, incomplete, and ErrRulesNotListed.
func ListRules(ctx context.Context, a Authorizer, u *User, namespace string) ([]Rule, bool, error) {
	l, ok := a.(RulesLister)
	if !ok {
		return nil, true, ErrRulesNotListed
	}
	return l.RulesFor(ctx, u, namespace)
}

// allRules allow every verb on every resource and every path.
func allRules() []Rule {
	return []Rule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}
}

// RulesFor lists everything for every user: AlwaysAllow allows it.
func (alwaysAllow) RulesFor(context.Context, *User, string) ([]Rule, bool, error) {
	return allRules(), false, nil
}

// RulesFor concatenates the rules of the chain's authorizers; it is
// incomplete if any of theirs is, and its error joins theirs. A Deny earlier
// in the chain is not subtracted: the rules are what some member allows.
func (c chain) RulesFor(ctx context.Context, u *User, namespace string) ([]Rule, bool, error) {
	var rules []Rule
	var errs []error
	incomplete := false
	for _, a := range c {
		r, inc, err := ListRules(ctx, a, u, namespace)
		rules = append(rules, r...)
		incomplete = incomplete || inc || err != nil
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rules, incomplete, errors.Join(errs...)
}

// RulesFor lists the rules of the roles bound to u: cluster-wide bindings,
// and the bindings in namespace. A binding in a namespace grants no
// non-resource paths (Authorize does not), so their rules are left out.
// Members of system:masters get everything.
func (p *rbac) RulesFor(_ context.Context, u *User, namespace string) ([]Rule, bool, error) {
	if u == nil {
		return nil, false, nil
	}
	if u.InGroup(GroupMasters) {
		return allRules(), false, nil
	}
	var rules []Rule
	for _, b := range p.bindings {
		if !b.subjectMatches(u) || (b.Namespace != "" && b.Namespace != namespace) {
			continue
		}
		role := p.roleOf(&b)
		if role == nil || (role.Namespace != "" && role.Namespace != namespace) {
			continue
		}
		for _, r := range role.Rules {
			if b.Namespace == "" || len(r.NonResourceURLs) == 0 {
				rules = append(rules, r)
			}
		}
	}
	return rules, false, nil
}
