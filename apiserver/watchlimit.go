package apiserver

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Defaults of Config.MaxWatchesPerUser and Config.MaxWatches.
const (
	// defaultMaxWatchesPerUser: a controller-runtime manager holds one
	// watch per type it caches, kubectl --watch one; a thousand leaves room
	// for many managers under one identity.
	defaultMaxWatchesPerUser = 1000
	// defaultMaxWatches bounds every user's watches together: about 57 KB
	// each when idle over HTTP/1.1 with TLS (two goroutines, buffers), so
	// about 600 MB in all. Half the open-file limit when that is lower.
	defaultMaxWatches = 10000
)

// watchRequestBytes is the memory held for a watch's life that one slot
// covers: net/http keeps the request line and headers, the watch keeps its
// parsed selectors, so a watch takes one more slot for every
// watchRequestBytes of them, as a large body takes more seats
// (FlowControl.SeatBytes). A user's watches then hold at most
// MaxWatchesPerUser × 64 KiB of them.
const watchRequestBytes = 64 << 10

// watchLimits counts the open watches per user and in total, and refuses a
// watch past MaxWatchesPerUser (unless its user is exempt from flow
// control) or past MaxWatches (unless exempt).
type watchLimits struct {
	perUser, total int // <= 0: no bound

	mu     sync.Mutex
	open   int            // slots held by every watch
	byUser map[string]int // slots held by each user's watches; no zero entries

	refused *prometheus.CounterVec // nil without metrics
}

func newWatchLimits(cfg Config) *watchLimits {
	return &watchLimits{perUser: cfg.MaxWatchesPerUser, total: cfg.MaxWatches, byUser: map[string]int{}}
}

// acquire takes n slots for a watch of user (the flow-control identity) and
// returns their release, or a 429 StatusError when a bound is reached. An
// exempt user's watches are counted in the total but never refused.
func (l *watchLimits) acquire(user string, n int, exempt bool) (release func(), _ error) {
	l.mu.Lock()
	reason := ""
	switch {
	case exempt:
	case l.perUser > 0 && l.byUser[user]+n > l.perUser:
		reason = "per-user"
	case l.total > 0 && l.open+n > l.total:
		reason = "total"
	}
	if reason != "" {
		l.mu.Unlock()
		if l.refused != nil {
			l.refused.WithLabelValues(reason).Inc()
		}
		return nil, tooManyWatches(reason, l.perUser, l.total)
	}
	l.open += n
	l.byUser[user] += n
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { l.release(user, n) }) }, nil
}

func (l *watchLimits) release(user string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open -= n
	if l.byUser[user] -= n; l.byUser[user] <= 0 {
		delete(l.byUser, user)
	}
}

// counts returns the slots held in all and by user.
func (l *watchLimits) counts(user string) (total, byUser int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.byUser[user]
}

// tooManyWatches is the 429 of a refused watch; client-go retries after
// Retry-After.
func tooManyWatches(reason string, perUser, total int) *meta.StatusError {
	se := newTooManyRequests()
	if reason == "per-user" {
		se.Status.Message = fmt.Sprintf("Too many watches: this user has %d open (a watch counts once more per %d KiB of request line, headers and parsed selectors), please try again later.", perUser, watchRequestBytes>>10)
	} else {
		se.Status.Message = fmt.Sprintf("Too many watches: the server has %d open, please try again later.", total)
	}
	se.RetryAfter = 5
	se.Status.Details.RetryAfterSeconds = 5
	return se
}

// watchSlots is the slots a watch takes: one, and one more per
// watchRequestBytes of what it holds for its life: its request line (twice:
// the query's values are unescaped copies), its headers and its parsed
// selectors.
func watchSlots(r *http.Request, opts registry.WatchOptions) int {
	n := 2 * len(r.RequestURI)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	for _, sel := range []any{opts.Labels, opts.Fields} {
		if f, ok := sel.(interface{ Footprint() int }); ok {
			n += f.Footprint()
		}
	}
	return 1 + n/watchRequestBytes
}

// register adds kapi_watches_refused_total and kapi_watches_open.
func (l *watchLimits) register(reg prometheus.Registerer) error {
	l.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kapi_watches_refused_total",
		Help: "Watches refused with 429 because a bound on open watches was reached, by bound (per-user, total).",
	}, []string{"limit"})
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kapi_watch_slots_open",
		Help: "Watch slots held by the open watches (one per watch, more for a watch with a very large request line).",
	}, func() float64 { total, _ := l.counts(""); return float64(total) })
	for _, c := range []prometheus.Collector{l.refused, open} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// admitWatch takes the slots of a watch request for its user, and gives
// the watch its user's room for frames and storage reads (opts.Room);
// exempt when flow control exempts the request. release is called once
// the watch is stopped.
func (s *Server) admitWatch(r *http.Request, opts *registry.WatchOptions) (release func(), _ error) {
	st := stateOf(r)
	user := ""
	if st.user != nil {
		user = st.user.Name
	}
	exempt := s.flow.classify(st.user, r).Exempt
	releaseSlots, err := s.watches.acquire(user, watchSlots(r, *opts), exempt)
	if err != nil || exempt {
		return releaseSlots, err
	}
	room, leave := s.watchBytes.join(user)
	if room == nil {
		return releaseSlots, nil
	}
	opts.Room = room
	return func() { leave(); releaseSlots() }, nil
}
