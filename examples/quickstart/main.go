// Command quickstart is a standalone kapi server on the embedded Badger store.
// It serves core v1 namespaces, configmaps and secrets, coordination.k8s.io/v1
// leases, and the widgets type in example.dev/v1 and example.dev/v2 (stored
// in v1, or in v2 with --widget-storage-version v2, converted by Go
// functions: widget_v2.go; with the custom
// subresources widgets/restart, widgets/log and widgets/health:
// docs/extension.md) over HTTPS (a CA, a serving
// certificate and an admin token are created in <data-dir>/pki on first
// start), and writes a kubeconfig so that kubectl works with no set-up:
//
//	go run ./examples/quickstart
//	kubectl --kubeconfig ./data/kubeconfig get widgets
//
// Built with -tags etcd and run with --etcd-endpoints, it keeps objects in
// etcd instead, and several servers over the same etcd and --etcd-prefix
// serve one API (see docs/scaling.md). Subcommands back up a running server and restore a
// backup (backup.go, docs/operations.md#backups).
package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

func main() {
	if ok, err := runSubcommand(context.Background(), os.Args[1:]); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "quickstart:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	dataDir, listen, policy, logLevel, auditLog, pprofListen, memLimit string
	watchCacheMemory, maxWatchBytesPerUser                             string
	maxWatchesPerUser, maxWatches                                      int
	encryptionKeyFile                                                  string
	inMemory, insecure                                                 bool
	history, shutdownTimeout, eventTTL                                 time.Duration
	storage                                                            storageFlags
	widgetStorage                                                      string  // "v1" or "v2"
	migrationRate                                                      float64 // objects a second; 0: the library's default
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.dataDir, "data-dir", "./data", "directory for the Badger database and the kubeconfig")
	flag.BoolVar(&o.inMemory, "in-memory", false, "keep objects in memory only (the kubeconfig is still written to --data-dir)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:6443", "address to serve on")
	flag.BoolVar(&o.insecure, "insecure-http", false, "serve plain HTTP without authentication (loopback addresses only; for local development)")
	flag.StringVar(&o.policy, "authorization-policy", "", "RBAC policy file (YAML: roles and bindings); default: every authenticated user may do everything")
	flag.DurationVar(&o.history, "history-window", 10*time.Minute, "how long change history (watch resumption, continue tokens) is kept")
	flag.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	flag.StringVar(&o.storage.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client URLs: keep objects in etcd instead of Badger (several servers over one etcd and prefix serve one API)")
	flag.StringVar(&o.storage.etcdPrefix, "etcd-prefix", defaultEtcdPrefix, "key prefix in etcd (one per API sharing an etcd cluster)")
	flag.StringVar(&o.storage.etcdCA, "etcd-cafile", "", "CA certificates that sign etcd's server certificates (default: the system's)")
	flag.StringVar(&o.storage.etcdCert, "etcd-certfile", "", "client certificate for etcd (with --etcd-keyfile)")
	flag.StringVar(&o.storage.etcdKey, "etcd-keyfile", "", "client key for etcd")
	flag.StringVar(&o.auditLog, "audit-log", "", "append an audit record per request to this file, as JSON lines")
	flag.StringVar(&o.pprofListen, "pprof-listen", "", "serve Go's net/http/pprof profiles on this separate address (loopback only; off by default)")
	flag.StringVar(&o.storage.mapped, "storage-mapped-memory", fmt.Sprintf("%dMiB", badger.DefaultMaxMappedResident>>20), "bound on the resident memory of Badger's memory-mapped tables (Linux): over it, the pages of the oldest tables are handed back to the kernel and read again from the page cache or disk when needed; off keeps every page resident until the kernel reclaims it")
	flag.StringVar(&o.memLimit, "memory-limit", "auto", "Go's soft memory limit: auto (the live heap plus a quarter of it, at least 32 MiB more, at least 160 MiB in all, re-evaluated after every garbage collection), off (GOGC alone), or a fixed size such as 512MiB; a GOMEMLIMIT environment variable wins")
	flag.StringVar(&o.watchCacheMemory, "watch-cache-memory", "256MiB", "memory budget of the watch caches' copies of objects, all types together (a size such as 256MiB; 0 keeps none): the types read least recently are dropped from memory first and then read from storage (docs/watch.md)")
	flag.StringVar(&o.maxWatchBytesPerUser, "max-watch-bytes-per-user", "64MiB", "memory of the large frames one user's watches encode each for itself and have not written, and of what they read from storage (a size such as 64MiB, or off): past it the user's watches wait (docs/security.md)")
	flag.IntVar(&o.maxWatchesPerUser, "max-watches-per-user", 0, "watches one user outside system:masters may have open at once; past it a watch is refused with 429 (0: the library's default, 1000; -1: no bound; docs/security.md)")
	flag.IntVar(&o.maxWatches, "max-watches", 0, "watches all users together may have open at once (0: the library's default, 10000 or half the open-file limit; -1: no bound)")
	flag.DurationVar(&o.eventTTL, "event-ttl", time.Hour, "how long an event lives after its last write, as kube-apiserver's --event-ttl")
	flag.StringVar(&o.widgetStorage, "widget-storage-version", "v1", "the version widgets are written in, v1 or v2 (both stay served); on a change the objects stored in the other one are migrated while the server runs")
	flag.Float64Var(&o.migrationRate, "migration-rate", 0, "at most this many objects a second are rewritten by storage migrations (0: the library's default, 200)")
	flag.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long in-flight requests may take to finish before they are cut off (watches end at once)")
	flag.StringVar(&o.encryptionKeyFile, "encryption-key-file", "", "seal secrets in storage with AES-GCM under the keys of this file (NAME:BASE64 lines, the first one seals; see encryption.go and docs/security.md)")
	flag.Parse()
	o.storage.dataDir, o.storage.inMemory, o.storage.history = o.dataDir, o.inMemory, o.history
	return o
}

func run() error {
	o := parseFlags()
	if o.pprofListen == "" {
		// Only --pprof-listen serves heap profiles: without it, do not pay
		// for sampling allocations for one (a stack walk every 512 KiB
		// allocated on average).
		runtime.MemProfileRate = 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ml, err := parseMemoryLimit(o.memLimit)
	if err != nil {
		return err
	}
	defer applyMemoryLimit(ml, logger)()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.widgetStorage != "v1" && o.widgetStorage != "v2" {
		return fmt.Errorf("--widget-storage-version: %q is not a version of widgets (v1 or v2)", o.widgetStorage)
	}
	if o.migrationRate < 0 {
		return fmt.Errorf("--migration-rate: %v is negative", o.migrationRate)
	}
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return fmt.Errorf("creating data directory: %w", err)
	}
	store, elector, err := openStorage(ctx, o.storage, logger)
	if err != nil {
		return fmt.Errorf("opening storage: %w", err)
	}
	defer store.Close()

	if o.pprofListen != "" {
		stopPprof, err := servePprof(o.pprofListen, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	cfg := apiserver.Config{Storage: store, Logger: logger, Elector: elector, MigrationRate: o.migrationRate,
		MaxWatchesPerUser: o.maxWatchesPerUser, MaxWatches: o.maxWatches}
	if cfg.Watch.StateBytes, err = parseSize(o.watchCacheMemory); err != nil {
		return fmt.Errorf("--watch-cache-memory: %w", err)
	}
	if cfg.Watch.StateBytes == 0 {
		cfg.Watch.StateBytes = -1 // none
	}
	if cfg.MaxWatchBytesPerUser, err = parseBound(o.maxWatchBytesPerUser); err != nil {
		return fmt.Errorf("--max-watch-bytes-per-user: %w", err)
	}
	if cfg.Encryption, err = loadEncryptionKeys(o.encryptionKeyFile, logger); err != nil {
		return err
	}
	tlsConfig, creds, err := secure(&cfg, o, addr)
	if err != nil {
		return err
	}
	if o.auditLog != "" {
		closeAudit, err := openAudit(&cfg, o.auditLog, logger)
		if err != nil {
			return err
		}
		defer closeAudit()
	}
	api, err := newAPI(ctx, cfg, o.eventTTL, o.widgetStorage)
	if err != nil {
		return err
	}
	defer api.Close()

	kubeconfig, err := filepath.Abs(filepath.Join(o.dataDir, "kubeconfig"))
	if err != nil {
		return err
	}
	if err := writeKubeconfig(kubeconfig, addr, creds); err != nil {
		return err
	}
	logger.Info("listening", "addr", addr, "kubeconfig", kubeconfig)
	return serve(ctx, stop, api, ln, tlsConfig, o.shutdownTimeout, logger)
}

// secure sets up authentication and authorization: with --insecure-http
// anonymous access on a loopback address; otherwise TLS with the quickstart's
// CA, the admin token and client certificates; and the RBAC policy file.
func secure(cfg *apiserver.Config, o options, addr string) (*tls.Config, *pki, error) {
	host, _, _ := net.SplitHostPort(addr)
	var tlsConfig *tls.Config
	var creds *pki
	if o.insecure {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, nil, fmt.Errorf("--insecure-http serves without authentication and is only allowed on a loopback address, not %s", host)
		}
		cfg.AllowAnonymous = true
	} else {
		var err error
		if creds, err = loadOrCreatePKI(filepath.Join(o.dataDir, "pki"), host); err != nil {
			return nil, nil, fmt.Errorf("preparing TLS: %w", err)
		}
		cfg.Authenticator = auth.Union(
			auth.StaticTokens(map[string]auth.User{creds.adminToken: {Name: "admin", UID: "admin", Groups: []string{auth.GroupMasters}}}),
			auth.ClientCertificates(creds.pool()),
		)
		tlsConfig = &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{creds.serving},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    creds.pool(),
		}
	}
	if o.policy != "" {
		p, err := auth.LoadPolicy(o.policy)
		if err != nil {
			return nil, nil, err
		}
		if cfg.Authorizer, err = auth.RBAC(p); err != nil {
			return nil, nil, err
		}
	}
	return tlsConfig, creds, nil
}

// openAudit sends audit records to path as JSON lines; the function it
// returns writes the last ones out, after the server has stopped.
func openAudit(cfg *apiserver.Config, path string, logger *slog.Logger) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit-log: %w", err)
	}
	sink := apiserver.NewJSONLinesAuditSink(f)
	cfg.Audit = sink
	return func() {
		if err := sink.Close(); err != nil {
			logger.Error("writing the audit log", "err", err)
		}
		if n := sink.Dropped(); n > 0 {
			logger.Warn("audit records dropped (the audit log was too slow)", "count", n)
		}
		f.Close()
	}, nil
}

// newAPI makes the API with its metrics (served at /metrics, authorized as
// a non-resource URL) and backups (/backup, backup.go) and registers the built-in configmaps, secrets,
// leases and events (both views, living eventTTL), and widgets in two
// versions, written in widgetStorage.
func newAPI(ctx context.Context, cfg apiserver.Config, eventTTL time.Duration, widgetStorage string) (*apiserver.Server, error) {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics.MustRegister(mappedMemoryMetrics(cfg.Storage)...)
	cfg.Metrics = metrics
	cfg.NonResourceHandlers = map[string]http.Handler{"/metrics": promhttp.HandlerFor(metrics, promhttp.HandlerOpts{})}
	mountBackup(&cfg)
	api, err := apiserver.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	types := append([]registry.Resource{registry.ConfigMaps(), registry.Secrets(), registry.Leases()},
		registry.Events(registry.EventOptions{TTL: eventTTL})...)
	for _, res := range types {
		if err = api.Register(res); err != nil {
			break
		}
	}
	if err == nil {
		var wd registry.Versions
		if wd, err = widgetVersions(widgetStorage); err == nil {
			err = api.RegisterVersions(wd)
		}
	}
	if err != nil {
		api.Close()
		return nil, err
	}
	return api, nil
}

// serve serves api on ln until ctx ends, then shuts down gracefully: stop
// accepting connections, end watches, let the requests in flight finish
// within timeout, then cut off what is left. stop lets a second signal kill
// the process at once.
func serve(ctx context.Context, stop func(), api *apiserver.Server, ln net.Listener, tlsConfig *tls.Config, timeout time.Duration, logger *slog.Logger) error {
	// Request contexts end only when a graceful shutdown runs out of time.
	base, abort := context.WithCancel(context.Background())
	defer abort()
	srv := &http.Server{Handler: api, BaseContext: func(net.Listener) context.Context { return base }}
	api.ConfigureHTTPServer(srv) // header and idle timeouts, header size
	// Shutdown ends open watches (clients watch again, elsewhere or after
	// the restart); it waits for other requests.
	srv.RegisterOnShutdown(api.EndWatches)
	errc := make(chan error, 1)
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stop()
	logger.Info("shutting down", "timeout", timeout)
	shutdown, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		logger.Warn("requests still in flight after the shutdown timeout; aborting them")
		abort()
		_ = srv.Close()
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the server at addr: HTTPS with the
// CA and the admin token when creds is set, plain HTTP otherwise.
func writeKubeconfig(path, addr string, creds *pki) error {
	server, cluster, user := "http://"+addr, "", "  user: {}"
	if creds != nil {
		server = "https://" + addr
		cluster = "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(creds.caPEM)
		user = "  user:\n    token: " + creds.adminToken
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kapi
  cluster:
    server: %s%s
contexts:
- name: kapi
  context:
    cluster: kapi
    user: admin
    namespace: default
current-context: kapi
users:
- name: admin
%s
`, server, cluster, user)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
