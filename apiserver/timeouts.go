package apiserver

import (
	"net/http"
	"time"
)

// ConfigureHTTPServer sets what the http.Server serving s must bound
// itself, where srv leaves it unset: ReadHeaderTimeout, IdleTimeout and
// MaxHeaderBytes from the Config. The handler bounds the rest per request
// (RequestTimeout: the body, the handling, the response), so srv's
// ReadTimeout and WriteTimeout should stay 0: they would also cut watches.
func (s *Server) ConfigureHTTPServer(srv *http.Server) {
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = s.cfg.ReadHeaderTimeout
	}
	if srv.IdleTimeout == 0 {
		srv.IdleTimeout = s.cfg.IdleTimeout
	}
	if srv.MaxHeaderBytes == 0 {
		srv.MaxHeaderBytes = s.cfg.MaxHeaderBytes
	}
}

// connDeadlines is what net/http's response writers implement (HTTP/1 and
// HTTP/2 alike) for per-request deadlines.
type connDeadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// responseWriteGrace is how long after the request's deadline its response
// may still be written, at most: long enough for the 504 that a request
// answers when its time runs out.
const responseWriteGrace = 10 * time.Second

// setIODeadlines bounds reading r's body by deadline and writing the
// response by deadline plus grace, so that a client that stalls its body or
// stops reading the response cannot hold the request, and its seat, past
// the request timeout. A writer that supports neither (a host's wrapper
// without Unwrap) is left as it is.
func setIODeadlines(w http.ResponseWriter, r *http.Request, deadline time.Time, grace time.Duration) {
	d, ok := w.(connDeadlines)
	for !ok {
		// Walk wrappers as http.ResponseController does, without making one.
		u, isWrapper := w.(interface{ Unwrap() http.ResponseWriter })
		if !isWrapper {
			return
		}
		w = u.Unwrap()
		d, ok = w.(connDeadlines)
	}
	if r.Body != nil && r.Body != http.NoBody {
		_ = d.SetReadDeadline(deadline)
	}
	_ = d.SetWriteDeadline(deadline.Add(grace))
}
