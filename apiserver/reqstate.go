package apiserver

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/kapi-dev/kapi/apiserver/auth"
)

// requestState is what the middleware chain learns about a request, kept in
// one place that is also the request's context: begin makes it, the first
// link of the chain, and puts it in the request once. The links after it
// fill it in (authenticate the user, serveResource the request info)
// instead of each deriving a context and copying the request, which was
// three copies, five allocations and a longer chain for every Value lookup.
//
// As a context it answers for the request info (auditInfoKey), the
// long-running note of the metrics (longRunningKey) and the authenticated
// user (auth.UserContextKey); everything else is its parent's. A request
// that the request limit covers (Config.RequestTimeout, not long-running,
// not a health check) has its deadline from the start, through the lazy
// deadlineCtx.
type requestState struct {
	dl    deadlineCtx // dl.Context is the parent; a deadline only when timed
	timed bool

	info requestInfo
	rec  statusRecorder // the recorder of the first link that wants one
	user *auth.User
	// long marks a watch or a follow stream (isLongRunning), asked once.
	long bool
	// path and raw are the path relative to where kapi is mounted, as is
	// and as chi routes on it (routePaths), found once: it is a walk up
	// net/http's contexts.
	path, raw string
	// query is the parsed query string and queryErr why it does not parse
	// (queryValues), parsed once, when first asked.
	query     url.Values
	queryErr  error
	queryDone bool
	// noteLong is the metrics' long-running count, for noteLongRunning.
	noteLong func(requestInfo)
}

type requestStateKey struct{}

// begin puts a requestState in the request's context.
func (s *Server) begin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &requestState{}
		st.path, st.raw = routePaths(r)
		st.long = s.isLongRunning(r, st)
		st.dl.Context = r.Context()
		if t := s.cfg.RequestTimeout; t > 0 && !st.long && !isPublicPath(st.path) {
			st.timed, st.dl.deadline = true, time.Now().Add(t)
			defer st.dl.release()
			setIODeadlines(w, r, st.dl.deadline, min(t, responseWriteGrace))
		}
		next.ServeHTTP(w, r.WithContext(st))
	})
}

// stateOf returns r's requestState. Every request the router or ServeHTTP
// hands to the chain has one (begin comes first); a handler called some
// other way gets a detached one, so that nothing needs to check.
func stateOf(r *http.Request) *requestState {
	if st, ok := r.Context().Value(requestStateKey{}).(*requestState); ok {
		return st
	}
	st := &requestState{}
	st.path, st.raw = routePaths(r)
	st.dl.Context = r.Context()
	return st
}

// recorder returns a statusRecorder writing to w: w itself when it is one,
// else the state's own the first time.
func (st *requestState) recorder(w http.ResponseWriter) *statusRecorder {
	if rec, ok := w.(*statusRecorder); ok {
		return rec
	}
	if st.rec.ResponseWriter == nil {
		st.rec.ResponseWriter = w
		return &st.rec
	}
	return &statusRecorder{ResponseWriter: w}
}

func (st *requestState) Deadline() (time.Time, bool) {
	if st.timed {
		return st.dl.Deadline()
	}
	return st.dl.Context.Deadline()
}

func (st *requestState) Done() <-chan struct{} {
	if st.timed {
		return st.dl.Done()
	}
	return st.dl.Context.Done()
}

func (st *requestState) Err() error {
	if st.timed {
		return st.dl.Err()
	}
	return st.dl.Context.Err()
}

func (st *requestState) Value(key any) any {
	switch key.(type) {
	case requestStateKey:
		return st
	case auditInfoKey:
		return &st.info
	case longRunningKey:
		if st.noteLong != nil {
			return st.noteLong
		}
		return nil
	case auth.UserContextKey:
		if st.user != nil {
			return st.user
		}
	}
	if st.timed {
		return st.dl.Value(key)
	}
	return st.dl.Context.Value(key)
}

func (st *requestState) String() string { return "apiserver.requestState" }

var _ context.Context = (*requestState)(nil)
