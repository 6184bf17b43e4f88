package apiserver

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// openFollow opens GET path with the admin token and returns the response
// after its first line.
func openFollow(t *testing.T, ts *httptest.Server, path string) (*http.Response, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return resp, br
}

// EndWatches ends open follow streams, as it ends watches, and refuses new
// ones; streams without follow are ordinary requests.
func TestSubresourceFollowEndWatches(t *testing.T) {
	rec := &extRecorder{}
	api, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	_, br := openFollow(t, ts, teamWidgets+"/w1/log?follow=true")
	api.EndWatches()
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(br); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the follow stream did not end cleanly: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EndWatches did not end the follow stream")
	}
	r := do(t, ts, "GET", teamWidgets+"/w1/log?follow=true", "", admin...)
	if st := r.status(t, 503, meta.StatusReasonServiceUnavailable); r.header.Get("Retry-After") != "1" {
		t.Fatalf("follow after EndWatches: %+v %v", st, r.header)
	}
	if r := do(t, ts, "GET", teamWidgets+"/w1/log", "", admin...); r.code != 200 {
		t.Fatalf("log without follow after EndWatches: %d %s", r.code, r.body)
	}
}

// A client that reads nothing does not pin a stream: each write has a
// deadline, and a failed write ends the host function's context.
func TestSubresourceStreamStalledReader(t *testing.T) {
	rec := &extRecorder{}
	api, ts := extServer(t, rec)
	api.writeTimeout.Store(int64(200 * time.Millisecond))
	res := widgetsWithCustom(t, rec)
	returned := make(chan error, 1)
	res.Subresources.Custom["flood"] = registry.Subresource{
		Stream: func(ctx context.Context, _ *registry.Request, w io.Writer) error {
			chunk := []byte(strings.Repeat("x", 64<<10) + "\n")
			for {
				if _, err := w.Write(chunk); err != nil {
					returned <- err
					if ctx.Err() == nil {
						t.Error("the stream's context is still live after a failed write")
					}
					return err
				}
			}
		},
	}
	if err := api.Register(res); err != nil {
		t.Fatal(err)
	}
	createWidget(t, ts, "w1")
	openFollow(t, ts, teamWidgets+"/w1/flood?follow=true") // then read nothing
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("no write error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled reader pins the stream")
	}
}

// HEAD of a stream answers the headers without running the stream.
func TestSubresourceStreamHead(t *testing.T) {
	rec := &extRecorder{}
	_, ts := extServer(t, rec)
	createWidget(t, ts, "w1")
	r := do(t, ts, "HEAD", teamWidgets+"/w1/log?follow=true", "", admin...)
	if r.code != 200 || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || len(r.body) != 0 {
		t.Fatalf("HEAD log: %d %v %q", r.code, r.header, r.body)
	}
	if r := do(t, ts, "HEAD", teamWidgets+"/nope/log", "", admin...); r.code != 404 {
		t.Fatalf("HEAD log of a missing widget: %d", r.code)
	}
	if n := rec.calls(); n != 0 {
		t.Fatalf("HEAD ran the stream %d times", n)
	}
}

// Only watches and follow streams of subresources that declare a Stream
// are long-running (exempt from the in-flight limit and the timeout):
// ?follow=true or ?watch=true elsewhere is an ordinary request.
func TestLongRunningDecidedOnTheRoute(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	entered, release := make(chan struct{}), make(chan struct{})
	api, err := New(context.Background(), Config{
		Storage: store, AllowAnonymous: true, DefaultNamespaces: []string{"team"},
		FlowControl: FlowControl{Levels: []PriorityLevel{{Name: "all", Seats: 1, QueueLength: -1}}},
		Authorizer: auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Resource == "configmaps" && a.Name == "held" {
				entered <- struct{}{}
				<-release // hold the only read slot
			}
			return auth.Allow, "", nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	rec := &extRecorder{}
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgetsWithCustom(t, rec)} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	if r := do(t, ts, "POST", teamWidgets, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	held := make(chan struct{})
	go func() { defer close(held); do(t, ts, "GET", "/api/v1/namespaces/team/configmaps/held", "") }()
	<-entered
	for _, p := range []string{
		"/api/v1/configmaps?follow=true",
		"/api/v1/namespaces/team/configmaps?follow=true",
		teamWidgets + "/w1/health?follow=true",
		teamWidgets + "/w1/health?watch=true",
		teamWidgets + "/w1/status?watch=true",
		teamWidgets + "?follow=true",
	} {
		do(t, ts, "GET", p, "").status(t, 429, meta.StatusReasonTooManyRequests)
	}
	// Watches and follow streams pass.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"/api/v1/configmaps?watch=true", teamWidgets + "/w1/log?follow=true"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+p, nil)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("%s while the limit is reached: %d", p, resp.StatusCode)
		}
		resp.Body.Close()
	}
	close(release)
	<-held
}
