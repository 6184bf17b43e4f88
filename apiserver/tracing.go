package apiserver

// OpenTelemetry tracing. Only the OpenTelemetry API module is imported: the
// host brings its own SDK and exporter through Config.TracerProvider. With no
// provider none of this runs: the middleware returns the next handler as it
// is and neither storage nor admission hooks are wrapped.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// tracerName is the instrumentation scope of every span kapi starts.
const tracerName = "github.com/kapi-dev/kapi/apiserver"

// Span attribute keys. The HTTP ones are OpenTelemetry's semantic
// conventions; the kapi.* ones describe the Kubernetes request.
const (
	attrHTTPMethod    = attribute.Key("http.request.method")
	attrHTTPRoute     = attribute.Key("http.route")
	attrHTTPStatus    = attribute.Key("http.response.status_code")
	attrURLPath       = attribute.Key("url.path")
	attrUserAgent     = attribute.Key("user_agent.original")
	attrErrorType     = attribute.Key("error.type")
	attrVerb          = attribute.Key("kapi.verb")
	attrGroup         = attribute.Key("kapi.group")
	attrVersion       = attribute.Key("kapi.version")
	attrResource      = attribute.Key("kapi.resource")
	attrSubresource   = attribute.Key("kapi.subresource")
	attrNamespace     = attribute.Key("kapi.namespace")
	attrName          = attribute.Key("kapi.name")
	attrStorageKey    = attribute.Key("kapi.storage.key")
	attrStoragePrefix = attribute.Key("kapi.storage.prefix")
	attrStorageRev    = attribute.Key("kapi.storage.revision")
	attrStorageLimit  = attribute.Key("kapi.storage.limit")
	attrStorageCount  = attribute.Key("kapi.storage.count")
	attrAdmissionHook = attribute.Key("kapi.admission.hook")
	attrAdmissionOp   = attribute.Key("kapi.admission.operation")
)

// tracing is the outermost middleware: it continues the client's trace (W3C
// traceparent by default, Config.Propagator otherwise) and wraps the request
// in one server span named after the route, e.g.
// "HTTP GET /api/v1/namespaces/{namespace}/configmaps/{name}".
func (s *Server) tracing(next http.Handler) http.Handler {
	tp := s.cfg.TracerProvider
	if tp == nil {
		return next
	}
	tracer := tp.Tracer(tracerName)
	prop := s.cfg.Propagator
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attrHTTPMethod.String(r.Method), attrURLPath.String(r.URL.Path), attrUserAgent.String(r.UserAgent())))
		defer span.End()
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		// The request info is known only inside the resource handler, which
		// fills the request state's (as for audit and metrics).
		st := stateOf(r)
		info, rec := &st.info, st.recorder(w)
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)

		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		route := s.spanRoute(r, info)
		if route != "" {
			span.SetName("HTTP " + r.Method + " " + route)
			span.SetAttributes(attrHTTPRoute.String(route))
		}
		span.SetAttributes(attrHTTPStatus.Int(code))
		if info.Verb != "" {
			span.SetAttributes(attrVerb.String(info.Verb), attrGroup.String(info.Group), attrVersion.String(info.Version),
				attrResource.String(info.Resource))
			if info.Subresource != "" {
				span.SetAttributes(attrSubresource.String(info.Subresource))
			}
			if info.Namespace != "" {
				span.SetAttributes(attrNamespace.String(info.Namespace))
			}
			if info.Name != "" {
				span.SetAttributes(attrName.String(info.Name))
			}
		}
		// As OpenTelemetry's HTTP conventions say for server spans: 5xx is
		// an error of the server, 4xx is the client's and leaves the status
		// unset.
		if code >= 500 {
			span.SetAttributes(attrErrorType.String(strconv.Itoa(code)))
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

// spanRoute is the low-cardinality route of a request: for a registered
// resource (and a subresource it has), the URL with the namespace and name
// replaced by placeholders; for everything else, chi's route pattern, so
// that URLs a client makes up never become span names.
func (s *Server) spanRoute(r *http.Request, info *requestInfo) string {
	if info.Resource != "" && s.knownRoute(info) {
		var b strings.Builder
		if info.Group == "" {
			b.WriteString("/api/")
		} else {
			b.WriteString("/apis/")
			b.WriteString(info.Group)
			b.WriteByte('/')
		}
		b.WriteString(info.Version)
		if info.Namespace != "" && !(info.Group == "" && info.Resource == "namespaces") {
			b.WriteString("/namespaces/{namespace}")
		}
		b.WriteByte('/')
		b.WriteString(info.Resource)
		if info.Name != "" {
			b.WriteString("/{name}")
		}
		if info.Subresource != "" {
			b.WriteByte('/')
			b.WriteString(info.Subresource)
		}
		return b.String()
	}
	rc := chi.RouteContext(r.Context())
	if g, _, _, ok := splitResourcePath(stateOf(r).raw); ok {
		// Served without the router (ServeHTTP): its pattern, after the
		// pattern of a router kapi is mounted in, if any.
		pattern := "/api/{version}/*"
		if g != "" {
			pattern = "/apis/{group}/{version}/*"
		}
		return strings.TrimSuffix(rc.RoutePattern(), "/*") + pattern
	}
	return rc.RoutePattern() // "" without a route context
}

// knownRoute reports whether info names a registered resource and, if it
// has one, a subresource of it.
func (s *Server) knownRoute(info *requestInfo) bool {
	st, ok := s.reg.Store(meta.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource})
	if !ok {
		return false
	}
	res := st.Resource()
	switch info.Subresource {
	case "":
		return true
	case "status":
		return res.Subresources.Status
	case "scale":
		return res.Subresources.Scale != nil
	case "finalize":
		return res.Group == "" && res.Resource == "namespaces"
	}
	_, ok = res.Subresources.Custom[info.Subresource]
	return ok
}

// withTracing wraps the storage and the global admission hooks of cfg in
// spans when tracing is on; otherwise it returns cfg unchanged.
func withTracing(cfg Config) Config {
	if cfg.TracerProvider == nil {
		return cfg
	}
	t := cfg.TracerProvider.Tracer(tracerName)
	cfg.Storage = storage.KeepProgress(tracedStore{Store: cfg.Storage, tracer: t}, cfg.Storage)
	cfg.Admission = traceHooks(t, cfg.Admission)
	return cfg
}

// traceAdmission wraps a resource's own admission hooks in spans when
// tracing is on.
func (s *Server) traceAdmission(res registry.Resource) registry.Resource {
	if s.cfg.TracerProvider == nil || len(res.Admission) == 0 {
		return res
	}
	res.Admission = traceHooks(s.cfg.TracerProvider.Tracer(tracerName), res.Admission)
	return res
}

// traceHooks returns copies of hooks whose Mutate and Validate calls run in
// "admission.Mutate" and "admission.Validate" spans, children of the
// request's span.
func traceHooks(t trace.Tracer, hooks []registry.AdmissionHook) []registry.AdmissionHook {
	if len(hooks) == 0 {
		return hooks
	}
	out := make([]registry.AdmissionHook, len(hooks))
	for i, h := range hooks {
		if fn := h.Mutate; fn != nil {
			h.Mutate = traceHook(t, "admission.Mutate", h.Name, fn)
		}
		if fn := h.Validate; fn != nil {
			h.Validate = traceHook(t, "admission.Validate", h.Name, fn)
		}
		out[i] = h
	}
	return out
}

func traceHook(t trace.Tracer, spanName, hook string, fn func(context.Context, *registry.AdmissionRequest) error) func(context.Context, *registry.AdmissionRequest) error {
	return func(ctx context.Context, req *registry.AdmissionRequest) error {
		if !traced(ctx) {
			return fn(ctx, req)
		}
		ctx, span := t.Start(ctx, spanName, trace.WithAttributes(attrAdmissionHook.String(hook),
			attrAdmissionOp.String(string(req.Operation)), attrResource.String(req.Resource.Resource)))
		defer span.End()
		err := fn(ctx, req)
		if err != nil {
			// A denial is the hook's answer, not a failure of the server.
			span.RecordError(err)
		}
		return err
	}
}

// tracedStore runs every storage operation made on behalf of a traced
// request in a child span ("storage.Get", "storage.List", ...). Operations
// without a recording span in their context (controllers, watch caches)
// are not traced, so they do not flood the trace backend with root spans.
type tracedStore struct {
	storage.Store
	tracer trace.Tracer
}

// traced reports whether ctx carries a recording span: only then is a
// storage span made (and its attributes computed).
func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// start begins a storage span.
func (s tracedStore) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// end records err on span and ends it. Not-found, already-exists and
// conflicts are answers (404, 409), not storage failures: they are recorded
// without an error status.
func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		if !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrAlreadyExists) && !errors.Is(err, storage.ErrConflict) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

func (s tracedStore) Get(ctx context.Context, key []byte, rev int64) (storage.KeyValue, error) {
	if !traced(ctx) {
		return s.Store.Get(ctx, key, rev)
	}
	ctx, span := s.start(ctx, "storage.Get", attrStorageKey.String(string(key)))
	kv, err := s.Store.Get(ctx, key, rev)
	span.SetAttributes(attrStorageRev.Int64(kv.Revision))
	end(span, err)
	return kv, err
}

func (s tracedStore) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	if !traced(ctx) {
		return s.Store.List(ctx, opts)
	}
	ctx, span := s.start(ctx, "storage.List", attrStoragePrefix.String(string(opts.Prefix)), attrStorageLimit.Int64(opts.Limit))
	res, err := s.Store.List(ctx, opts)
	span.SetAttributes(attrStorageRev.Int64(res.Revision), attrStorageCount.Int(len(res.Items)))
	end(span, err)
	return res, err
}

func (s tracedStore) Create(ctx context.Context, key, value []byte) (int64, error) {
	if !traced(ctx) {
		return s.Store.Create(ctx, key, value)
	}
	ctx, span := s.start(ctx, "storage.Create", attrStorageKey.String(string(key)))
	rev, err := s.Store.Create(ctx, key, value)
	span.SetAttributes(attrStorageRev.Int64(rev))
	end(span, err)
	return rev, err
}

func (s tracedStore) Update(ctx context.Context, key, value []byte, expected int64) (int64, error) {
	if !traced(ctx) {
		return s.Store.Update(ctx, key, value, expected)
	}
	ctx, span := s.start(ctx, "storage.Update", attrStorageKey.String(string(key)))
	rev, err := s.Store.Update(ctx, key, value, expected)
	span.SetAttributes(attrStorageRev.Int64(rev))
	end(span, err)
	return rev, err
}

func (s tracedStore) Delete(ctx context.Context, key []byte, expected int64) (storage.KeyValue, int64, error) {
	if !traced(ctx) {
		return s.Store.Delete(ctx, key, expected)
	}
	ctx, span := s.start(ctx, "storage.Delete", attrStorageKey.String(string(key)))
	kv, rev, err := s.Store.Delete(ctx, key, expected)
	span.SetAttributes(attrStorageRev.Int64(rev))
	end(span, err)
	return kv, rev, err
}

// Watch traces only the start of a watch: the stream itself outlives any
// reasonable span.
func (s tracedStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	if !traced(ctx) {
		return s.Store.Watch(ctx, opts)
	}
	sctx, span := s.start(ctx, "storage.Watch", attrStoragePrefix.String(string(opts.Prefix)), attrStorageRev.Int64(opts.FromRevision))
	// sctx is ctx plus the span: the watch ends with ctx as before.
	ch, err := s.Store.Watch(sctx, opts)
	end(span, err)
	return ch, err
}

func (s tracedStore) CurrentRevision(ctx context.Context) (int64, error) {
	if !traced(ctx) {
		return s.Store.CurrentRevision(ctx)
	}
	ctx, span := s.start(ctx, "storage.CurrentRevision")
	rev, err := s.Store.CurrentRevision(ctx)
	span.SetAttributes(attrStorageRev.Int64(rev))
	end(span, err)
	return rev, err
}

func (s tracedStore) CompactedRevision(ctx context.Context) (int64, error) {
	if !traced(ctx) {
		return s.Store.CompactedRevision(ctx)
	}
	ctx, span := s.start(ctx, "storage.CompactedRevision")
	rev, err := s.Store.CompactedRevision(ctx)
	span.SetAttributes(attrStorageRev.Int64(rev))
	end(span, err)
	return rev, err
}

func (s tracedStore) Compact(ctx context.Context, rev int64) error {
	if !traced(ctx) {
		return s.Store.Compact(ctx, rev)
	}
	ctx, span := s.start(ctx, "storage.Compact", attrStorageRev.Int64(rev))
	err := s.Store.Compact(ctx, rev)
	end(span, err)
	return err
}
