// Command controller runs a Kubernetes-style controller, built with
// controller-runtime exactly as it would be for a Kubernetes cluster,
// against a kapi API server embedded in the same process.
//
// The server keeps its objects in Badger under --data-dir and serves
// core v1 ConfigMaps and example.dev/v1 Widgets over HTTPS on a loopback
// address. The controller watches Widgets and, for each one:
//
//   - adds a finalizer, example.dev/unpublish;
//   - renders the widget into a ConfigMap "widget-<name>" with server-side
//     apply (field manager widget-controller), owned by the widget so that
//     the server's garbage collector deletes it with the widget;
//   - publishes a record of it to <data-dir>/published (a stand-in for an
//     external system), which the finalizer removes before the widget goes;
//   - reports phase, observedGeneration and Ready/ConfigMapApplied
//     conditions in the status subresource.
//
// Run it and use kubectl against it:
//
//	go run ./examples/controller
//	kubectl --kubeconfig ./controller-data/kubeconfig apply -f - <<<'{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3,"color":"red"}}'
//	kubectl --kubeconfig ./controller-data/kubeconfig get widgets,configmaps
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	// A flag set of its own: controller-runtime adds --kubeconfig to the
	// global one, which this program does not use.
	flags := flag.NewFlagSet("controller", flag.ExitOnError)
	dataDir := flags.String("data-dir", "./controller-data", "directory for the Badger database, the kubeconfig and the published records")
	listen := flags.String("listen", "127.0.0.1:6444", "address the embedded API server listens on")
	logLevel := flags.String("log-level", "info", "log level: debug, info, warn, error")
	_ = flags.Parse(os.Args[1:])

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "controller: --log-level:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *dataDir, *listen); err != nil {
		logger.Error("controller", "err", err)
		os.Exit(1)
	}
}

// run serves the API and runs the controller until ctx ends.
func run(ctx context.Context, logger *slog.Logger, dataDir, listen string) error {
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	srv, err := startServer(ctx, logger, dataDir, listen)
	if err != nil {
		return err
	}
	defer srv.Close()

	kubeconfig, err := filepath.Abs(filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		return err
	}
	if err := srv.writeKubeconfig(kubeconfig); err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := newManager(srv.RESTConfig, scheme, filepath.Join(dataDir, "published"))
	if err != nil {
		return err
	}
	logger.Info("serving; stop with Ctrl-C", "addr", srv.Addr, "kubeconfig", kubeconfig)
	fmt.Printf("kubeconfig: %s\n  kubectl --kubeconfig %s get widgets\n", kubeconfig, kubeconfig)
	// Start blocks until ctx ends, then stops the controller (in-flight
	// reconciles finish) before the server shuts down.
	return mgr.Start(ctx)
}
