package auth

import (
	"context"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Attributes describe a request the way Kubernetes authorizers see it.
type Attributes struct {
	User *User
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for resource requests, and the lower-case HTTP method
	// for non-resource requests.
	Verb string
	// ResourceRequest is true for requests on API resources and false for
	// other paths (discovery, OpenAPI, health, version).
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// Path is the request path, for non-resource requests.
	Path string
}

// Decision is an authorizer's answer.
type Decision int

// Decisions.
const (
	// NoOpinion lets the next authorizer decide; if none does, the request
	// is denied.
	NoOpinion Decision = iota
	Allow
	Deny
)

// Authorizer decides whether a request may proceed. reason is shown to the
// client on denial.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// AlwaysAllow allows every request. It is a RulesLister (everything).
func AlwaysAllow() Authorizer { return alwaysAllow{} }

type alwaysAllow struct{}

func (alwaysAllow) Authorize(context.Context, Attributes) (Decision, string, error) {
	return Allow, "", nil
}

// Chain asks each authorizer in turn; the first Allow or Deny decides. It is
// a RulesLister: the rules of its members.
func Chain(authorizers ...Authorizer) Authorizer { return chain(authorizers) }

type chain []Authorizer

func (c chain) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	for _, az := range c {
		d, reason, err := az.Authorize(ctx, a)
		if err != nil {
			return Deny, "", err
		}
		if d != NoOpinion {
			return d, reason, nil
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return NoOpinion, strings.Join(reasons, "; "), nil
}

// Rule grants verbs on resources or non-resource paths, as an RBAC
// PolicyRule. "*" matches everything in each list; a resource may name a
// subresource ("widgets/status", "*/scale"); NonResourceURLs may end in "*".
type Rule struct {
	APIGroups       []string `json:"apiGroups,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	ResourceNames   []string `json:"resourceNames,omitempty"`
	Verbs           []string `json:"verbs"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// Role is a named set of rules. A role with a namespace applies only there;
// a role without one is a cluster role.
type Role struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Rules     []Rule `json:"rules"`
}

// Binding grants a role to users and groups. With a namespace, the grant
// holds only in that namespace (and may name a cluster role, as a
// RoleBinding can); without one it holds everywhere (a ClusterRoleBinding).
type Binding struct {
	Name      string   `json:"name,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Role      string   `json:"role"`
	Users     []string `json:"users,omitempty"`
	Groups    []string `json:"groups,omitempty"`
}

// Policy is an RBAC policy: roles and bindings.
type Policy struct {
	Roles    []Role    `json:"roles"`
	Bindings []Binding `json:"bindings"`
}

// LoadPolicy reads a Policy from a YAML or JSON file.
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading policy: %w", err)
	}
	var p Policy
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("auth: policy %s: %w", path, err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("auth: policy %s: %w", path, err)
	}
	return &p, nil
}

func (p *Policy) validate() error {
	roles := map[string]bool{}
	for _, r := range p.Roles {
		if r.Name == "" {
			return fmt.Errorf("a role has no name")
		}
		roles[r.Namespace+"/"+r.Name] = true
		for i, rule := range r.Rules {
			if len(rule.Verbs) == 0 {
				return fmt.Errorf("role %s rule %d has no verbs", r.Name, i)
			}
			if len(rule.NonResourceURLs) > 0 && (len(rule.Resources) > 0 || len(rule.APIGroups) > 0) {
				return fmt.Errorf("role %s rule %d mixes resources and nonResourceURLs", r.Name, i)
			}
		}
	}
	for _, b := range p.Bindings {
		if !roles["/"+b.Role] && !roles[b.Namespace+"/"+b.Role] {
			return fmt.Errorf("binding %q names unknown role %q", b.Name, b.Role)
		}
	}
	return nil
}

// RBAC returns an authorizer that allows what the policy grants and has no
// opinion otherwise. Members of system:masters are allowed everything. It is
// a RulesLister.
func RBAC(p *Policy) (Authorizer, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	roles := map[string]*Role{}
	for i := range p.Roles {
		r := &p.Roles[i]
		roles[r.Namespace+"/"+r.Name] = r
	}
	return &rbac{roles: roles, bindings: append([]Binding{}, p.Bindings...)}, nil
}

// rbac is the authorizer of a Policy: roles by "namespace/name".
type rbac struct {
	roles    map[string]*Role
	bindings []Binding
}

func (p *rbac) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User == nil {
		return NoOpinion, "", nil
	}
	if a.User.InGroup(GroupMasters) {
		return Allow, "", nil
	}
	for _, b := range p.bindings {
		if !b.subjectMatches(a.User) {
			continue
		}
		if b.Namespace != "" && (!a.ResourceRequest || a.Namespace != b.Namespace) {
			continue
		}
		role := p.roleOf(&b)
		if role == nil || (role.Namespace != "" && role.Namespace != a.Namespace) {
			continue
		}
		for _, rule := range role.Rules {
			if rule.allows(a) {
				return Allow, fmt.Sprintf("allowed by binding %q to role %q", b.Name, role.Name), nil
			}
		}
	}
	return NoOpinion, "", nil
}

// roleOf returns the role a binding names: a role in the binding's
// namespace, else a cluster role.
func (p *rbac) roleOf(b *Binding) *Role {
	if role := p.roles[b.Namespace+"/"+b.Role]; role != nil {
		return role
	}
	return p.roles["/"+b.Role]
}

func (b *Binding) subjectMatches(u *User) bool {
	for _, n := range b.Users {
		if n == u.Name {
			return true
		}
	}
	for _, g := range b.Groups {
		if u.InGroup(g) {
			return true
		}
	}
	return false
}

func (r *Rule) allows(a Attributes) bool {
	if !matchAny(r.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range r.NonResourceURLs {
			if u == "*" || u == a.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !matchAny(r.APIGroups, a.APIGroup) {
		return false
	}
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	ok := false
	for _, x := range r.Resources {
		if x == "*" || x == res || (a.Subresource != "" && x == "*/"+a.Subresource) || (a.Subresource == "" && x == a.Resource) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	if len(r.ResourceNames) == 0 {
		return true
	}
	return a.Name != "" && matchAny(r.ResourceNames, a.Name)
}

func matchAny(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// DenialMessage renders kube-apiserver's message for a refused request.
func DenialMessage(a Attributes, reason string) string {
	user := AnonymousUser
	if a.User != nil {
		user = a.User.Name
	}
	var msg string
	if !a.ResourceRequest {
		msg = fmt.Sprintf("forbidden: User %q cannot %s path %q", user, a.Verb, a.Path)
	} else {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		scope := "at the cluster scope"
		if a.Namespace != "" {
			scope = fmt.Sprintf("in the namespace %q", a.Namespace)
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", user, a.Verb, res, a.APIGroup, scope)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}
