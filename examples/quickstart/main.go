// Command quickstart is a standalone kapi server on the embedded Badger store.
// It serves core v1 namespaces and configmaps and the example.dev/v1 widgets
// type, and writes a kubeconfig so that kubectl works with no set-up:
//
//	go run ./examples/quickstart
//	kubectl --kubeconfig ./data/kubeconfig get widgets
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "./data", "directory for the Badger database and the kubeconfig")
	inMemory := flag.Bool("in-memory", false, "keep objects in memory only (the kubeconfig is still written to --data-dir)")
	listen := flag.String("listen", "127.0.0.1:6443", "address to serve on (plain HTTP)")
	history := flag.Duration("history-window", 10*time.Minute, "how long change history (watch resumption, continue tokens) is kept")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return fmt.Errorf("creating data directory: %w", err)
	}
	opts := badger.DefaultOptions(filepath.Join(*dataDir, "db"))
	if *inMemory {
		opts = badger.InMemoryOptions()
	}
	opts = opts.WithLogger(logger).WithRetentionTime(*history)
	store, err := badger.Open(opts)
	if err != nil {
		return fmt.Errorf("opening storage: %w", err)
	}
	defer store.Close()

	api, err := apiserver.New(ctx, apiserver.Config{Storage: store, Logger: logger})
	if err != nil {
		return err
	}
	defer api.Close()
	wd, err := widgets()
	if err != nil {
		return err
	}
	for _, res := range []registry.Resource{registry.ConfigMaps(), wd} {
		if err := api.Register(res); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	kubeconfig, err := filepath.Abs(filepath.Join(*dataDir, "kubeconfig"))
	if err != nil {
		return err
	}
	if err := writeKubeconfig(kubeconfig, "http://"+addr); err != nil {
		return err
	}
	// Requests (watches included) end when the server is asked to stop.
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	logger.Info("listening", "addr", addr, "kubeconfig", kubeconfig)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// writeKubeconfig writes a kubeconfig pointing at server.
func writeKubeconfig(path, server string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kapi
  cluster:
    server: %s
contexts:
- name: kapi
  context:
    cluster: kapi
    user: kapi
    namespace: default
current-context: kapi
users:
- name: kapi
  user: {}
`, server)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
