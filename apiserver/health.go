package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// The health endpoints, as kube-apiserver's: /healthz, /livez and /readyz
// run their named checks and answer "ok", or list them (?verbose, or when
// one fails: 500) as "[+]name ok" and "[-]name failed: reason withheld",
// then "<endpoint> check passed|failed". ?exclude=name skips a check;
// /<endpoint>/<name> runs one. Why a check failed is logged, not shown:
// the endpoints need no credentials.

// healthCheck is one named check; check nil always passes.
type healthCheck struct {
	name  string
	check func(ctx context.Context) error
}

// storageCheckTimeout bounds the storage check, as kube-apiserver's etcd
// check (--etcd-healthcheck-timeout): a store that hangs fails it.
const storageCheckTimeout = 2 * time.Second

// errShuttingDown fails the readiness check once EndWatches has run, so
// that load balancers stop sending new requests while the rest drain.
var errShuttingDown = errors.New("the server is shutting down")

// healthChecks returns the checks of endpoint (healthz, livez or readyz).
func (s *Server) healthChecks(endpoint string) []healthCheck {
	checks := []healthCheck{
		{name: "ping"},
		{name: "storage", check: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, storageCheckTimeout)
			defer cancel()
			_, err := s.cfg.Storage.CurrentRevision(ctx)
			return err
		}},
	}
	if endpoint == "readyz" {
		checks = append(checks, healthCheck{name: "shutdown", check: func(context.Context) error {
			if s.watchesCtx.Err() != nil {
				return errShuttingDown
			}
			return nil
		}})
	}
	return checks
}

// healthHandler serves endpoint (healthz, livez or readyz) and its checks
// by name (the route's wildcard).
func (s *Server) healthHandler(endpoint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveHealth(w, r, endpoint) }
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request, endpoint string) {
	checks := s.healthChecks(endpoint)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.HasSuffix(r.URL.Path, "/") {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if name := chi.URLParam(r, "*"); name != "" {
		for _, c := range checks {
			if c.name == name {
				if err := s.runHealthCheck(r.Context(), endpoint, c); err != nil {
					http.Error(w, "internal server error: reason withheld", http.StatusInternalServerError)
					return
				}
				_, _ = w.Write([]byte("ok"))
				return
			}
		}
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	excluded := map[string]bool{}
	for _, v := range q["exclude"] {
		excluded[v] = true
	}
	var out strings.Builder
	failed := false
	for _, c := range checks {
		switch {
		case excluded[c.name]:
			delete(excluded, c.name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
		case s.runHealthCheck(r.Context(), endpoint, c) != nil:
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
		default:
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
	}
	if len(excluded) > 0 {
		var names []string
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		slices.Sort(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	_, verbose := q["verbose"]
	switch {
	case failed:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(&out, "%s check failed\n", endpoint)
	case !verbose:
		_, _ = w.Write([]byte("ok"))
		return
	default:
		fmt.Fprintf(&out, "%s check passed\n", endpoint)
	}
	_, _ = w.Write([]byte(out.String()))
}

// runHealthCheck runs c and logs why it failed.
func (s *Server) runHealthCheck(ctx context.Context, endpoint string, c healthCheck) error {
	if c.check == nil {
		return nil
	}
	err := c.check(ctx)
	if err != nil && !errors.Is(err, errShuttingDown) {
		s.log.Warn("health check failed", "endpoint", endpoint, "check", c.name, "error", err)
	}
	return err
}
