package apiserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
)

// TestRequestState: the state answers as the contexts it replaces would
// (request info, user, long-running note, the parent's values and
// cancellation), with the request deadline only when the limit covers the
// request.
func TestRequestState(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()

	st := &requestState{}
	st.dl.Context = parent
	if got := st.Value(ctxKey{}); got != "v" {
		t.Errorf("parent value = %v", got)
	}
	if p, ok := st.Value(auditInfoKey{}).(*requestInfo); !ok || p != &st.info {
		t.Errorf("request info = %v", p)
	}
	if u, ok := auth.UserFrom(st); ok {
		t.Errorf("user before authentication = %v", u)
	}
	u := &auth.User{Name: "alice"}
	st.user = u
	if got, ok := auth.UserFrom(st); !ok || got != u {
		t.Errorf("user = %v, %v", got, ok)
	}
	if fn := st.Value(longRunningKey{}); fn != nil {
		t.Errorf("long-running note before instrument: %v", fn)
	}
	if _, ok := st.Deadline(); ok {
		t.Errorf("untimed state has a deadline")
	}
	if st.Err() != nil || st.Done() != parent.Done() {
		t.Errorf("untimed state: Err %v, Done not the parent's", st.Err())
	}
	cancel()
	if !errors.Is(st.Err(), context.Canceled) {
		t.Errorf("Err after the parent's cancel = %v", st.Err())
	}

	// A user the parent carries shows through until authentication.
	bob := &auth.User{Name: "bob"}
	st2 := &requestState{}
	st2.dl.Context = auth.WithUser(context.Background(), bob)
	if got, _ := auth.UserFrom(st2); got != bob {
		t.Errorf("parent's user = %v", got)
	}

	timed := &requestState{timed: true}
	timed.dl.Context, timed.dl.deadline = context.Background(), time.Now().Add(20*time.Millisecond)
	if d, ok := timed.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
		t.Errorf("Deadline = %v, %v", d, ok)
	}
	select {
	case <-timed.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("deadline did not end the context")
	}
	if !errors.Is(timed.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v", timed.Err())
	}
	timed.dl.release()
}

// TestBeginTimesOnlyLimitedRequests: begin gives a request the deadline of
// the request limit unless it is long-running or a health check, and the
// chain's links find the same state.
func TestBeginTimesOnlyLimitedRequests(t *testing.T) {
	api := newConfigMapServer(t, Config{RequestTimeout: time.Minute})
	for _, tc := range []struct {
		target string
		timed  bool
	}{
		{"/api/v1/namespaces/default/configmaps", true},
		{"/api/v1/namespaces/default/configmaps?watch=true", false},
		{"/healthz", false},
	} {
		var seen *requestState
		h := api.begin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = stateOf(r)
			_, hasDeadline := r.Context().Deadline()
			if hasDeadline != tc.timed {
				t.Errorf("%s: deadline %v, want %v", tc.target, hasDeadline, tc.timed)
			}
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", tc.target, nil))
		if seen == nil || seen.timed != tc.timed {
			t.Errorf("%s: state %+v", tc.target, seen)
		}
	}
}
