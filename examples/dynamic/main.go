// Command dynamic adds, changes and removes resource types while it runs,
// from schemas alone, the way a CustomResourceDefinition does in Kubernetes.
// An admin endpoint takes type definitions (JSON or YAML):
//
//	PUT    /types/{name}   add or replace a type (takes effect at once: discovery, OpenAPI, kubectl)
//	DELETE /types/{name}   stop serving it (its objects stay in storage)
//	GET    /types          the current definitions
//
// A type has one version (version and schema) or several (versions, each
// with its schema, exactly one of them the storage version), converted into
// one another by rewriting apiVersion (conversion strategy None) or by
// moving fields through a hub (strategy FieldMoves); see Definition.
// Versions may be added, unserved, deprecated or removed, and the storage
// version changed, by putting the definition again.
//
// A definition the server cannot serve (a schema that is not structural, a
// validation rule that does not compile, a version objects may still be
// stored in left out) is refused with a 422 Status and the reason, and the
// type stays as it was. The API itself is served under /kube. Definitions
// are kept in <data-dir>/types.json, so they survive restarts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// types is the admin side: it turns definitions into registrations.
type types struct {
	mu   sync.Mutex
	api  *apiserver.Server
	file string // where definitions are kept ("" = nowhere)
	defs map[string]Definition
}

// register serves d's type in each of its versions. Every type is
// registered with RegisterVersions, a type in one version too, so that a
// definition may go from one version to several and back.
func (t *types) register(d Definition) error {
	vs, err := d.versions()
	if err != nil {
		return err
	}
	if err := t.api.RegisterVersions(vs); err != nil {
		return &refusedError{err}
	}
	return nil
}

// unregister stops serving d's type, every version of it; its objects stay
// in storage.
func (t *types) unregister(d Definition) error {
	return t.api.UnregisterVersions(meta.GroupResource{Group: d.Group, Resource: d.Plural})
}

func (t *types) put(name string, d Definition) error {
	if _, err := d.versions(); err != nil {
		return err // refused before the served type is touched
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, renamed := t.defs[name]
	renamed = renamed && (old.Group != d.Group || old.Plural != d.Plural)
	if renamed {
		// A renamed type: the old name stops being served.
		if err := t.unregister(old); err != nil {
			return fmt.Errorf("unregistering %s.%s: %w", old.Plural, old.Group, err)
		}
	}
	if err := t.register(d); err != nil {
		if renamed {
			// Refused (a validation rule that does not compile, say): the
			// old type goes on being served, as its kept definition says.
			_ = t.register(old)
		}
		return err
	}
	t.defs[name] = d
	return t.save()
}

func (t *types) remove(name string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.defs[name]
	if !ok {
		return false, nil
	}
	if err := t.unregister(d); err != nil {
		return true, err
	}
	delete(t.defs, name)
	return true, t.save()
}

func (t *types) save() error {
	if t.file == "" {
		return nil
	}
	b, err := json.MarshalIndent(t.defs, "", "  ")
	if err != nil {
		return err
	}
	tmp := t.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, t.file)
}

// load registers the definitions kept in the file.
func (t *types) load() error {
	b, err := os.ReadFile(t.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &t.defs); err != nil {
		return fmt.Errorf("reading %s: %w", t.file, err)
	}
	for name, d := range t.defs {
		if err := t.register(d); err != nil {
			return fmt.Errorf("type %s: %w", name, err)
		}
	}
	return nil
}

func (t *types) routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		t.mu.Lock()
		names := make([]string, 0, len(t.defs))
		for n := range t.defs {
			names = append(names, n)
		}
		sort.Strings(names)
		out := make([]map[string]any, 0, len(names))
		for _, n := range names {
			out = append(out, map[string]any{"name": n, "definition": t.defs[n]})
		}
		t.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	r.Put("/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			writeStatus(w, http.StatusBadRequest, meta.StatusReasonBadRequest, name, "reading the definition: "+err.Error())
			return
		}
		var d Definition
		if err := yaml.UnmarshalStrict(body, &d); err != nil {
			writeStatus(w, http.StatusBadRequest, meta.StatusReasonBadRequest, name, "bad definition: "+err.Error())
			return
		}
		var refusal *refusedError
		switch err := t.put(name, d); {
		case errors.As(err, &refusal):
			writeStatus(w, http.StatusUnprocessableEntity, meta.StatusReasonInvalid, name, err.Error())
		case err != nil:
			writeStatus(w, http.StatusInternalServerError, meta.StatusReasonInternalError, name, err.Error())
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	r.Delete("/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		found, err := t.remove(name)
		switch {
		case err != nil:
			writeStatus(w, http.StatusInternalServerError, meta.StatusReasonInternalError, name, err.Error())
		case !found:
			writeStatus(w, http.StatusNotFound, meta.StatusReasonNotFound, name, fmt.Sprintf("type %q not found", name))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return r
}

// writeStatus answers an admin request that failed with a Status, as the
// API answers its errors.
func writeStatus(w http.ResponseWriter, code int, reason meta.StatusReason, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(meta.Status{
		TypeMeta: meta.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   meta.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
		Details: &meta.StatusDetails{Name: name, Kind: "types"},
	})
}

// newHandler builds the example's handler: the API under /kube and the
// admin endpoint under /types.
func newHandler(ctx context.Context, logger *slog.Logger, store *badger.Store, typesFile string) (http.Handler, *apiserver.Server, error) {
	api, err := apiserver.New(ctx, apiserver.Config{Storage: store, Logger: logger, AllowAnonymous: true})
	if err != nil {
		return nil, nil, err
	}
	t := &types{api: api, file: typesFile, defs: map[string]Definition{}}
	if typesFile != "" {
		if err := t.load(); err != nil {
			api.Close()
			return nil, nil, err
		}
	}
	r := chi.NewRouter()
	r.Mount("/types", t.routes())
	r.Mount("/kube", api)
	return r, api, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on (plain HTTP, no authentication: a local example)")
	dataDir := flag.String("data-dir", "./dynamic-data", "Badger directory and the definitions file")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *listen, *dataDir); err != nil {
		logger.Error("dynamic", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, listen, dataDir string) error {
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dataDir, "db")).WithLogger(logger))
	if err != nil {
		return err
	}
	defer store.Close()
	h, api, err := newHandler(ctx, logger, store, filepath.Join(dataDir, "types.json"))
	if err != nil {
		return err
	}
	defer api.Close()
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("listening", "addr", listen, "api", "/kube", "admin", "/types")
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
