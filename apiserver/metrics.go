package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/watch"
)

// metrics are the server's Prometheus metrics, named and labelled as
// kube-apiserver names its equivalents. They are registered on the
// Registerer the host passes in Config.Metrics, never on the global one.
type metrics struct {
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	inflight        *prometheus.GaugeVec
	longRunning     *prometheus.GaugeVec
	storageDuration *prometheus.HistogramVec
	storageObjects  *prometheus.GaugeVec

	// The children every request uses, resolved once: a vector's
	// WithLabelValues validates, hashes and looks up its labels under a
	// lock each time, three times per request.
	inflightReadOnly, inflightMutating prometheus.Gauge
	storageOps                         map[storageOp]prometheus.Observer
	perRequest                         sync.Map // requestLabels -> *requestMetrics
	cached                             atomic.Int64
}

// storageOp is the label pair of kapi_storage_operation_duration_seconds.
type storageOp struct{ op, result string }

// requestLabels are the labels of a request's count and latency, and
// whether it is long-running (whose latency is not recorded).
type requestLabels struct {
	verb, group, version, resource, subresource, scope string
	code                                               int
	long                                               bool
}

// requestMetrics are the children of one label set; duration is nil for a
// long-running request.
type requestMetrics struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// maxCachedLabelSets bounds the children cache. The label sets are bounded
// (see labelsOf), but by the registered resources, the codes
// and the verbs; past this many the vectors are asked directly.
const maxCachedLabelSets = 4096

// forRequest returns the children for l, resolving them on first use. The
// cache holds no label set the vectors do not hold themselves.
func (m *metrics) forRequest(l requestLabels) *requestMetrics {
	if rm, ok := m.perRequest.Load(l); ok {
		return rm.(*requestMetrics)
	}
	rm := &requestMetrics{
		count: m.requests.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, "apiserver", strconv.Itoa(l.code)),
	}
	if !l.long {
		rm.duration = m.requestDuration.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, "apiserver")
	}
	if m.cached.Load() >= maxCachedLabelSets {
		return rm
	}
	actual, loaded := m.perRequest.LoadOrStore(l, rm)
	if !loaded {
		m.cached.Add(1)
	}
	return actual.(*requestMetrics)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, group, version, resource, subresource, scope and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource, subresource and scope.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Number of requests currently executing, by kind (readOnly or mutating).",
		}, []string{"request_kind"}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Number of long-running requests (watches) currently open, by verb, group, version, resource and scope.",
		}, []string{"verb", "group", "version", "resource", "scope", "component"}),
		storageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kapi_storage_operation_duration_seconds",
			Help:    "Latency of storage operations in seconds, by operation (get, list, create, update, delete, watch) and result.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"operation", "result"}),
		storageObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_storage_objects",
			Help: "Number of stored objects at the time of last check, split by resource (resource.group).",
		}, []string{"resource"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.requestDuration, m.inflight, m.longRunning, m.storageDuration, m.storageObjects} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.inflightReadOnly = m.inflight.WithLabelValues("readOnly")
	m.inflightMutating = m.inflight.WithLabelValues("mutating")
	m.storageOps = make(map[storageOp]prometheus.Observer)
	for _, op := range []string{"get", "list", "create", "update", "delete"} {
		for _, result := range []string{"ok", "error"} {
			m.storageOps[storageOp{op, result}] = m.storageDuration.WithLabelValues(op, result)
		}
	}
	return m, nil
}

// instrument records request count, latency and in-flight gauges.
func (s *Server) instrument(next http.Handler) http.Handler {
	m := s.metrics
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := stateOf(r)
		info, long := &st.info, st.long
		if !long {
			g := m.inflightReadOnly
			switch r.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				g = m.inflightMutating
			}
			g.Inc()
			defer g.Dec()
		}
		rec := st.recorder(w)
		var lr prometheus.Gauge
		if long {
			// The request info is known only inside the handler; count the
			// watch once it is.
			defer func() {
				if lr != nil {
					lr.Dec()
				}
			}()
			st.noteLong = func(info requestInfo) {
				lr = m.longRunning.WithLabelValues(info.Verb, info.Group, info.Version, info.Resource, scopeOf(info), "apiserver")
				lr.Inc()
			}
		}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		rm := m.forRequest(labelsOf(r, info, code, long))
		rm.count.Inc()
		if rm.duration != nil {
			rm.duration.Observe(time.Since(start).Seconds())
		}
	})
}

// labelsOf returns the labels a request is counted under. Clients choose
// the URL and the method; to keep the label sets bounded, a method other
// than HTTP's standard ones is "other" (as kube-apiserver counts unknown
// verbs), a resource that is not registered is left out, and so is the
// subresource of a request answered 404.
func labelsOf(r *http.Request, info *requestInfo, code int, long bool) requestLabels {
	l := requestLabels{verb: info.Verb, group: info.Group, version: info.Version, resource: info.Resource,
		subresource: info.Subresource, scope: scopeOf(*info), code: code, long: long}
	if l.verb == "" {
		l.verb, l.scope = standardMethod(r.Method), ""
	}
	if l.resource != "" && !info.registered {
		l.group, l.version, l.resource, l.subresource, l.scope = "", "", "", "", ""
	}
	if code == http.StatusNotFound {
		l.subresource = ""
	}
	return l
}

// standardMethod is method when it is one of HTTP's, else "other".
func standardMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

type longRunningKey struct{}

// noteLongRunning lets the metrics count an open watch.
func noteLongRunning(ctx context.Context, info requestInfo) {
	if fn, ok := ctx.Value(longRunningKey{}).(func(requestInfo)); ok {
		fn(info)
	}
}

func scopeOf(info requestInfo) string {
	switch {
	case info.Resource == "":
		return ""
	case info.Name != "":
		return "resource"
	case info.Namespace != "":
		return "namespace"
	}
	return "cluster"
}

// countObjects keeps apiserver_storage_objects current, counting once a
// minute (as kube-apiserver does) until ctx ends.
func (s *Server) countObjects(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		for _, r := range s.reg.Resources() {
			st, ok := s.reg.Store(r.GroupVersionResource())
			if !ok || r.Virtual != nil {
				continue
			}
			if n, err := st.Count(ctx); err == nil {
				s.metrics.storageObjects.WithLabelValues(r.GroupResource().String()).Set(float64(n))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// instrumentedStore times every storage operation.
type instrumentedStore struct {
	storage.Store
	m *metrics
}

func (s instrumentedStore) observe(op string, start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o, ok := s.m.storageOps[storageOp{op, result}]
	if !ok {
		o = s.m.storageDuration.WithLabelValues(op, result)
	}
	o.Observe(time.Since(start).Seconds())
}

func (s instrumentedStore) Get(ctx context.Context, key []byte, rev int64) (storage.KeyValue, error) {
	start := time.Now()
	kv, err := s.Store.Get(ctx, key, rev)
	s.observe("get", start, ignoreNotFound(err))
	return kv, err
}

func (s instrumentedStore) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	start := time.Now()
	res, err := s.Store.List(ctx, opts)
	s.observe("list", start, err)
	return res, err
}

func (s instrumentedStore) Create(ctx context.Context, key, value []byte) (int64, error) {
	start := time.Now()
	rev, err := s.Store.Create(ctx, key, value)
	s.observe("create", start, err)
	return rev, err
}

func (s instrumentedStore) Update(ctx context.Context, key, value []byte, expected int64) (int64, error) {
	start := time.Now()
	rev, err := s.Store.Update(ctx, key, value, expected)
	s.observe("update", start, err)
	return rev, err
}

func (s instrumentedStore) Delete(ctx context.Context, key []byte, expected int64) (storage.KeyValue, int64, error) {
	start := time.Now()
	kv, rev, err := s.Store.Delete(ctx, key, expected)
	s.observe("delete", start, err)
	return kv, rev, err
}

func ignoreNotFound(err error) error {
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}

// registerBudgetMetrics exports the watch caches' memory budget.
func registerBudgetMetrics(r prometheus.Registerer, reg *registry.Registry) error {
	for _, m := range []struct {
		name, help string
		counter    bool
		stat       func(watch.BudgetStats) int64
	}{
		{"kapi_watch_cache_budget_bytes", "Memory budget of the watch caches' states (Settings.StateBytes).", false,
			func(s watch.BudgetStats) int64 { return s.Limit }},
		{"kapi_watch_cache_state_bytes", "Bytes of the watch caches' kept states and encodings, charged to the budget.", false,
			func(s watch.BudgetStats) int64 { return s.Used }},
		{"kapi_watch_cache_states", "Watch caches whose state is kept in memory.", false,
			func(s watch.BudgetStats) int64 { return int64(s.States) }},
		{"kapi_watch_cache_states_dropped", "Watch caches whose state is dropped to keep the budget (their reads come from storage).", false,
			func(s watch.BudgetStats) int64 { return int64(s.Dropped) }},
		{"kapi_watch_cache_state_drops_total", "States dropped to keep the budget.", true,
			func(s watch.BudgetStats) int64 { return s.Drops }},
		{"kapi_watch_cache_state_readmissions_total", "Dropped states brought back once the budget had room.", true,
			func(s watch.BudgetStats) int64 { return s.Readmit }},
		{"kapi_watch_cache_window_bytes", "Bytes of the watch caches' windows of recent events, together (bounded by Settings.WindowTotalBytes).", false,
			func(s watch.BudgetStats) int64 { return s.Windows }},
	} {
		value := func() float64 { return float64(m.stat(reg.WatchBudget())) }
		var c prometheus.Collector = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help}, value)
		if m.counter {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, value)
		}
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
