package apiserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Virtual types and custom subresources (registry.Virtual,
// registry.Subresource): the HTTP side. Requests arrive here authorized
// (as resource or resource/subresource); the registry runs the body through
// the write pipeline and calls the host function.

// serveVirtual serves a request on a virtual type.
func (s *Server) serveVirtual(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	res := st.Resource()
	v := res.Virtual
	if info.Subresource != "" || (info.Name != "" && v.Get == nil) {
		// A path the type does not have, as kube-apiserver answers for a
		// named path of a create-only type.
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	req := &registry.Request{Namespace: info.Namespace, Name: info.Name, Query: queryOf(r)}
	switch {
	case info.Name != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && info.Verb == "get":
		req.Verb = "get"
	case info.Name == "" && r.Method == http.MethodPost && v.Create != nil:
		if res.Namespaced && info.Namespace == "" {
			s.writeError(w, r, meta.NewNotFoundPath())
			return
		}
		req.Verb = "create"
	case info.Name == "" && r.Method == http.MethodGet && info.Verb == "list" && v.List != nil:
		req.Verb = "list"
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	s.invoke(w, r, st, req, res.Kind)
}

// serveCustomSubresource serves a host-implemented subresource of a stored
// type.
func (s *Server) serveCustomSubresource(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo, sr registry.Subresource) {
	req := &registry.Request{Namespace: info.Namespace, Name: info.Name, Subresource: info.Subresource, Query: queryOf(r)}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		req.Verb = "get"
		if sr.Stream != nil {
			if r.Method == http.MethodHead {
				// The headers a GET would have, without running the
				// stream (which may follow forever and act on the parent).
				if _, err := st.GetObject(r.Context(), info.Namespace, info.Name); err != nil {
					s.writeError(w, r, err)
					return
				}
				w.Header().Set("Content-Type", sr.StreamContentType())
				w.WriteHeader(http.StatusOK)
				return
			}
			follow := queryOf(r).Get("follow") == "true"
			if follow {
				noteLongRunning(r.Context(), info) // counted like a watch
			}
			s.stream(w, r, st, req, sr, follow)
			return
		}
		if sr.Get == nil {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
	case http.MethodPost:
		req.Verb = "create"
		if sr.Create == nil {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
	case http.MethodPut:
		req.Verb = "update"
		if sr.Update == nil {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		return
	}
	s.invoke(w, r, st, req, sr.Kind.Kind)
}

// invoke reads the body of a create or update, calls the host function
// through the store and writes its answer.
func (s *Server) invoke(w http.ResponseWriter, r *http.Request, st *registry.Store, req *registry.Request, kind string) {
	var (
		body registry.Object
		opts registry.WriteOptions
	)
	if req.Verb == "create" || req.Verb == "update" {
		optsKind := "CreateOptions"
		if req.Verb == "update" {
			optsKind = "UpdateOptions"
		}
		var err error
		if opts, err = writeOptions(queryOf(r), optsKind); err != nil {
			s.writeError(w, r, err)
			return
		}
		res := st.Resource()
		target := bodyTarget{kind: kind}
		if req.Subresource == "" {
			target.apiVersion, target.msg = res.APIVersion(), res.Protobuf
		}
		if body, opts.UnknownFields, err = s.readExtensionBody(r, target); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	out, warnings, err := st.Invoke(r.Context(), req, body, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, warning := range warnings {
		addWarning(w, warning)
	}
	code := http.StatusOK
	if req.Verb == "create" {
		code = http.StatusCreated
	}
	if out == nil {
		out = registry.Object{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": meta.StatusSuccess, "code": int64(code)}
	}
	if k, _ := out["kind"].(string); k == "Status" {
		// A Status answer carries its own code (e.g. 429 for an eviction
		// that must wait).
		if c, ok := meta.AsInt64(out["code"]); ok && c >= 200 && c < 600 {
			code = int(c)
		}
	}
	s.writeObject(w, r, code, out)
}

// readExtensionBody reads a request body of a virtual type or a custom
// subresource. An empty body is nil (an empty object of the kind).
func (s *Server) readExtensionBody(r *http.Request, target bodyTarget) (registry.Object, []string, error) {
	mt, err := bodyMediaType(r, target.msg != nil)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		return nil, nil, bodyReadError(err, s.cfg.MaxRequestBodyBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, nil
	}
	target.yamlAliasBytes = int(s.cfg.MaxRequestBodyBytes)
	return decodeBody(mt, data, target)
}

// stream serves a streaming subresource: the response starts (200, the
// subresource's content type) with the first byte the host writes, and
// every write is flushed and bounded by a write deadline (a client that
// reads nothing for that long ends the stream). An error before that is a
// Status. A follow stream is long-running: like a watch it ends with
// EndWatches, and is refused (503) after it.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *registry.Store, req *registry.Request, sr registry.Subresource, follow bool) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if follow {
		if s.watchesCtx.Err() != nil {
			s.writeError(w, r, shuttingDown())
			return
		}
		defer context.AfterFunc(s.watchesCtx, cancel)()
	}
	sw := &subresourceStream{w: w, rc: http.NewResponseController(w), contentType: sr.StreamContentType(),
		cancel: cancel, writeTimeout: time.Duration(s.writeTimeout.Load())}
	err := st.Stream(ctx, req, sw)
	started := sw.finish()
	switch {
	case err != nil && !started && follow && s.watchesCtx.Err() != nil:
		s.writeError(w, r, shuttingDown())
	case err != nil && !started:
		s.writeError(w, r, err)
	case err != nil:
		s.log.Debug("stream ended with an error", "path", r.URL.Path, "err", err)
	case !started:
		w.Header().Set("Content-Type", sr.StreamContentType())
		w.WriteHeader(http.StatusOK)
	}
}

// subresourceStream is the io.Writer a StreamFunc writes to.
type subresourceStream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	contentType  string
	cancel       context.CancelFunc // ends the stream's context
	writeTimeout time.Duration

	mu       sync.Mutex
	started  bool
	done     bool
	deadline time.Time // the write deadline set on the connection
}

func (sw *subresourceStream) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.done {
		return 0, io.ErrClosedPipe
	}
	if !sw.started {
		sw.started = true
		h := sw.w.Header()
		h.Set("Content-Type", sw.contentType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache, private")
		sw.w.WriteHeader(http.StatusOK)
	}
	// Bound the write (moving the deadline only now and then, as watches
	// do): a stalled reader must not pin the handler.
	if now := time.Now(); sw.deadline.Sub(now) < sw.writeTimeout/2 {
		sw.deadline = now.Add(sw.writeTimeout)
		_ = sw.rc.SetWriteDeadline(sw.deadline) // unsupported writers just block
	}
	n, err := sw.w.Write(p)
	if err == nil {
		err = sw.rc.Flush()
		if errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err != nil {
		// The client is gone or too slow: end the stream (the host
		// function sees its context end).
		sw.done = true
		sw.cancel()
	}
	return n, err
}

// finish stops further writes and reports whether the response started.
func (sw *subresourceStream) finish() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.done = true
	if !sw.deadline.IsZero() {
		_ = sw.rc.SetWriteDeadline(time.Time{}) // the connection may serve more requests
	}
	return sw.started
}
