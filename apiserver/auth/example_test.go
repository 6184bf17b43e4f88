package auth_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/kapi-dev/kapi/apiserver/auth"
)

// StaticTokens authenticates "Authorization: Bearer <token>" headers. The
// server calls it for every request; hosts rarely call it themselves.
func ExampleStaticTokens() {
	authn := auth.StaticTokens(map[string]auth.User{
		"s3cret": {Name: "alice", Groups: []string{"developers"}},
	})
	for _, header := range []string{"Bearer s3cret", "Bearer wrong", ""} {
		r := httptest.NewRequest("GET", "/api/v1/namespaces", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		u, ok, err := authn.Authenticate(r)
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case !ok:
			fmt.Println("no credentials")
		default:
			fmt.Println(u.Name, u.Groups)
		}
	}
	// Output:
	// alice [developers]
	// error: invalid credentials
	// no credentials
}

var decisions = map[auth.Decision]string{auth.NoOpinion: "no opinion", auth.Allow: "allow", auth.Deny: "deny"}

// RBAC decides requests from roles and bindings, as Kubernetes' RBAC
// authorizer does. The same policy can be read from a YAML file with
// LoadPolicy.
func ExampleRBAC() {
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{
			{Name: "widget-editor", Rules: []auth.Rule{
				{APIGroups: []string{"example.dev"}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			}},
		},
		Bindings: []auth.Binding{
			// Namespaced binding of a cluster role: alice edits widgets in "team-a" only.
			{Role: "widget-editor", Namespace: "team-a", Users: []string{"alice"}},
		},
	})
	if err != nil {
		panic(err)
	}
	alice := &auth.User{Name: "alice", Groups: []string{auth.GroupAuthenticated}}
	for _, a := range []auth.Attributes{
		{User: alice, Verb: "create", ResourceRequest: true, APIGroup: "example.dev", APIVersion: "v1", Resource: "widgets", Namespace: "team-a"},
		{User: alice, Verb: "create", ResourceRequest: true, APIGroup: "example.dev", APIVersion: "v1", Resource: "widgets", Namespace: "team-b"},
		{User: alice, Verb: "delete", ResourceRequest: true, APIGroup: "example.dev", APIVersion: "v1", Resource: "widgets", Namespace: "team-a", Name: "w1"},
	} {
		d, _, err := authz.Authorize(context.Background(), a)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s in %s: %s\n", a.Verb, a.Resource, a.Namespace, decisions[d])
	}
	// Output:
	// create widgets in team-a: allow
	// create widgets in team-b: no opinion
	// delete widgets in team-a: no opinion
}

// ListRules enumerates what an authorizer allows a user in a namespace, as
// `kubectl auth can-i --list` shows it. RBAC, AlwaysAllow and Chain can;
// any other authorizer makes the list incomplete.
func ExampleListRules() {
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{
			{Name: "view", Rules: []auth.Rule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}}},
			{Name: "editor", Namespace: "team-a", Rules: []auth.Rule{{APIGroups: []string{"example.dev"}, Resources: []string{"widgets"}, Verbs: []string{"update"}}}},
		},
		Bindings: []auth.Binding{
			{Role: "view", Users: []string{"alice"}},
			{Role: "editor", Namespace: "team-a", Users: []string{"alice"}},
		},
	})
	if err != nil {
		panic(err)
	}
	alice := &auth.User{Name: "alice"}
	other := auth.AuthorizerFunc(func(context.Context, auth.Attributes) (auth.Decision, string, error) { return auth.NoOpinion, "", nil })
	for _, c := range []struct {
		az auth.Authorizer
		ns string
	}{{authz, "team-a"}, {authz, "team-b"}, {auth.Chain(authz, other), "team-b"}} {
		rules, incomplete, err := auth.ListRules(context.Background(), c.az, alice, c.ns)
		for _, r := range rules {
			fmt.Println(c.ns, r.Resources, r.Verbs)
		}
		fmt.Println(c.ns, "incomplete:", incomplete, err)
	}
	// Output:
	// team-a [*] [get list]
	// team-a [widgets] [update]
	// team-a incomplete: false <nil>
	// team-b [*] [get list]
	// team-b incomplete: false <nil>
	// team-b [*] [get list]
	// team-b incomplete: true the authorizer cannot list the rules it allows
}
