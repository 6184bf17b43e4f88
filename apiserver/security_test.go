package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

type memAudit struct {
	mu   sync.Mutex
	recs []AuditRecord
}

func (m *memAudit) Record(_ context.Context, r AuditRecord) {
	m.mu.Lock()
	m.recs = append(m.recs, r)
	m.mu.Unlock()
}

// securedServer serves configmaps and widgets with token authentication and
// an RBAC policy:
//   - admin (system:masters): everything;
//   - reader: get/list/watch on everything, in every namespace;
//   - dev: create/update/patch/delete on widgets in namespace "team" only,
//     plus get on configmaps named "visible" there;
//   - nobody: authenticated, no grants.
func securedServer(t *testing.T, audit AuditSink, mut func(*Config)) *httptest.Server {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	policy := &auth.Policy{
		Roles: []auth.Role{
			{Name: "view", Rules: []auth.Rule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
				{NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi/*"}, Verbs: []string{"get"}}}},
			{Name: "widget-editor", Namespace: "team", Rules: []auth.Rule{
				{APIGroups: []string{"example.dev"}, Resources: []string{"widgets"}, Verbs: []string{"create", "update", "patch", "delete", "get"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"visible"}, Verbs: []string{"get"}},
			}},
		},
		Bindings: []auth.Binding{
			{Name: "readers", Role: "view", Users: []string{"reader"}},
			{Name: "devs", Namespace: "team", Role: "widget-editor", Groups: []string{"developers"}},
		},
	}
	authz, err := auth.RBAC(policy)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Storage: store,
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token":  {Name: "admin", Groups: []string{auth.GroupMasters}},
			"reader-token": {Name: "reader"},
			"dev-token":    {Name: "dev", Groups: []string{"developers"}},
			"nobody-token": {Name: "nobody"},
		}),
		Authorizer:        authz,
		Audit:             audit,
		DefaultNamespaces: []string{"default", "team"},
	}
	if mut != nil {
		mut(&cfg)
	}
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetResource(t)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return ts
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestAuthentication(t *testing.T) {
	ts := securedServer(t, nil, nil)
	do(t, ts, "GET", cmPath, "").status(t, 401, meta.StatusReasonUnauthorized)
	do(t, ts, "GET", cmPath, "", bearer("wrong")...).status(t, 401, meta.StatusReasonUnauthorized)
	do(t, ts, "GET", "/apis", "").status(t, 401, meta.StatusReasonUnauthorized)
	if r := do(t, ts, "GET", cmPath, "", bearer("admin-token")...); r.code != 200 {
		t.Fatalf("admin list: %d %s", r.code, r.body)
	}
	for _, p := range []string{"/healthz", "/readyz", "/livez", "/version"} {
		if r := do(t, ts, "GET", p, ""); r.code != 200 {
			t.Fatalf("%s without credentials: %d", p, r.code)
		}
	}
	anon := securedServer(t, nil, func(c *Config) { c.AllowAnonymous = true; c.Authorizer = nil })
	if r := do(t, anon, "GET", cmPath, ""); r.code != 200 {
		t.Fatalf("anonymous with AllowAnonymous: %d %s", r.code, r.body)
	}
	do(t, anon, "GET", cmPath, "", bearer("wrong")...).status(t, 401, meta.StatusReasonUnauthorized)
}

func TestAuthorizationMatrix(t *testing.T) {
	audit := &memAudit{}
	ts := securedServer(t, audit, nil)
	team := "/apis/example.dev/v1/namespaces/team/widgets"
	teamCM := "/api/v1/namespaces/team/configmaps"
	adminDo := func(method, path, body string) {
		t.Helper()
		if r := do(t, ts, method, path, body, bearer("admin-token")...); r.code >= 300 {
			t.Fatalf("admin %s %s: %d %s", method, path, r.code, r.body)
		}
	}
	adminDo("POST", team, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)
	adminDo("POST", teamCM, `{"metadata":{"name":"visible"}}`)
	adminDo("POST", teamCM, `{"metadata":{"name":"hidden"}}`)
	adminDo("POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)

	widget := `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"n"},"spec":{"size":1}}`
	tests := []struct {
		user, method, path, body string
		want                     int
	}{
		{"reader", "GET", team, "", 200},
		{"reader", "GET", "/apis/example.dev/v1/widgets", "", 200},
		{"reader", "GET", team + "/w", "", 200},
		{"reader", "GET", team + "?watch=1&timeoutSeconds=1", "", 200},
		{"reader", "POST", team, widget, 403},
		{"reader", "POST", team + "?dryRun=All", widget, 403},
		{"reader", "DELETE", team + "/w", "", 403},
		{"reader", "GET", "/apis", "", 200},
		{"reader", "GET", "/openapi/v3", "", 200},
		{"dev", "POST", team + "?dryRun=All", widget, 201},
		{"dev", "POST", team, widget, 201},
		{"dev", "PATCH", team + "/n", `{"spec":{"size":2}}`, 200},
		{"dev", "GET", team + "/n", "", 200},
		{"dev", "GET", team, "", 403},
		{"dev", "GET", team + "?watch=1", "", 403},
		{"dev", "DELETE", team, "", 403},
		{"dev", "POST", wdPath, widget, 403},
		{"dev", "POST", wdPath + "?dryRun=All", widget, 403},
		{"dev", "GET", teamCM + "/visible", "", 200},
		{"dev", "GET", teamCM + "/hidden", "", 403},
		{"dev", "GET", teamCM + "/missing", "", 403},
		{"dev", "DELETE", team + "/n", "", 200},
		{"dev", "GET", "/apis", "", 403},
		{"nobody", "GET", team, "", 403},
		{"nobody", "GET", "/api/v1/namespaces", "", 403},
		{"nobody", "GET", "/openapi/v2", "", 403},
		// Whether a resource is served is not revealed before authorization.
		{"nobody", "GET", "/api/v1/namespaces/team/teapots", "", 403},
		{"admin", "GET", "/api/v1/namespaces/team/teapots", "", 404},
		{"admin", "DELETE", wdPath + "/w", "", 200},
	}
	for _, tt := range tests {
		r := do(t, ts, tt.method, tt.path, tt.body, append(bearer(tt.user+"-token"), "Content-Type", "application/merge-patch+json")...)
		if tt.method == "POST" {
			r = do(t, ts, tt.method, tt.path, tt.body, bearer(tt.user+"-token")...)
		}
		if r.code != tt.want {
			t.Errorf("%s %s %s: %d, want %d (%s)", tt.user, tt.method, tt.path, r.code, tt.want, r.body)
		}
		if r.code == 403 {
			st := r.status(t, 403, meta.StatusReasonForbidden)
			if !strings.Contains(st.Message, fmt.Sprintf("User %q cannot", tt.user)) {
				t.Errorf("403 message %q", st.Message)
			}
		}
	}
	// The Kubernetes message shape.
	st := do(t, ts, "GET", team, "", bearer("dev-token")...).status(t, 403, meta.StatusReasonForbidden)
	want := `widgets.example.dev is forbidden: User "dev" cannot list resource "widgets" in API group "example.dev" in the namespace "team"`
	if st.Message != want || st.Details.Group != "example.dev" || st.Details.Kind != "widgets" {
		t.Fatalf("403 status: %+v\nwant message %s", st, want)
	}
	st = do(t, ts, "GET", teamCM+"/hidden", "", bearer("dev-token")...).status(t, 403, meta.StatusReasonForbidden)
	if !strings.HasPrefix(st.Message, `configmaps "hidden" is forbidden: User "dev" cannot get resource "configmaps" in API group "" in the namespace "team"`) {
		t.Fatalf("403 message %q", st.Message)
	}
	// Forbidden dry runs wrote nothing; neither did anything else refused.
	if r := do(t, ts, "GET", wdPath+"/n", "", bearer("admin-token")...); r.code != 404 {
		t.Fatalf("a refused create left an object: %d", r.code)
	}

	// Audit records name user, verb and outcome.
	audit.mu.Lock()
	defer audit.mu.Unlock()
	found := false
	for _, rec := range audit.recs {
		if rec.User == "dev" && rec.Verb == "list" && rec.Resource == "widgets" && rec.Namespace == "team" && rec.Code == 403 {
			found = true
		}
	}
	if !found || len(audit.recs) < len(tests) {
		t.Fatalf("audit records (%d) lack the refused list by dev: %+v", len(audit.recs), audit.recs[:3])
	}
}

func TestSelfSubjectAccessReview(t *testing.T) {
	ts := securedServer(t, nil, nil)
	review := func(tok, attrs string) (bool, int) {
		r := do(t, ts, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
			`{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":`+attrs+`}`, bearer(tok)...)
		var out struct {
			Status struct{ Allowed bool }
		}
		_ = json.Unmarshal(r.body, &out)
		return out.Status.Allowed, r.code
	}
	if ok, code := review("dev-token", `{"resourceAttributes":{"namespace":"team","verb":"create","group":"example.dev","resource":"widgets"}}`); !ok || code != 201 {
		t.Fatalf("dev may create widgets in team: %v %d", ok, code)
	}
	if ok, _ := review("dev-token", `{"resourceAttributes":{"namespace":"default","verb":"create","group":"example.dev","resource":"widgets"}}`); ok {
		t.Fatal("dev may not create widgets in default")
	}
	if ok, _ := review("reader-token", `{"nonResourceAttributes":{"path":"/apis","verb":"get"}}`); !ok {
		t.Fatal("reader may get /apis")
	}
	if _, code := review("reader-token", `{}`); code != 422 {
		t.Fatalf("empty spec: %d, want 422", code)
	}
}

// The built-in basic-user rule lets authenticated users ask, not
// system:anonymous (kube binds system:basic-user to system:authenticated);
// for anonymous requests Config.Authorizer decides.
func TestSelfSubjectAccessReviewAnonymous(t *testing.T) {
	const ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	const body = `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"nonResourceAttributes":{"path":"/apis","verb":"get"}}}`
	ts := securedServer(t, nil, func(c *Config) { c.AllowAnonymous = true })
	do(t, ts, "POST", ssar, body).status(t, 403, meta.StatusReasonForbidden)
	if r := do(t, ts, "POST", ssar, body, bearer("nobody-token")...); r.code != 201 {
		t.Fatalf("an authenticated user without roles: %d %s", r.code, r.body)
	}
	// An authorizer that allows anonymous reviews still can.
	ts = securedServer(t, nil, func(c *Config) {
		c.AllowAnonymous = true
		c.Authorizer = auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Resource == "selfsubjectaccessreviews" {
				return auth.Allow, "", nil
			}
			return auth.NoOpinion, "", nil
		})
	})
	if r := do(t, ts, "POST", ssar, body); r.code != 201 {
		t.Fatalf("anonymous allowed by Config.Authorizer: %d %s", r.code, r.body)
	}
}

// Client certificates signed by the trusted CA authenticate; others do not.
func TestClientCertificates(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	clientCert := func(cn string, orgs []string, signer *ecdsa.PrivateKey, parent *x509.Certificate) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
		if parent == nil {
			parent = tmpl
		}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}

	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	api, err := New(context.Background(), Config{Storage: store, Authenticator: auth.ClientCertificates(pool),
		Authorizer: auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.User.InGroup("ops") {
				return auth.Allow, "", nil
			}
			return auth.NoOpinion, "", nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ts := httptest.NewUnstartedServer(api)
	ts.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	ts.StartTLS()
	defer ts.Close()
	get := func(cert *tls.Certificate) int {
		tr := ts.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		resp, err := (&http.Client{Transport: tr}).Get(ts.URL + "/api/v1/namespaces")
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := clientCert("alice", []string{"ops"}, caKey, ca)
	other := clientCert("bob", []string{"dev"}, caKey, ca)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	selfSigned := clientCert("mallory", []string{"ops"}, otherKey, nil)
	if c := get(&good); c != 200 {
		t.Fatalf("trusted client certificate: %d", c)
	}
	if c := get(&other); c != 403 {
		t.Fatalf("trusted certificate without grants: %d, want 403", c)
	}
	if c := get(nil); c != 401 {
		t.Fatalf("no certificate: %d, want 401", c)
	}
	if c := get(&selfSigned); c != 401 && c != -1 {
		t.Fatalf("untrusted certificate: %d, want 401 or a TLS failure", c)
	}
}

// Beyond the in-flight bound the answer is 429 with Retry-After.
func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	ts := securedServer(t, nil, func(c *Config) {
		// Two mutating seats a user may both take, no queue.
		c.FlowControl.Levels = DefaultPriorityLevels(400, 2)
		c.FlowControl.Levels[1].SeatsPerFlow, c.FlowControl.Levels[1].QueueLength = 2, -1
		c.Authorizer = auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Verb == "create" && a.Name == "" && a.Resource == "configmaps" && a.User.Name == "reader" {
				entered.Done()
				<-release // hold the request inside the limit
			}
			return auth.Allow, "", nil
		})
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	defer once.Do(func() { close(release) }) // also when the test fails
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"held%d"}}`, i), bearer("reader-token")...)
		}(i)
	}
	entered.Wait()
	r := do(t, ts, "PUT", cmPath+"/x", `{"metadata":{"name":"x"}}`, bearer("reader-token")...)
	st := r.status(t, 429, meta.StatusReasonTooManyRequests)
	if r.header.Get("Retry-After") != "1" || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("429 without Retry-After: %v %+v", r.header, st)
	}
	// Members of system:masters are exempt.
	if r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"by-admin"}}`, bearer("admin-token")...); r.code != 201 {
		t.Fatalf("admin during mutating saturation: %d %s", r.code, r.body)
	}
	// Reads have their own bound.
	if r := do(t, ts, "GET", cmPath, "", bearer("reader-token")...); r.code != 200 {
		t.Fatalf("read during mutating saturation: %d", r.code)
	}
	once.Do(func() { close(release) })
}

func TestAdmission(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	record := func(s string) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}
	ts := securedServer(t, nil, func(c *Config) {
		c.Admission = []registry.AdmissionHook{
			{
				Name: "labeler", SideEffects: registry.SideEffectsNone,
				Operations: []registry.Operation{registry.OperationCreate, registry.OperationUpdate},
				Mutate: func(_ context.Context, req *registry.AdmissionRequest) error {
					if req.User == nil {
						return nil // the server's own writes (default namespaces)
					}
					labels, _ := req.Object["metadata"].(map[string]any)["labels"].(map[string]any)
					if labels == nil {
						labels = map[string]any{}
						req.Object["metadata"].(map[string]any)["labels"] = labels
					}
					labels["admitted-by"] = req.User.Name
					return nil
				},
			},
			{
				Name: "no-forbidden-names", SideEffects: registry.SideEffectsNone,
				Validate: func(_ context.Context, req *registry.AdmissionRequest) error {
					record(fmt.Sprintf("%s %s dry=%v old=%v", req.Operation, req.Name, req.DryRun, req.OldObject != nil))
					if req.Name == "forbidden" {
						return fmt.Errorf("the name %q is reserved", req.Name)
					}
					if req.Operation == registry.OperationDelete && req.OldObject["metadata"].(map[string]any)["labels"].(map[string]any)["keep"] == "yes" {
						return fmt.Errorf("this object is kept")
					}
					return nil
				},
			},
		}
	})
	admin := bearer("admin-token")
	r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"a"}}`, admin...)
	if r.code != 201 || str(r.object(t), "metadata", "labels", "admitted-by") != "admin" {
		t.Fatalf("mutating hook: %d %s", r.code, r.body)
	}
	st := do(t, ts, "POST", cmPath, `{"metadata":{"name":"forbidden"}}`, admin...).status(t, 403, meta.StatusReasonForbidden)
	if st.Message != `configmaps "forbidden" is forbidden: admission hook "no-forbidden-names" denied the request: the name "forbidden" is reserved` {
		t.Fatalf("message %q", st.Message)
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"kept","labels":{"keep":"yes"}}}`, admin...)
	do(t, ts, "DELETE", cmPath+"/kept", "", admin...).status(t, 403, meta.StatusReasonForbidden)
	if do(t, ts, "GET", cmPath+"/kept", "", admin...).code != 200 {
		t.Fatal("a refused delete removed the object")
	}
	if r := do(t, ts, "POST", cmPath+"?dryRun=All", `{"metadata":{"name":"dry"}}`, admin...); r.code != 201 {
		t.Fatalf("dry run through side-effect-free hooks: %d %s", r.code, r.body)
	}
	mu.Lock()
	joined := strings.Join(seen, "\n")
	mu.Unlock()
	for _, want := range []string{"CREATE a dry=false old=false", "DELETE kept dry=false old=true", "CREATE dry dry=true old=false"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("validating hook calls %q lack %q", joined, want)
		}
	}

	// A hook with side effects fails dry runs (and only dry runs).
	ts2 := securedServer(t, nil, func(c *Config) {
		c.Admission = []registry.AdmissionHook{{Name: "notifier", SideEffects: registry.SideEffectsSome,
			Validate: func(context.Context, *registry.AdmissionRequest) error { return nil }}}
	})
	st = do(t, ts2, "POST", cmPath+"?dryRun=All", `{"metadata":{"name":"x"}}`, admin...).status(t, 400, meta.StatusReasonBadRequest)
	if !strings.Contains(st.Message, `"notifier" has side effects`) {
		t.Fatalf("message %q", st.Message)
	}
	if r := do(t, ts2, "POST", cmPath, `{"metadata":{"name":"x"}}`, admin...); r.code != 201 {
		t.Fatalf("real request through a side-effect hook: %d %s", r.code, r.body)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := securedServer(t, nil, func(c *Config) { c.Metrics = reg })
	admin := bearer("admin-token")
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"m"}}`, admin...)
	do(t, ts, "GET", cmPath+"/m", "", admin...)
	do(t, ts, "GET", cmPath+"/m", "", admin...) // a second time: counted by the cached children too
	do(t, ts, "GET", cmPath+"/missing", "", admin...)
	do(t, ts, "GET", cmPath, "", bearer("nobody-token")...)
	// Label values the client chooses stay bounded: a method that is not
	// HTTP's, a resource that is not registered, the subresource of a 404.
	do(t, ts, "BREW", "/api", "", admin...)
	do(t, ts, "GET", "/api/v1/namespaces/default/teapots", "", admin...)
	do(t, ts, "GET", cmPath+"/m/teacup", "", admin...)
	// A watch is counted, its latency is not recorded.
	if r := do(t, ts, "GET", cmPath+"?watch=1&timeoutSeconds=1", "", admin...); r.code != 200 {
		t.Fatalf("watch: %d %s", r.code, r.body)
	}
	// The client may read the end of the watch before the server counts
	// it: gather until it is counted.
	watchKey := "apiserver_request_total,code=200,component=apiserver,group=,resource=configmaps,scope=namespace,subresource=,verb=watch,version=v1"
	got := gatherFlat(t, reg)
	for deadline := time.Now().Add(5 * time.Second); got[watchKey] == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		got = gatherFlat(t, reg)
	}
	// The watch started the configmaps' cache: a write after it is in its
	// window, which the budget's metrics show.
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"m2"}}`, admin...)
	for deadline := time.Now().Add(5 * time.Second); got["kapi_watch_cache_window_bytes"] == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		got = gatherFlat(t, reg)
	}
	for key, want := range map[string]float64{
		"kapi_watch_cache_window_bytes": 1,
		"kapi_watch_cache_states":       1,
		"kapi_watch_cache_state_bytes":  1,
		"apiserver_request_total,code=201,component=apiserver,group=,resource=configmaps,scope=namespace,subresource=,verb=create,version=v1": 1,
		"apiserver_request_total,code=200,component=apiserver,group=,resource=configmaps,scope=resource,subresource=,verb=get,version=v1":     1,
		"apiserver_request_total,code=404,component=apiserver,group=,resource=configmaps,scope=resource,subresource=,verb=get,version=v1":     1,
		"apiserver_request_total,code=403,component=apiserver,group=,resource=configmaps,scope=namespace,subresource=,verb=list,version=v1":   1,
		"kapi_storage_operation_duration_seconds,operation=create,result=ok":                                                                  2, // the default namespaces too
	} {
		if got[key] < want {
			t.Errorf("%s = %v, want at least %v", key, got[key], want)
		}
	}
	for key := range got {
		for _, bad := range []string{"BREW", "teapots", "teacup", "apiserver_request_duration_seconds,component=apiserver,group=,resource=configmaps,scope=namespace,subresource=,verb=watch"} {
			if strings.Contains(key, bad) {
				t.Errorf("unexpected series %s", key)
			}
		}
	}
	// Exact counts where no other request shares the labels.
	for key, want := range map[string]float64{
		"apiserver_request_total,code=200,component=apiserver,group=,resource=configmaps,scope=resource,subresource=,verb=get,version=v1":   2,
		"apiserver_request_duration_seconds,component=apiserver,group=,resource=configmaps,scope=resource,subresource=,verb=get,version=v1": 4, // two 200s and the two 404s
		"apiserver_current_inflight_requests,request_kind=mutating":                                                                         0,
		"apiserver_flowcontrol_nominal_limit_seats,priority_level=mutating":                                                                 200,
		"apiserver_flowcontrol_nominal_limit_seats,priority_level=readOnly":                                                                 400,
		"apiserver_flowcontrol_current_executing_seats,priority_level=readOnly":                                                             0,
		"apiserver_flowcontrol_current_inqueue_requests,priority_level=readOnly":                                                            0,
		"kapi_watch_cache_budget_bytes":   256 << 20,
		"kapi_watch_cache_states_dropped": 0,
		"apiserver_request_total,code=405,component=apiserver,group=,resource=,scope=,subresource=,verb=other,version=":                      1,
		"apiserver_request_total,code=404,component=apiserver,group=,resource=,scope=,subresource=,verb=list,version=":                       1,
		"apiserver_request_total,code=404,component=apiserver,group=,resource=configmaps,scope=resource,subresource=,verb=get,version=v1":    2, // the missing object and the teacup subresource
		"apiserver_request_total,code=200,component=apiserver,group=,resource=configmaps,scope=namespace,subresource=,verb=watch,version=v1": 1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}

// gatherFlat returns reg's series as "name,label=value,..." -> value (the
// sample count of a histogram).
func gatherFlat(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			}
		}
	}
	return got
}

// An apply body built from wide anchors several levels deep must be refused
// quickly, not expanded.
func TestApplyYAMLBomb(t *testing.T) {
	_, ts := newTestServer(t)
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n")
	b.WriteString("a0: &a0 [" + strings.TrimSuffix(strings.Repeat("x,", 1000), ",") + "]\n")
	for i := 1; i < 6; i++ {
		b.WriteString(fmt.Sprintf("a%d: &a%d [", i, i) + strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 1000), ",") + "]\n")
	}
	r := do(t, ts, "PATCH", cmPath+"/bomb?fieldManager=test", b.String(), "Content-Type", "application/apply-patch+yaml")
	if r.code != 400 {
		t.Fatalf("YAML bomb apply: %d %.300s", r.code, r.body)
	}
}

// An authenticator may hand every request the same *User (one it caches):
// the server adds system:authenticated to its own copy, never to the shared
// user or the array behind its groups (under -race, concurrent requests that
// wrote to the shared user failed here).
func TestAuthenticatedGroupLeavesSharedUserAlone(t *testing.T) {
	groups := make([]string, 1, 4) // room to append in place
	groups[0] = "developers"
	shared := &auth.User{Name: "cached", Groups: groups}
	ts := securedServer(t, nil, func(c *Config) {
		c.Authenticator = auth.AuthenticatorFunc(func(*http.Request) (*auth.User, bool, error) { return shared, true, nil })
		c.Authorizer = auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if !a.User.InGroup(auth.GroupAuthenticated) || !a.User.InGroup("developers") {
				return auth.Deny, "groups " + strings.Join(a.User.Groups, ","), nil
			}
			return auth.Allow, "", nil
		})
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				resp, err := ts.Client().Get(ts.URL + cmPath)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("list: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(shared.Groups) != 1 || groups[:2][1] != "" {
		t.Fatalf("the shared user was changed: groups %q, backing array %q", shared.Groups, groups[:2])
	}
}
