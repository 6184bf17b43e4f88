package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/internal/flowcontrol"
)

// FlowControl shares the server's capacity for requests that are not
// long-running between users, after kube-apiserver's API Priority and
// Fairness: each request is classified into a priority level; a level has
// seats, shared fairly between the users (flows) of its requests; a user
// holds at most SeatsPerFlow of them, and what does not run at once waits
// in its user's queue. So one user, however many or slow its requests,
// cannot take the capacity of the others.
type FlowControl struct {
	// Levels are tried in order: a request belongs to the first whose Match
	// accepts it, or to the last one. Default (DefaultPriorityLevels):
	// system:masters exempt, then mutating requests with
	// MaxMutatingRequestsInFlight seats, then the rest with
	// MaxRequestsInFlight.
	Levels []PriorityLevel
	// SeatBytes: a request takes one more seat for every SeatBytes of its
	// body's declared length (a body of unknown length counts as the size
	// limit), because decoding holds memory in proportion to the body.
	// Default 256 KiB.
	SeatBytes int64
	// MaxWait bounds how long a request waits in its queue before a 429.
	// Default: a quarter of RequestTimeout, as kube-apiserver.
	MaxWait time.Duration
}

// PriorityLevel is one class of requests with its own seats.
type PriorityLevel struct {
	// Name labels the level's metrics (priority_level).
	Name string
	// Match selects the level's requests, from the authenticated user and
	// the request (its body not read). Nil matches every request.
	Match func(u *auth.User, r *http.Request) bool
	// Exempt requests run at once and take no seat.
	Exempt bool
	// Seats bound what the level's requests take at once (a request takes
	// one seat, more for a large body). Required unless Exempt.
	Seats int
	// SeatsPerFlow bounds the seats one user holds at once. Default: a
	// quarter of Seats, at least 1.
	SeatsPerFlow int
	// QueueLength bounds the requests one user has waiting; beyond it the
	// answer is 429. The level holds at most four times Seats waiting in
	// all, and when that is full the user with the longest queue gives its
	// newest place to a user with a shorter one. Default 50, as
	// kube-apiserver; negative: no queue.
	QueueLength int
}

// DefaultPriorityLevels are the levels a Server uses unless
// FlowControl.Levels is set: members of system:masters are exempt, as in
// kube-apiserver; mutating requests share mutating seats, the rest
// readOnly seats.
func DefaultPriorityLevels(readOnly, mutating int) []PriorityLevel {
	return []PriorityLevel{
		{Name: "exempt", Exempt: true, Match: func(u *auth.User, _ *http.Request) bool { return u != nil && u.InGroup(auth.GroupMasters) }},
		{Name: "mutating", Seats: mutating, Match: func(_ *auth.User, r *http.Request) bool { return isMutating(r.Method) }},
		{Name: "readOnly", Seats: readOnly},
	}
}

func isMutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// flowControl is the running form of a FlowControl.
type flowControl struct {
	levels    []priorityLevel
	seatBytes int64
	maxBody   int64
	maxWait   time.Duration

	rejected *prometheus.CounterVec   // nil without metrics
	waited   *prometheus.HistogramVec // nil without metrics
}

type priorityLevel struct {
	PriorityLevel
	level *flowcontrol.Level // nil when exempt
}

func newFlowControl(cfg Config) (*flowControl, error) {
	fc := cfg.FlowControl
	levels := fc.Levels
	if levels == nil {
		levels = DefaultPriorityLevels(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight)
	}
	if len(levels) == 0 {
		return nil, errors.New("apiserver: FlowControl.Levels is empty")
	}
	f := &flowControl{seatBytes: fc.SeatBytes, maxBody: cfg.MaxRequestBodyBytes, maxWait: fc.MaxWait}
	if f.seatBytes <= 0 {
		f.seatBytes = 256 << 10
	}
	if f.maxWait <= 0 {
		f.maxWait = cfg.RequestTimeout / 4
	}
	for _, pl := range levels {
		l := priorityLevel{PriorityLevel: pl}
		if !pl.Exempt {
			if pl.Seats <= 0 {
				return nil, fmt.Errorf("apiserver: priority level %q has no seats", pl.Name)
			}
			lim := flowcontrol.Limits{Seats: pl.Seats, SeatsPerFlow: pl.SeatsPerFlow, QueueLength: pl.QueueLength}
			if lim.SeatsPerFlow == 0 {
				lim.SeatsPerFlow = max(pl.Seats/4, 1)
			}
			if lim.QueueLength == 0 {
				lim.QueueLength = 50
			}
			l.level = flowcontrol.NewLevel(lim)
		}
		f.levels = append(f.levels, l)
	}
	return f, nil
}

// classify returns the level of a request.
func (f *flowControl) classify(u *auth.User, r *http.Request) *priorityLevel {
	for i := range f.levels {
		if m := f.levels[i].Match; m == nil || m(u, r) {
			return &f.levels[i]
		}
	}
	return &f.levels[len(f.levels)-1]
}

// width is the seats a request asks for: one, and one more per seatBytes of
// its body.
func (f *flowControl) width(r *http.Request) int {
	n := r.ContentLength
	switch {
	case r.Body == nil || r.Body == http.NoBody || n == 0:
		return 1
	case n < 0 || n > f.maxBody:
		n = f.maxBody
	}
	return 1 + int(n/f.seatBytes)
}

// limit runs a request when its level has seats for it, fairly between
// users; a request that cannot wait, or waited too long, is a 429 with
// Retry-After. Watches, follow streams and health checks are not limited.
func (s *Server) limit(next http.Handler) http.Handler {
	f := s.flow
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := stateOf(r)
		if st.long || isPublicPath(st.path) {
			next.ServeHTTP(w, r)
			return
		}
		pl := f.classify(st.user, r)
		if pl.Exempt {
			next.ServeHTTP(w, r)
			return
		}
		flowID := ""
		if st.user != nil {
			flowID = st.user.Name
		}
		start := time.Now()
		t, queued, err := pl.level.Acquire(r.Context(), flowID, f.width(r), f.maxWait)
		if queued && f.waited != nil {
			f.waited.WithLabelValues(pl.Name, strconv.FormatBool(err == nil)).Observe(time.Since(start).Seconds())
		}
		if err != nil {
			if f.rejected != nil {
				reason := "time-out"
				if errors.Is(err, flowcontrol.ErrQueueFull) {
					reason = "queue-full"
				}
				f.rejected.WithLabelValues(pl.Name, reason).Inc()
			}
			s.writeError(w, r, newTooManyRequests())
			return
		}
		defer t.Release()
		next.ServeHTTP(w, r)
	})
}

// register adds the flow control's metrics, named as kube-apiserver's.
func (f *flowControl) register(reg prometheus.Registerer) error {
	f.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apiserver_flowcontrol_rejected_requests_total",
		Help: "Number of requests rejected by flow control, by priority level and reason (queue-full, time-out).",
	}, []string{"priority_level", "reason"})
	f.waited = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apiserver_flowcontrol_request_wait_duration_seconds",
		Help:    "Time requests spent waiting in their queue, by priority level and whether they then ran.",
		Buckets: []float64{0.001, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30},
	}, []string{"priority_level", "execute"})
	cs := []prometheus.Collector{f.rejected, f.waited}
	for _, pl := range f.levels {
		if pl.level == nil {
			continue
		}
		lv, labels := pl.level, prometheus.Labels{"priority_level": pl.Name}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_executing_seats", Help: "Seats taken by the requests running, by priority level.", ConstLabels: labels},
				func() float64 { return float64(lv.Stats().Used) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_inqueue_requests", Help: "Requests waiting in queues, by priority level.", ConstLabels: labels},
				func() float64 { return float64(lv.Stats().Waiting) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_nominal_limit_seats", Help: "Seats of each priority level.", ConstLabels: labels},
				func() float64 { return float64(lv.Limits().Seats) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
