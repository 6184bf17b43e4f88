// Package apiserver is kapi's http.Handler: it serves the resource types of a
// registry.Registry with the URIs, verbs, status codes, discovery documents and
// OpenAPI documents of a Kubernetes API server, so that kubectl, client-go and
// controller-runtime work against it unchanged.
//
// Mount it anywhere:
//
//	api, err := apiserver.New(ctx, apiserver.Config{Storage: store})
//	...
//	router.Mount("/kube", api)            // chi
//	mux.Handle("/kube/", http.StripPrefix("/kube", api)) // net/http
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/discovery"
	"github.com/kapi-dev/kapi/apiserver/openapi"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/controllers"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/watch"
)

// Config configures a Server.
type Config struct {
	// Storage holds every object. Required.
	Storage storage.Store
	// Logger receives operational logs; request logs are at debug level.
	// Default: discard.
	Logger *slog.Logger
	// KeyPrefix is prepended to every storage key, so several APIs can share
	// one store. Default "/registry/".
	KeyPrefix string
	// MaxRequestBodyBytes limits request bodies (413 beyond). Default 3 MiB,
	// as kube-apiserver.
	MaxRequestBodyBytes int64
	// Version is reported by /version. Default: a Kubernetes 1.36 compatible
	// version marked as kapi.
	Version VersionInfo
	// DefaultNamespaces are created at start when missing. Default: "default",
	// "kube-system", "kube-public" and "kube-node-lease", as kube-apiserver.
	// Whatever this holds, "default", "kube-system" and "kube-public" may not be
	// deleted, as in Kubernetes.
	DefaultNamespaces []string
	// DisableControllers turns off the in-process controllers (namespace
	// cleanup and garbage collection, package controllers), e.g. where
	// another instance runs them.
	DisableControllers bool
	// ControllerResync is how often the controllers re-examine everything
	// even without changes. Default 30s.
	ControllerResync time.Duration
	// MigrationRate is how many objects a second the storage migrations of
	// types in several versions rewrite at most (controllers.Config).
	// Default 200.
	MigrationRate float64
	// Encryption, when set, seals the values of the sensitive types (core
	// secrets by default) in storage with AES-GCM under the host's keys
	// (registry.Encryption); New fails when a key is wrong or missing. The
	// controllers reseal values not under the first key (docs/security.md).
	Encryption *registry.Encryption
	// Elector, when set, runs the controllers only while this instance is
	// the leader among the instances serving one API (several servers over
	// one etcd: use storage/etcd's Store.Elector). Default: this instance
	// always leads.
	Elector Elector
	// Watch tunes the watch caches and watches (window, buffers, bookmark
	// interval, default watch timeout). The zero value is the default; see
	// watch.Settings.
	Watch watch.Settings

	// Authenticator identifies the user of each request (see package auth).
	// Requests it does not recognise are refused with 401 unless
	// AllowAnonymous is set. /healthz, /livez, /readyz and /version need no
	// credentials.
	Authenticator auth.Authenticator
	// AllowAnonymous lets requests without credentials in as
	// system:anonymous (group system:unauthenticated). Off by default.
	AllowAnonymous bool
	// Authorizer decides every request, dry-run requests exactly as real
	// ones. Default: every request that passed authentication is allowed.
	// When it is an auth.RulesLister, `kubectl auth can-i --list` shows its
	// rules; otherwise the list is marked incomplete.
	Authorizer auth.Authorizer
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight are the seats of
	// the default priority levels (FlowControl): what read-only and
	// mutating requests of users outside system:masters take at once,
	// shared fairly between users, with a queue per user and 429 with
	// Retry-After beyond. Defaults 400 and 200, as kube-apiserver; watches
	// are not counted.
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	// FlowControl classifies requests into priority levels and shares each
	// level's seats fairly between users. The zero value is the default
	// levels; see FlowControl.
	FlowControl FlowControl
	// MaxWatchesPerUser bounds the watches one user (as flow control
	// identifies users) has open at once; past it a watch is refused with
	// 429 and Retry-After. Users of an exempt priority level
	// (system:masters by default) are not bounded. A watch whose request
	// line and headers take more than 64 KiB counts once more per 64 KiB:
	// they are held for the watch's life. Default 1,000; negative: no bound.
	MaxWatchesPerUser int
	// MaxWatches bounds the watches of all users together, counted the same
	// way; exempt users' watches count but are never refused. Default
	// 10,000, or half the process's open-file limit when that is lower;
	// negative: no bound.
	MaxWatches int
	// MaxWatchBytesPerUser bounds the memory of the large frames one user's
	// watches encode each for itself alone (a Table watch's first frame,
	// events replayed from storage history, initial events the watch cache
	// does not keep) and have not written yet, and of what they read from
	// storage (pages of initial events, history replays): a client that
	// stops reading holds its batch until the write times out. A watch
	// without room waits for it (see watch.Room). Users of an exempt
	// priority level are not bounded. Default 64 MiB; negative: no bound.
	MaxWatchBytesPerUser int64
	// RequestTimeout bounds requests that are not long-running: reading
	// the body, handling and writing the response (504 beyond, or the
	// connection is closed when the response was under way). Default 60s,
	// as kube-apiserver.
	RequestTimeout time.Duration
	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes are for the
	// http.Server that serves the handler, which a handler cannot set:
	// ConfigureHTTPServer applies them. Defaults 32s, 90s and 1 MiB, as
	// kube-apiserver.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// FutureRevisionWait is how long a read at a resourceVersion newer than
	// the store's waits before a 504 with Retry-After. Default 3s, as
	// kube-apiserver.
	FutureRevisionWait time.Duration
	// ProtobufCacheBytes bounds the cache of protobuf encodings: objects of
	// types with a protobuf message are stored as JSON, and each object
	// version is transcoded once for all the protobuf lists and gets that
	// return it. Default 32 MiB; negative: no cache.
	ProtobufCacheBytes int64
	// Audit, when set, receives one record per request.
	Audit AuditSink
	// Admission hooks run for every type, before each type's own
	// (registry.Resource.Admission); like those, they see main-resource
	// requests only unless they select subresources
	// (registry.AdmissionHook.Subresources).
	Admission []registry.AdmissionHook
	// Metrics, when set, is where the server registers its Prometheus
	// metrics (request counts and latency, in-flight requests, watches,
	// storage latency, object counts). Serve it with promhttp yourself.
	Metrics prometheus.Registerer
	// NonResourceHandlers are served at their paths (exact, as "/metrics")
	// behind the same authentication, flow control and authorization as
	// discovery: a request is authorized as verb get (the method, lower
	// case, for others) on its path, so grant it with nonResourceURLs.
	// Serve Prometheus metrics this way, not beside the handler.
	NonResourceHandlers map[string]http.Handler
	// TracerProvider, when set, traces every request: one server span per
	// request with child spans for storage operations and admission hooks
	// (docs/operations.md lists them). Pass an OpenTelemetry SDK provider;
	// nil disables tracing at no cost.
	TracerProvider trace.TracerProvider
	// Propagator extracts the client's trace context from request headers
	// when tracing is on. Default: W3C Trace Context (traceparent).
	Propagator propagation.TextMapPropagator
}

// checkNonResourcePath refuses a NonResourceHandlers path that is not
// absolute or that the server serves itself.
func checkNonResourcePath(p string) error {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "*{}") {
		return fmt.Errorf("apiserver: NonResourceHandlers path %q: want an absolute path without patterns", p)
	}
	first, _, _ := strings.Cut(p[1:], "/")
	switch first {
	case "api", "apis", "openapi", "version", "healthz", "livez", "readyz":
		return fmt.Errorf("apiserver: NonResourceHandlers path %q is the server's own", p)
	}
	return nil
}

// VersionInfo is the body of /version.
type VersionInfo struct {
	Major        string `json:"major"`
	Minor        string `json:"minor"`
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// defaultVersion is the /version of a Config that sets none.
func defaultVersion() VersionInfo {
	return VersionInfo{
		Major: "1", Minor: "36", GitVersion: "v1.36.0-kapi", GitTreeState: "clean",
		BuildDate: "1970-01-01T00:00:00Z", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// Server is the API handler. It is safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	reg    *registry.Registry
	router chi.Router
	// resources is the middleware chain around serveResource that
	// ServeHTTP takes for resource paths without asking the router (see
	// routes).
	resources http.Handler

	// The discovery and OpenAPI documents of the served types, built on
	// first use after each change (documents.go).
	discoveryDocs docCache[*discovery.Documents]
	openAPIDocs   docCache[*openapi.Documents]

	authorizer auth.Authorizer
	flow       *flowControl
	watches    *watchLimits
	watchBytes *watchBytes
	// watchBuffers lends watch streams their batch buffers (*[]byte,
	// streamWatch): a watch holds one only while it has frames to write.
	watchBuffers sync.Pool
	pbCache      *codec.ProtobufCache // nil: none

	// bufferLists sends every list through the buffered path (tests and
	// benchmarks compare it with streaming); protobufListBuffer bounds the
	// protobuf list message held in memory before a list is measured and
	// written in a second pass (liststream.go).
	bufferLists        atomic.Bool
	protobufListBuffer int
	metrics            *metrics

	controllers     *controllers.Controllers
	stopControllers context.CancelFunc
	controllersDone chan struct{}

	// watchesCtx ends with EndWatches: every watch handler ends with it.
	watchesCtx context.Context
	endWatches context.CancelFunc
	// writeTimeout bounds one write of a watch or a stream, in nanoseconds
	// (watchWriteTimeout; tests shorten it).
	writeTimeout atomic.Int64

	date dateHeader // the Date header of responses, formatted once a second
}

// New returns a Server over cfg.Storage serving core v1 namespaces, with the
// default namespaces created. Register more types with Register.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("apiserver: Config.Storage is required")
	}
	cfg.setDefaults()
	for p := range cfg.NonResourceHandlers {
		if err := checkNonResourcePath(p); err != nil {
			return nil, err
		}
	}
	flow, err := newFlowControl(cfg)
	if err != nil {
		return nil, err
	}
	watches := newWatchLimits(cfg)
	var m *metrics
	if cfg.Metrics != nil {
		var err error
		if m, err = newMetrics(cfg.Metrics); err == nil {
			err = flow.register(cfg.Metrics)
		}
		if err == nil {
			err = watches.register(cfg.Metrics)
		}
		if err != nil {
			return nil, fmt.Errorf("apiserver: registering metrics: %w", err)
		}
		cfg.Storage = storage.KeepProgress(instrumentedStore{Store: cfg.Storage, m: m}, cfg.Storage)
	}
	cfg = withTracing(cfg) // storage and admission spans; no-op without a TracerProvider
	reg, err := registry.New(registry.Config{Storage: cfg.Storage, KeyPrefix: cfg.KeyPrefix, Logger: cfg.Logger, Admission: cfg.Admission, Watch: cfg.Watch, FutureRevisionWait: cfg.FutureRevisionWait, Encryption: cfg.Encryption})
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		if err := registerBudgetMetrics(cfg.Metrics, reg); err != nil {
			return nil, fmt.Errorf("apiserver: registering metrics: %w", err)
		}
	}
	// The controllers are made, and their metrics registered, whether or not
	// they run here (DisableControllers, Elector): /metrics shows the same
	// families either way.
	ctrl, err := controllers.New(reg, controllers.Config{Logger: cfg.Logger, Resync: cfg.ControllerResync, Metrics: cfg.Metrics, MigrationRate: cfg.MigrationRate})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, reg: reg, controllers: ctrl, authorizer: cfg.Authorizer, metrics: m, flow: flow, watches: watches,
		watchBytes: newWatchBytes(cfg.MaxWatchBytesPerUser)}
	s.watchesCtx, s.endWatches = context.WithCancel(context.Background())
	s.protobufListBuffer = 4 << 20
	s.watchBuffers.New = newWatchBuffer
	s.writeTimeout.Store(int64(watchWriteTimeout))
	switch {
	case cfg.ProtobufCacheBytes == 0:
		s.pbCache = codec.NewProtobufCache(32 << 20)
	case cfg.ProtobufCacheBytes > 0:
		s.pbCache = codec.NewProtobufCache(int(cfg.ProtobufCacheBytes))
	}
	if s.authorizer == nil {
		s.authorizer = auth.AlwaysAllow()
	}
	s.authorizer = withBasicUser(s.authorizer)
	reg.OnChange(s.invalidateDocs)
	if err := reg.Register(registry.Namespaces()); err != nil {
		return nil, err
	}
	// The server's own virtual types: the reviews of the requesting user
	// (ssar.go, ssrr.go, ssr.go) and a read-only view of the custom types
	// (crdview.go).
	for _, own := range []func() (registry.Resource, error){
		s.selfSubjectAccessReviews, s.selfSubjectRulesReviews, s.selfSubjectReviews, s.customResourceDefinitions,
	} {
		res, err := own()
		if err == nil {
			err = reg.Register(res)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.ensureNamespaces(ctx); err != nil {
		return nil, err
	}
	s.router, s.resources = s.routes()
	if !cfg.DisableControllers {
		s.startControllers(ctx)
	}
	return s, nil
}

// setDefaults fills in the documented defaults of unset fields.
func (cfg *Config) setDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxRequestBodyBytes <= 0 {
		cfg.MaxRequestBodyBytes = 3 << 20
	}
	if cfg.Version.GitVersion == "" {
		cfg.Version = defaultVersion()
	}
	if cfg.MaxRequestsInFlight <= 0 {
		cfg.MaxRequestsInFlight = 400
	}
	if cfg.MaxMutatingRequestsInFlight <= 0 {
		cfg.MaxMutatingRequestsInFlight = 200
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = time.Minute
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 32 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 1 << 20
	}
	if cfg.MaxWatchesPerUser == 0 {
		cfg.MaxWatchesPerUser = defaultMaxWatchesPerUser
	}
	if cfg.MaxWatchBytesPerUser == 0 {
		cfg.MaxWatchBytesPerUser = defaultMaxWatchBytesPerUser
	}
	if cfg.MaxWatches == 0 {
		cfg.MaxWatches = defaultMaxWatches
		if n, ok := openFileLimit(); ok {
			cfg.MaxWatches = max(min(cfg.MaxWatches, n/2), 1)
		}
	}
	if cfg.DefaultNamespaces == nil {
		cfg.DefaultNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}
	}
}

// startControllers runs the controllers (and, with metrics, the object
// counts) in the background until Close; ctx's values are kept, its end is
// not.
func (s *Server) startControllers(ctx context.Context) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopControllers = cancel
	s.controllersDone = make(chan struct{})
	go func() {
		defer close(s.controllersDone)
		if s.metrics == nil {
			s.runControllers(cctx)
			return
		}
		done := make(chan struct{})
		go func() { defer close(done); s.countObjects(cctx) }()
		s.runControllers(cctx)
		<-done
	}()
}

// Elector runs work only while this instance leads the instances that
// serve one API (see Config.Elector).
type Elector interface {
	// Run calls lead each time this instance becomes leader, with a context
	// that ends when leadership does, and returns when ctx ends. lead must
	// return when its context ends.
	Run(ctx context.Context, lead func(ctx context.Context))
}

// runControllers runs the controllers until ctx ends, while leading when
// there is an Elector.
func (s *Server) runControllers(ctx context.Context) {
	if s.cfg.Elector == nil {
		s.controllers.Run(ctx)
		return
	}
	s.cfg.Elector.Run(ctx, s.controllers.Run)
}

// Close stops the server's background controllers (namespace cleanup and
// garbage collection) and watch caches (open watches end). It does not close
// the storage, which the caller owns.
func (s *Server) Close() error {
	if s.stopControllers != nil {
		s.stopControllers()
		<-s.controllersDone
	}
	s.reg.Close() // stops the watch caches; open watches end
	return nil
}

// EndWatches ends every open watch cleanly (the stream ends, as when
// timeoutSeconds runs out, and clients such as client-go watch again), and
// every follow stream of a custom subresource, and refuses new ones with 503
// and Retry-After. Other requests are not
// affected. It is for graceful shutdown: http.Server.Shutdown waits for
// in-flight requests, and watches never finish by themselves, so register it
// to run when shutdown starts:
//
//	srv.RegisterOnShutdown(api.EndWatches)
//	srv.Shutdown(ctx) // stops accepting, ends watches, drains the rest
//
// It is safe to call more than once and concurrently.
func (s *Server) EndWatches() { s.endWatches() }

// Registry returns the registry of served types.
func (s *Server) Registry() *registry.Registry { return s.reg }

// Migrations returns the storage migration state of every type registered
// in several versions (see controllers.Controllers.Migrations); any
// instance can answer it, the leader with the state of its running passes.
func (s *Server) Migrations(ctx context.Context) ([]controllers.MigrationStatus, error) {
	return s.controllers.Migrations(ctx)
}

// Register serves a resource type (or replaces its registration). It takes
// effect at once, discovery and OpenAPI included.
func (s *Server) Register(res registry.Resource) error { return s.reg.Register(s.traceAdmission(res)) }

// RegisterVersions adds or replaces a type served in several versions,
// converted into one another; see registry.Registry.RegisterVersions.
func (s *Server) RegisterVersions(vs registry.Versions) error {
	vs.Versions = slices.Clone(vs.Versions)
	for i := range vs.Versions {
		vs.Versions[i] = s.traceAdmission(vs.Versions[i])
	}
	return s.reg.RegisterVersions(vs)
}

// UnregisterVersions stops serving every version of a type registered with
// RegisterVersions; its objects stay in storage.
func (s *Server) UnregisterVersions(gr meta.GroupResource) error { return s.reg.UnregisterVersions(gr) }

// Unregister stops serving a resource type (for a type in several
// versions, one version); its objects stay in storage.
func (s *Server) Unregister(gvr meta.GroupVersionResource) error { return s.reg.Unregister(gvr) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, _, _, ok := splitResourcePath(rawRoutePath(r)); ok {
		s.resources.ServeHTTP(w, r)
		return
	}
	s.router.ServeHTTP(w, r)
}

func (s *Server) ensureNamespaces(ctx context.Context) error {
	st, _ := s.reg.Store(meta.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, ns := range s.cfg.DefaultNamespaces {
		_, err := st.Create(ctx, "", registry.Object{"metadata": map[string]any{"name": ns}}, registry.WriteOptions{FieldManager: "kapi-apiserver"})
		if err != nil && meta.ReasonOf(err) != meta.StatusReasonAlreadyExists {
			return fmt.Errorf("apiserver: creating namespace %q: %w", ns, err)
		}
	}
	return nil
}

// routes returns the router of every path and the handler of resource
// paths. A resource path (/api/V/REST, /apis/G/V/REST) goes straight to
// serveResource through the same middleware, which is what the router
// would do after matching /api/{version}/* or /apis/{group}/{version}/*:
// the router's context, its matching and its URL parameters cost a few
// percent of a small write, and serveResource reads the path itself.
func (s *Server) routes() (chi.Router, http.Handler) {
	mw := []func(http.Handler) http.Handler{
		s.begin,   // the request state (reqstate.go): first
		s.tracing, // returns next as it is without a TracerProvider
		s.recoverer,
	}
	if s.metrics != nil {
		mw = append(mw, s.instrument)
	}
	if s.cfg.Audit != nil {
		mw = append(mw, s.audit)
	}
	mw = append(mw, s.authenticate, s.limit, s.authorizeNonResource)
	var resources http.Handler = http.HandlerFunc(s.serveResource)
	for i := len(mw) - 1; i >= 0; i-- {
		resources = mw[i](resources)
	}

	r := chi.NewRouter()
	r.Use(mw...)
	r.Get("/version", s.serveVersion)
	r.Get("/api", s.serveAPIVersions)
	// These also answer HEAD, as kube-apiserver's do (a load balancer's
	// health check may use it); /version, /api and the resources do not.
	getHead := func(p string, h http.HandlerFunc) { r.Get(p, h); r.Head(p, h) }
	for _, e := range []string{"healthz", "livez", "readyz"} {
		getHead("/"+e, s.healthHandler(e))
		getHead("/"+e+"/*", s.healthHandler(e))
	}
	getHead("/apis", s.serveAPIGroups)
	getHead("/openapi/v2", s.serveOpenAPIV2)
	getHead("/openapi/v3", s.serveOpenAPIV3Index)
	getHead("/openapi/v3/*", s.serveOpenAPIV3)
	for p, h := range s.cfg.NonResourceHandlers {
		r.Handle(p, h)
	}
	r.HandleFunc("/api/{version}", s.serveGroupVersion)
	r.HandleFunc("/api/{version}/*", s.serveResource)
	r.HandleFunc("/apis/{group}", s.serveAPIGroup)
	r.HandleFunc("/apis/{group}/{version}", s.serveGroupVersion)
	r.HandleFunc("/apis/{group}/{version}/*", s.serveResource)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, meta.NewNotFoundPath())
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
	})
	return r, resources
}

// recoverer turns a panic in a handler into a 500 Status and a log line: the
// server never dies on a request.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				s.writeError(w, r, meta.NewInternalError(fmt.Errorf("%v", v)))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	s.writeObject(w, r, http.StatusOK, s.cfg.Version)
}
