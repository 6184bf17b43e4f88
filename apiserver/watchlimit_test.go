package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
)

// watchLimitServer serves configmaps and widgets with tokens for alice and
// bob (ordinary users) and admin (system:masters), over HTTP/1.1 or HTTP/2.
func watchLimitServer(t *testing.T, h2 bool, mut func(*Config)) (*Server, *httptest.Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{
		Storage: badgerInMemory(t),
		Authenticator: auth.StaticTokens(map[string]auth.User{
			"admin-token": {Name: "admin", Groups: []string{auth.GroupMasters}},
			"alice-token": {Name: "alice"},
			"bob-token":   {Name: "bob"},
		}),
		DisableControllers: true,
		Metrics:            reg,
	}
	mut(&cfg)
	api, ts := serveWatchAPI(t, cfg, h2, nil)
	return api, ts, reg
}

// refusedWatch starts a watch that must be refused with 429 and returns its
// Status.
func refusedWatch(t *testing.T, ts *httptest.Server, path, token string) meta.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // an admitted watch never ends
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("watch past the bound: %d (Retry-After %q) %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	var st meta.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Reason != meta.StatusReasonTooManyRequests || !strings.Contains(st.Message, "Too many watches") {
		t.Fatalf("status %+v", st)
	}
	return st
}

// One user's watches are bounded; another user and system:masters are not
// affected, and a slot comes back however the watch ends: the client goes,
// timeoutSeconds runs out, the server ends it.
func TestWatchLimitPerUser(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			api, ts, reg := watchLimitServer(t, h2, func(c *Config) { c.MaxWatchesPerUser = 3 })
			held := func(user string) int { _, n := api.watches.counts(user); return n }
			var alice []*watchStream
			for range 3 {
				alice = append(alice, startWatchAs(t, ts, cmPath+"?watch=1", "alice-token"))
			}
			if h2 && alice[0].resp.ProtoMajor != 2 {
				t.Fatalf("protocol %s", alice[0].resp.Proto)
			}
			refusedWatch(t, ts, wdPath+"?watch=1", "alice-token")
			if got := gatherFlat(t, reg)["kapi_watches_refused_total,limit=per-user"]; got != 1 {
				t.Errorf("kapi_watches_refused_total per-user = %v, want 1", got)
			}
			startWatchAs(t, ts, cmPath+"?watch=1", "bob-token")
			for range 5 {
				startWatchAs(t, ts, cmPath+"?watch=1", "admin-token")
			}

			// The client goes.
			alice[0].resp.Body.Close()
			eventually(t, "the closed watch's slot", func() bool { return held("alice") == 2 })
			// timeoutSeconds runs out.
			w := startWatchAs(t, ts, wdPath+"?watch=1&timeoutSeconds=1", "alice-token")
			refusedWatch(t, ts, cmPath+"?watch=1", "alice-token")
			w.ended(t, 10*time.Second)
			eventually(t, "the timed-out watch's slot", func() bool { return held("alice") == 2 })
			// The server ends it: re-registering a type ends its watches.
			startWatchAs(t, ts, wdPath+"?watch=1", "alice-token")
			if err := api.Register(widgetResource(t)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the ended watch's slot", func() bool { return held("alice") == 2 })
			startWatchAs(t, ts, cmPath+"?watch=1", "alice-token")
			refusedWatch(t, ts, cmPath+"?watch=1", "alice-token")
		})
	}
}

// The total bound refuses ordinary users once every user's watches
// together reach it; system:masters still watches (and counts).
func TestWatchLimitTotal(t *testing.T) {
	api, ts, reg := watchLimitServer(t, false, func(c *Config) { c.MaxWatches = 4 })
	startWatchAs(t, ts, cmPath+"?watch=1", "alice-token")
	startWatchAs(t, ts, cmPath+"?watch=1", "alice-token")
	startWatchAs(t, ts, cmPath+"?watch=1", "admin-token")
	startWatchAs(t, ts, cmPath+"?watch=1", "bob-token")
	st := refusedWatch(t, ts, cmPath+"?watch=1", "bob-token")
	if !strings.Contains(st.Message, "the server has 4") {
		t.Errorf("message %q", st.Message)
	}
	startWatchAs(t, ts, cmPath+"?watch=1", "admin-token")
	if total, _ := api.watches.counts(""); total != 5 {
		t.Errorf("%d slots held, want 5", total)
	}
	if got := gatherFlat(t, reg)["kapi_watches_refused_total,limit=total"]; got != 1 {
		t.Errorf("kapi_watches_refused_total total = %v, want 1", got)
	}
}

// A watch takes a slot per 64 KiB of what it holds for its life: its
// request line and its parsed selector, which for many short requirements
// is many times the selector's text.
func TestWatchLimitLargeSelector(t *testing.T) {
	api, ts, _ := watchLimitServer(t, false, func(c *Config) { c.MaxWatchesPerUser = 20 })
	sel := strings.Repeat("a,", 15<<10) + "a" // 30 KiB of text, 15,361 requirements
	path := cmPath + "?watch=1&labelSelector=" + sel
	startWatchAs(t, ts, path, "alice-token")
	if _, n := api.watches.counts("alice"); n < 10 || n > 20 {
		t.Fatalf("a watch with a 30 KiB selector of 15,361 requirements holds %d slots, want 10 to 20", n)
	}
	refusedWatch(t, ts, path, "alice-token")
	startWatchAs(t, ts, cmPath+"?watch=1", "alice-token")
}
