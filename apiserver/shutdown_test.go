package apiserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// TestGracefulShutdown runs http.Server.Shutdown with EndWatches registered
// while a watch is open and a slow create is in flight: the watch stream
// ends cleanly at once, new connections are refused, the create completes,
// and Shutdown returns once it has.
func TestGracefulShutdown(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	entered, release := make(chan struct{}), make(chan struct{})
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true,
		Authorizer: auth.AuthorizerFunc(func(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
			if a.Verb == "create" && a.Resource == "configmaps" {
				close(entered)
				<-release // hold the request in flight
			}
			return auth.Allow, "", nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(api)
	ts.Config.RegisterOnShutdown(api.EndWatches)
	ts.Start()
	t.Cleanup(ts.Close)
	var releaseOnce sync.Once
	releaseCreate := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseCreate) // before ts.Close, which waits for the create
	client := ts.Client()

	// A watch, open.
	wresp, err := client.Get(ts.URL + cmPath + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer wresp.Body.Close()
	if wresp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", wresp.StatusCode)
	}
	watchEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, wresp.Body)
		watchEnded <- err
	}()

	// A slow create, in flight.
	type result struct {
		code int
		err  error
	}
	created := make(chan result, 1)
	go func() {
		resp, err := client.Post(ts.URL+cmPath, "application/json", strings.NewReader(`{"metadata":{"name":"slow"}}`))
		if err != nil {
			created <- result{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		created <- result{code: resp.StatusCode}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the create did not reach the server")
	}

	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdownDone <- ts.Config.Shutdown(ctx)
	}()

	// The watch ends cleanly (end of stream, no error) without waiting for
	// the create.
	select {
	case err := <-watchEnded:
		if err != nil {
			t.Fatalf("watch stream ended with %v, want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end on shutdown")
	}
	// No new connections (poll: the listener closes as Shutdown starts).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get(ts.URL + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("new connections still accepted during shutdown")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Shutdown waits for the create.
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	releaseCreate()
	select {
	case r := <-created:
		if r.err != nil || r.code != http.StatusCreated {
			t.Fatalf("in-flight create: code %d, err %v; want 201", r.code, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight create did not finish")
	}
	select {
	case err := <-shutdownDone:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last request")
	}
}

// TestEndWatchesRefusesNewWatches: after EndWatches a watch is answered 503
// with Retry-After; other requests still work.
func TestEndWatchesRefusesNewWatches(t *testing.T) {
	api, ts := newTestServer(t)
	api.EndWatches()
	api.EndWatches() // idempotent
	r := do(t, ts, "GET", cmPath+"?watch=true", "")
	r.status(t, http.StatusServiceUnavailable, "ServiceUnavailable")
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("503 without Retry-After: %v", r.header)
	}
	if r := do(t, ts, "GET", cmPath, ""); r.code != http.StatusOK {
		t.Fatalf("list after EndWatches: %d", r.code)
	}
}
