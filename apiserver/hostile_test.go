package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The hostile-client suite: what an authenticated user with the least
// rights (reading configmaps in one namespace) can do to the server. Each
// test is bounded in time and load.

// hostileServer serves configmaps on Badger on disk behind an http.Server
// set up by ConfigureHTTPServer, with tokens for admin (system:masters),
// reader (get/list/watch configmaps in "team") and writer (create
// configmaps in "team"), and /metrics for the admin only.
func hostileServer(t *testing.T, mut func(*Config)) (url string, reg *prometheus.Registry) {
	t.Helper()
	store, err := badger.Open(badger.DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	authz, err := auth.RBAC(&auth.Policy{
		Roles: []auth.Role{
			{Name: "reader", Namespace: "team", Rules: []auth.Rule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}},
			{Name: "writer", Namespace: "team", Rules: []auth.Rule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create"}}}},
		},
		Bindings: []auth.Binding{
			{Name: "reader", Namespace: "team", Role: "reader", Users: []string{"reader"}},
			{Name: "writer", Namespace: "team", Role: "writer", Users: []string{"writer"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewRegistry()
	cfg := Config{
		Storage: store,
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token":  {Name: "admin", Groups: []string{auth.GroupMasters}},
			"reader-token": {Name: "reader"},
			"writer-token": {Name: "writer"},
		}),
		Authorizer:          authz,
		DefaultNamespaces:   []string{"default", "team"},
		DisableControllers:  true,
		Metrics:             reg,
		NonResourceHandlers: map[string]http.Handler{"/metrics": promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
	}
	if mut != nil {
		mut(&cfg)
	}
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(api)
	api.ConfigureHTTPServer(ts.Config)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL, reg
}

// call sends one request with a fresh connection and returns the code and
// body.
func call(t *testing.T, method, url, token, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const (
	ssarPath   = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	teamCMPath = "/api/v1/namespaces/team/configmaps"
)

// A small YAML body whose aliases reference a long string thousands of
// times is refused before it is expanded; the server allocates about what
// the body holds, not what it would expand to.
func TestHostileYAMLAliases(t *testing.T) {
	url, _ := hostileServer(t, nil)
	bomb := "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nmetadata:\n  name: &s " +
		strings.Repeat("x", 100000) + "\n  labels:\n" + func() string {
		var b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&b, "    l%d: *s\n", i)
		}
		return b.String()
	}() + "spec:\n  resourceAttributes:\n    verb: get\n    resource: configmaps\n"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, body := call(t, "POST", url+ssarPath, "reader-token", "application/yaml", bomb)
	runtime.ReadMemStats(&after)
	if code != http.StatusBadRequest || !strings.Contains(body, "aliases expand") {
		t.Fatalf("alias bomb: %d %s", code, body)
	}
	// Expanded, it is 300 MB; refused, a few times the 160 KB body.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("the server allocated %d MB for a %d KB body", grew>>20, len(bomb)>>10)
	}
	// The same through server-side apply.
	apply := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: &s " + strings.Repeat("y", 100000) + "\n" +
		func() string {
			var b strings.Builder
			for i := range 100 {
				fmt.Fprintf(&b, "  k%d: *s\n", i)
			}
			return b.String()
		}()
	code, body = call(t, "PATCH", url+teamCMPath+"/x?fieldManager=m", "admin-token", "application/apply-patch+yaml", apply)
	if code != http.StatusBadRequest || !strings.Contains(body, "aliases expand") {
		t.Fatalf("alias bomb by apply: %d %s", code, body)
	}
}

// stalledBody starts a request whose body stops after two bytes, and
// returns the connection (closed by the test's cleanup).
func stalledBody(t *testing.T, url, path, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"", path, token)
	return conn
}

// One user's stalled bodies take at most its share of the mutating seats:
// other users keep writing, and the stalled requests end at the request
// timeout, giving their seats back.
func TestHostileSlowBodies(t *testing.T) {
	url, reg := hostileServer(t, func(c *Config) {
		c.MaxMutatingRequestsInFlight = 8 // a user may hold 2; 32 may wait
		c.RequestTimeout = 2 * time.Second
		c.FlowControl.MaxWait = 3 * time.Second
	})
	var conns []net.Conn
	for range 20 {
		conns = append(conns, stalledBody(t, url, ssarPath, "reader-token"))
	}
	seats := "apiserver_flowcontrol_current_executing_seats,priority_level=mutating"
	waitMetric(t, reg, seats, 2)
	waitMetric(t, reg, "apiserver_flowcontrol_current_inqueue_requests,priority_level=mutating", 18)
	// Another user and the admin write while the reader's requests stall.
	for i, token := range []string{"writer-token", "admin-token"} {
		start := time.Now()
		code, body := call(t, "POST", url+teamCMPath, token, "application/json", fmt.Sprintf(`{"metadata":{"name":"w%d"}}`, i))
		if code != http.StatusCreated {
			t.Fatalf("%s during the stall: %d %s", token, code, body)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s waited %v", token, took)
		}
	}
	// The stalled ones are answered (429 at once beyond the queue, or after
	// waiting past MaxWait; 504 for a body not received in time) and free
	// their seats.
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled request: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout && resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("stalled request answered %d", resp.StatusCode)
		}
	}
	waitMetric(t, reg, seats, 0)
}

// A client that never reads a large response holds it only until the
// request timeout (and a grace to write the response).
func TestHostileUnreadResponse(t *testing.T) {
	url, reg := hostileServer(t, func(c *Config) { c.RequestTimeout = 3 * time.Second })
	value := strings.Repeat("v", 1<<20-100)
	for i := range 24 {
		if code, body := call(t, "POST", url+teamCMPath, "admin-token", "application/json",
			fmt.Sprintf(`{"metadata":{"name":"big%d"},"data":{"v":%q}}`, i, value)); code != http.StatusCreated {
			t.Fatalf("create: %d %.200s", code, body)
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer reader-token\r\n\r\n", teamCMPath)
	seats := "apiserver_flowcontrol_current_executing_seats,priority_level=readOnly"
	waitMetric(t, reg, seats, 1)
	start := time.Now()
	waitMetric(t, reg, seats, 0) // the server gave up writing
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the unread response was held %v", took)
	}
}

// Idle keep-alive connections and headers that never end are closed by the
// http.Server that ConfigureHTTPServer set up.
func TestHostileIdleConnections(t *testing.T) {
	url, _ := hostileServer(t, func(c *Config) {
		c.IdleTimeout = 300 * time.Millisecond
		c.ReadHeaderTimeout = 300 * time.Millisecond
	})
	for name, send := range map[string]string{
		"idle after a request": "GET /version HTTP/1.1\r\nHost: x\r\n\r\n",
		"header never ends":    "GET /version HTTP/1.1\r\nHost: x\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, send)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		_, err = io.Copy(io.Discard, conn) // until the server closes
		conn.Close()
		if err != nil {
			t.Errorf("%s: %v, want the server to close the connection", name, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: closed after %v", name, took)
		}
	}
}

// /metrics is a non-resource URL the authorizer decides.
func TestHostileMetricsAuthorized(t *testing.T) {
	url, _ := hostileServer(t, nil)
	if code, _ := call(t, "GET", url+"/metrics", "reader-token", "", ""); code != http.StatusForbidden {
		t.Fatalf("reader reads /metrics: %d", code)
	}
	code, body := call(t, "GET", url+"/metrics", "admin-token", "", "")
	if code != http.StatusOK || !strings.Contains(body, "apiserver_flowcontrol_nominal_limit_seats") {
		t.Fatalf("admin reads /metrics: %d %.200s", code, body)
	}
	if code, _ := call(t, "GET", url+"/metrics", "no-such-token", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated /metrics: %d", code)
	}
	if _, err := New(context.Background(), Config{Storage: badgerInMemory(t), NonResourceHandlers: map[string]http.Handler{"/apis/x": http.NotFoundHandler()}}); err == nil {
		t.Fatal("a NonResourceHandlers path under /apis was accepted")
	}
}

// Many users at once: each gets its share of a small level, none is
// starved by the others' backlog.
func TestHostileFairShare(t *testing.T) {
	entered := make(chan string, 100)
	release := make(chan struct{})
	url, _ := hostileServer(t, func(c *Config) {
		c.FlowControl.Levels = []PriorityLevel{{Name: "all", Seats: 4, SeatsPerFlow: 2, QueueLength: 10}}
		c.Authorizer = auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Resource == "configmaps" && a.Name == "slow" {
				entered <- a.User.Name
				<-release
			}
			return auth.Allow, "", nil
		})
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, "GET", url+teamCMPath+"/slow", "reader-token", "", "")
		}()
	}
	for range 2 {
		if u := <-entered; u != "reader" {
			t.Fatalf("entered: %s", u)
		}
	}
	// The reader holds its two seats and has four waiting; the writer runs
	// at once on the two left.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, "GET", url+teamCMPath+"/slow", "writer-token", "", "")
		}()
	}
	for range 2 {
		select {
		case u := <-entered:
			if u != "writer" {
				t.Fatalf("entered %s, want the writer", u)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the writer was starved")
		}
	}
}

// waitMetric waits until reg's series key (gatherFlat's form) is want.
func waitMetric(t *testing.T, reg *prometheus.Registry, key string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := gatherFlat(t, reg)[key]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", key, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func badgerInMemory(t *testing.T) *badger.Store {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// Large bodies take seats in proportion to their declared length, so one
// user decodes only a few at once: decoding holds about fifty times a
// body's size.
func TestHostileLargeBodiesTakeSeats(t *testing.T) {
	url, reg := hostileServer(t, func(c *Config) {
		c.MaxMutatingRequestsInFlight = 40 // a user may hold 10
		c.FlowControl.SeatBytes = 32 << 10
		c.RequestTimeout = 2 * time.Second
	})
	large := func() net.Conn {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// 256 KiB declared: 1 + 8 seats. The body stalls after two bytes.
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer reader-token\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"", ssarPath, 256<<10)
		return conn
	}
	large()
	waitMetric(t, reg, "apiserver_flowcontrol_current_executing_seats,priority_level=mutating", 9)
	large() // 18 seats would pass the user's 10: it waits
	waitMetric(t, reg, "apiserver_flowcontrol_current_inqueue_requests,priority_level=mutating", 1)
	// Another user's request runs on the seats left.
	if code, body := call(t, "POST", url+ssarPath, "writer-token", "application/json",
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"configmaps"}}}`); code != http.StatusCreated {
		t.Fatalf("another user beside the large bodies: %d %s", code, body)
	}
	waitMetric(t, reg, "apiserver_flowcontrol_current_executing_seats,priority_level=mutating", 0)
}
