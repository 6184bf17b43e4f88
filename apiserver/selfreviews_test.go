package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

const (
	ssrPath  = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	ssrrPath = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	ssrBody  = `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
)

func ssrrBody(ns string) string {
	return `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"` + ns + `"}}`
}

// rulesPolicy: dev (group developers) has a Role in team, a cluster role
// bound cluster-wide (resources and a path) and, in team, a cluster role
// with a path, which a namespaced binding does not grant.
func rulesPolicy(t *testing.T) auth.Authorizer {
	t.Helper()
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{
			{Name: "cm-editor", Namespace: "team", Rules: []auth.Rule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"visible"}, Verbs: []string{"get", "update"}}}},
			{Name: "view", Rules: []auth.Rule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
				{NonResourceURLs: []string{"/apis", "/apis/*"}, Verbs: []string{"get"}}}},
			{Name: "metrics", Rules: []auth.Rule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		},
		Bindings: []auth.Binding{
			{Name: "edit-team", Namespace: "team", Role: "cm-editor", Groups: []string{"developers"}},
			{Name: "view-all", Role: "view", Users: []string{"dev"}},
			{Name: "metrics-in-team", Namespace: "team", Role: "metrics", Users: []string{"dev"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return authz
}

type rulesStatus struct {
	ResourceRules    []resourceRule
	NonResourceRules []nonResourceRule
	Incomplete       bool
	EvaluationError  string
}

// reviewRules posts a SelfSubjectRulesReview and returns its status.
func reviewRules(t *testing.T, call func() response) rulesStatus {
	t.Helper()
	r := call()
	var out struct {
		Metadata map[string]any
		Spec     map[string]any
		Status   rulesStatus
	}
	if err := json.Unmarshal(r.body, &out); r.code != http.StatusCreated || err != nil {
		t.Fatalf("rules review: %d %v %s", r.code, err, r.body)
	}
	if len(out.Metadata) != 0 || len(out.Spec) != 0 || !strings.Contains(string(r.body), `"kind":"SelfSubjectRulesReview"`) {
		t.Errorf("kube answers the status only: %s", r.body)
	}
	return out.Status
}

var (
	basicResourceRules = []resourceRule{
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
	}
	publicNonResourceRule = nonResourceRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*", "/version"}}
	everything            = rulesStatus{
		ResourceRules:    append(basicResourceRules, resourceRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}),
		NonResourceRules: []nonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, publicNonResourceRule},
	}
)

func checkRules(t *testing.T, who string, got, want rulesStatus) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("%s: rules\n%s\nwant\n%s", who, g, w)
	}
}

// An RBAC user's rules in a namespace are those of the cluster-wide
// bindings and of the bindings there; system:masters get everything.
func TestSelfSubjectRulesReview(t *testing.T) {
	audit := &memAudit{}
	ts := securedServer(t, audit, func(c *Config) { c.Authorizer = rulesPolicy(t) })
	review := func(tok, ns string) rulesStatus {
		return reviewRules(t, func() response { return do(t, ts, "POST", ssrrPath, ssrrBody(ns), bearer(tok)...) })
	}
	view := resourceRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}}
	apis := nonResourceRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis", "/apis/*"}}
	checkRules(t, "dev in team", review("dev-token", "team"), rulesStatus{
		ResourceRules: append(basicResourceRules[:2:2],
			resourceRule{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"visible"}}, view),
		NonResourceRules: []nonResourceRule{apis, publicNonResourceRule},
	})
	checkRules(t, "dev in default", review("dev-token", "default"), rulesStatus{
		ResourceRules: append(basicResourceRules[:2:2], view), NonResourceRules: []nonResourceRule{apis, publicNonResourceRule},
	})
	checkRules(t, "nobody", review("nobody-token", "team"), rulesStatus{ResourceRules: basicResourceRules, NonResourceRules: []nonResourceRule{publicNonResourceRule}})
	checkRules(t, "admin", review("admin-token", "team"), everything)

	// kubectl sends and reads protobuf: the same answer.
	spec := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "team")
	msg := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), spec)
	r := do(t, ts, "POST", ssrrPath, string(codec.EncodeEnvelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", msg)),
		append(bearer("dev-token"), "Content-Type", codec.MediaProtobuf, "Accept", codec.MediaProtobuf)...)
	u, err := codec.DecodeEnvelope(r.body)
	if r.code != http.StatusCreated || err != nil {
		t.Fatalf("protobuf rules review: %d %v %q", r.code, err, r.body)
	}
	// By hand, kube's field numbers: status = 3; in it resourceRules = 1
	// (resources = 3) and nonResourceRules = 2 (nonResourceURLs = 2).
	var resources, urls []string
	collect := func(v []byte, num protowire.Number, into *[]string) error {
		return codec.Walk(v, func(n protowire.Number, _ protowire.Type, v []byte) error {
			if n == num {
				*into = append(*into, string(v))
			}
			return nil
		})
	}
	err = codec.Walk(u.Raw, func(num protowire.Number, _ protowire.Type, v []byte) error {
		if num != 3 {
			return nil
		}
		return codec.Walk(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
			switch num {
			case 1:
				return collect(v, 3, &resources)
			case 2:
				return collect(v, 2, &urls)
			}
			return nil
		})
	})
	var wantResources, wantURLs []string
	st := review("dev-token", "team")
	for _, r := range st.ResourceRules {
		wantResources = append(wantResources, r.Resources...)
	}
	for _, r := range st.NonResourceRules {
		wantURLs = append(wantURLs, r.NonResourceURLs...)
	}
	if err != nil || !reflect.DeepEqual(resources, wantResources) || !reflect.DeepEqual(urls, wantURLs) {
		t.Errorf("protobuf rules review: %v, resources %q, paths %q; want %q, %q", err, resources, urls, wantResources, wantURLs)
	}

	// Recorded as any request.
	audit.mu.Lock()
	defer audit.mu.Unlock()
	for _, rec := range audit.recs {
		if rec.User == "dev" && rec.Verb == "create" && rec.Resource == "selfsubjectrulesreviews" && rec.APIGroup == "authorization.k8s.io" && rec.Code == 201 {
			return
		}
	}
	t.Errorf("no audit record of dev's rules review in %+v", audit.recs)
}

// Without an authorizer every request is allowed, and the rules say so; an
// authorizer that cannot list its rules makes the list incomplete.
func TestSelfSubjectRulesReviewAuthorizers(t *testing.T) {
	ts := securedServer(t, nil, func(c *Config) { c.Authorizer = nil })
	checkRules(t, "allow all", reviewRules(t, func() response { return do(t, ts, "POST", ssrrPath, ssrrBody("team"), bearer("nobody-token")...) }), everything)

	ts = securedServer(t, nil, func(c *Config) {
		c.Authorizer = auth.AuthorizerFunc(func(context.Context, auth.Attributes) (auth.Decision, string, error) { return auth.Allow, "", nil })
	})
	checkRules(t, "a plain authorizer", reviewRules(t, func() response { return do(t, ts, "POST", ssrrPath, ssrrBody("team"), bearer("dev-token")...) }), rulesStatus{
		ResourceRules: basicResourceRules, NonResourceRules: []nonResourceRule{publicNonResourceRule},
		Incomplete: true, EvaluationError: auth.ErrRulesNotListed.Error(),
	})
}

// whoami: the user as the authenticator resolved it, with the groups the
// server adds, stamped with the time; in JSON and in protobuf.
func TestSelfSubjectReview(t *testing.T) {
	ts := securedServer(t, nil, func(c *Config) {
		c.Authenticator = auth.StaticTokens(map[string]auth.User{
			"carol-token": {Name: "carol", UID: "c-1", Groups: []string{"developers"}, Extra: map[string][]string{"scopes": {"a", "b"}}},
		})
	})
	r := do(t, ts, "POST", ssrPath, ssrBody, bearer("carol-token")...)
	var out struct {
		APIVersion, Kind string
		Metadata         map[string]string
		Status           struct{ UserInfo userInfo }
	}
	if err := json.Unmarshal(r.body, &out); r.code != http.StatusCreated || err != nil {
		t.Fatalf("whoami: %d %v %s", r.code, err, r.body)
	}
	want := userInfo{Username: "carol", UID: "c-1", Groups: []string{"developers", auth.GroupAuthenticated}, Extra: map[string][]string{"scopes": {"a", "b"}}}
	if out.APIVersion != "authentication.k8s.io/v1" || out.Kind != "SelfSubjectReview" || !reflect.DeepEqual(out.Status.UserInfo, want) {
		t.Errorf("whoami: %s", r.body)
	}
	if ts, err := time.Parse(time.RFC3339, out.Metadata["creationTimestamp"]); err != nil || time.Since(ts) > time.Minute || len(out.Metadata) != 1 {
		t.Errorf("metadata %v: want only a creationTimestamp of now (%v)", out.Metadata, err)
	}

	pb := codec.EncodeEnvelope("authentication.k8s.io/v1", "SelfSubjectReview", nil)
	r = do(t, ts, "POST", ssrPath, string(pb), append(bearer("carol-token"), "Content-Type", codec.MediaProtobuf, "Accept", codec.MediaProtobuf)...)
	u, err := codec.DecodeEnvelope(r.body)
	if r.code != http.StatusCreated || err != nil {
		t.Fatalf("protobuf whoami: %d %v %q", r.code, err, r.body)
	}
	obj, err := ssrMessage.Unmarshal(u.Raw)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(obj["status"])
	if string(got) != `{"userInfo":{"extra":{"scopes":["a","b"]},"groups":["developers","system:authenticated"],"uid":"c-1","username":"carol"}}` {
		t.Errorf("protobuf whoami status: %s", got)
	}
}

// The reviews are refused without credentials (and to system:anonymous,
// unless Config.Authorizer allows it); they are create-only and read a
// well-formed body.
func TestSelfReviewsRefused(t *testing.T) {
	ts := securedServer(t, nil, func(c *Config) { c.AllowAnonymous = true })
	for _, c := range []struct{ path, body string }{{ssrPath, ssrBody}, {ssrrPath, ssrrBody("team")}} {
		do(t, ts, "POST", c.path, c.body).status(t, http.StatusForbidden, meta.StatusReasonForbidden)
		do(t, ts, "POST", c.path, c.body, bearer("wrong")...).status(t, http.StatusUnauthorized, meta.StatusReasonUnauthorized)
		do(t, ts, "GET", c.path, "", bearer("nobody-token")...).status(t, http.StatusForbidden, meta.StatusReasonForbidden)
		do(t, ts, "GET", c.path, "", bearer("admin-token")...).status(t, http.StatusMethodNotAllowed, meta.StatusReasonMethodNotAllowed)
		do(t, ts, "DELETE", c.path, "", bearer("admin-token")...).status(t, http.StatusMethodNotAllowed, meta.StatusReasonMethodNotAllowed)
		do(t, ts, "POST", c.path, `{"kind":`, bearer("nobody-token")...).status(t, http.StatusBadRequest, meta.StatusReasonBadRequest)
	}
	ts = securedServer(t, nil, nil)
	do(t, ts, "POST", ssrPath, ssrBody).status(t, http.StatusUnauthorized, meta.StatusReasonUnauthorized)
	do(t, ts, "POST", ssrrPath, ssrrBody("team")).status(t, http.StatusUnauthorized, meta.StatusReasonUnauthorized)
}

// TestPublicRuleIsPublicPath: the rule SelfSubjectRulesReview lists for the
// paths anyone may read is exactly what isPublicPath lets through.
func TestPublicRuleIsPublicPath(t *testing.T) {
	authz, err := auth.RBAC(&auth.Policy{
		Roles:    []auth.Role{{Name: "public", Rules: []auth.Rule{publicRule()}}},
		Bindings: []auth.Binding{{Role: "public", Groups: []string{"everyone"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &auth.User{Name: "u", Groups: []string{"everyone"}}
	for _, p := range []string{"/healthz", "/healthz/ping", "/livez", "/livez/etcd", "/readyz", "/readyz/x", "/version",
		"/version/x", "/metrics", "/api", "/healthzx", "/openapi/v2", "/backup"} {
		d, _, err := authz.Authorize(t.Context(), auth.Attributes{User: u, Verb: "get", Path: p})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d == auth.Allow, isPublicPath(p); got != want {
			t.Errorf("%s: the rule allows it %v, isPublicPath says %v", p, got, want)
		}
	}
}
