// Command notes serves a Kubernetes-style API with one custom type,
// notes.example.com/v1 Notes, stored in Badger under ./data.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Note is the custom type. Its schema comes from the json tags and the
// kapi markers.
type Note struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          NoteSpec        `json:"spec" kapi:"required"`
}

type NoteSpec struct {
	Text     string `json:"text" kapi:"required,minLength=1" doc:"What the note says."`
	Priority string `json:"priority,omitempty" kapi:"enum=low|normal|high,default=normal" doc:"How urgent it is."`
}

// newAPI returns the API handler over store, serving notes.
func newAPI(ctx context.Context, store *badger.Store, logger *slog.Logger) (*apiserver.Server, error) {
	api, err := apiserver.New(ctx, apiserver.Config{
		Storage:        store,
		Logger:         logger,
		AllowAnonymous: true, // no credentials needed: loopback only, see docs/security.md
	})
	if err != nil {
		return nil, err
	}
	notes, err := registry.ForType[Note](registry.Resource{
		Group: "notes.example.com", Version: "v1", Resource: "notes", Kind: "Note",
		Namespaced: true, ShortNames: []string{"nt"},
		PrinterColumns: []registry.Column{
			{Name: "Priority", Type: "string", JSONPath: ".spec.priority"},
			{Name: "Text", Type: "string", JSONPath: ".spec.text"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	})
	if err == nil {
		err = api.Register(notes)
	}
	if err != nil {
		api.Close()
		return nil, err
	}
	return api, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, logger); err != nil {
		logger.Error("notes", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger) error {
	store, err := badger.Open(badger.DefaultOptions("./data"))
	if err != nil {
		return err
	}
	defer store.Close()
	api, err := newAPI(ctx, store, logger)
	if err != nil {
		return err
	}
	defer api.Close()

	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: api}
	api.ConfigureHTTPServer(srv)           // header and idle timeouts
	srv.RegisterOnShutdown(api.EndWatches) // open watches end, so Shutdown can finish
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			_ = srv.Close() // cut off what is left
		}
	}()
	logger.Info("serving", "url", "http://"+srv.Addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// ListenAndServe returns as soon as Shutdown starts: wait for the
	// requests in flight before the deferred closes run.
	<-shutdownDone
	return nil
}
