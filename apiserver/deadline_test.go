package apiserver

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

type ctxKey struct{}

// withRequestDeadline is a deadlineCtx as the request state sets one up.
func withRequestDeadline(parent context.Context, timeout time.Duration) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: time.Now().Add(timeout)}
}

// TestDeadlineCtxAsWithDeadline checks the request deadline context answers
// as context.WithDeadline would, whether or not its Done channel was made.
func TestDeadlineCtxAsWithDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")

	t.Run("before the deadline", func(t *testing.T) {
		c := withRequestDeadline(parent, time.Hour)
		defer c.release()
		if err := c.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
		if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Fatalf("Deadline = %v, %v", d, ok)
		}
		if c.Value(ctxKey{}) != "v" {
			t.Fatal("Value does not reach the parent")
		}
		if c.child.Load() != nil {
			t.Fatal("Err, Deadline or Value made the timer")
		}
		select {
		case <-c.Done():
			t.Fatal("Done closed before the deadline")
		default:
		}
		if c.Value(ctxKey{}) != "v" || c.Err() != nil {
			t.Fatal("the made child answers differently")
		}
	})

	t.Run("deadline passes while waiting on Done", func(t *testing.T) {
		c := withRequestDeadline(parent, 20*time.Millisecond)
		defer c.release()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after the deadline")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", c.Err())
		}
	})

	t.Run("deadline passed before anything asked", func(t *testing.T) {
		c := withRequestDeadline(parent, time.Millisecond)
		defer c.release()
		time.Sleep(5 * time.Millisecond)
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Err reported the deadline but Done is open")
		}
		if cause := context.Cause(c); !errors.Is(cause, context.DeadlineExceeded) {
			t.Fatalf("Cause = %v", cause)
		}
		if c.Value(ctxKey{}) != "v" {
			t.Fatal("Value does not reach the parent through the child")
		}
	})

	t.Run("parent canceled", func(t *testing.T) {
		for _, madeFirst := range []bool{false, true} {
			p, cancel := context.WithCancel(parent)
			c := withRequestDeadline(p, time.Hour)
			if madeFirst {
				c.Done()
			}
			cancel()
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("made first %v: Err = %v", madeFirst, c.Err())
			}
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("made first %v: Done not closed after the parent's cancel", madeFirst)
			}
			c.release()
		}
	})

	t.Run("earlier parent deadline", func(t *testing.T) {
		p, cancel := context.WithTimeout(parent, time.Minute)
		defer cancel()
		c := withRequestDeadline(p, time.Hour)
		defer c.release()
		if d, _ := c.Deadline(); time.Until(d) > time.Minute {
			t.Fatalf("Deadline = %v, after the parent's", d)
		}
	})

	t.Run("release before anything asked", func(t *testing.T) {
		c := withRequestDeadline(parent, time.Hour)
		c.release()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after release = %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after release")
		}
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run for a released context")
		}
	})

	t.Run("release racing Done", func(t *testing.T) {
		for range 100 {
			c := withRequestDeadline(parent, time.Hour)
			var done <-chan struct{}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); done = c.Done() }()
			c.release()
			wg.Wait()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("a Done made while releasing stayed open")
			}
		}
	})

	t.Run("release cancels a made child", func(t *testing.T) {
		c := withRequestDeadline(parent, time.Hour)
		done := c.Done()
		c.release()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("release left Done open")
		}
	})

	t.Run("concurrent use", func(t *testing.T) {
		c := withRequestDeadline(parent, 10*time.Millisecond)
		defer c.release()
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 8)
		for i := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Err()
				chans[i] = c.Done()
			}()
		}
		wg.Wait()
		for _, ch := range chans[1:] {
			if ch != chans[0] {
				t.Fatal("Done made more than one channel")
			}
		}
		<-chans[0]
	})
}

// stuckGets is a store whose gets of keys containing "stuck" wait for their
// context to end.
type stuckGets struct{ storage.Store }

func (s stuckGets) Get(ctx context.Context, key []byte, rev int64) (storage.KeyValue, error) {
	if strings.Contains(string(key), "stuck") {
		<-ctx.Done()
		return storage.KeyValue{}, ctx.Err()
	}
	return s.Store.Get(ctx, key, rev)
}

// TestRequestTimeout: a request that waits on its context past
// Config.RequestTimeout is answered 504, and one that does not is not
// disturbed.
func TestRequestTimeout(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api := newConfigMapServer(t, Config{Storage: stuckGets{store}, RequestTimeout: 200 * time.Millisecond})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	if got := do(t, ts, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"fine"}}`); got.code != 201 {
		t.Fatalf("POST: %d %s", got.code, got.body)
	}
	start := time.Now()
	resp := do(t, ts, "GET", "/api/v1/namespaces/default/configmaps/stuck", "")
	resp.status(t, 504, meta.StatusReasonTimeout)
	if took := time.Since(start); took < 200*time.Millisecond || took > 10*time.Second {
		t.Errorf("answered after %v", took)
	}
	if got := do(t, ts, "GET", "/api/v1/namespaces/default/configmaps/fine", ""); got.code != 200 {
		t.Errorf("GET fine: %d %s", got.code, got.body)
	}
}
