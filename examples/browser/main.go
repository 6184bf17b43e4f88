// Command browser serves a web page that lists example.dev/v1 Widgets and
// keeps the list live from a watch, next to the kapi API it reads from.
//
// The program mounts kapi under /k8s/ and serves the page (HTML and
// JavaScript embedded in the binary, no build step) under /ui/, so the page
// calls the API on its own origin: no CORS. The page lists widgets, then
// watches from the list's resourceVersion with bookmarks
// (?watch=1&allowWatchBookmarks=true), reading the chunked stream of JSON
// events with fetch(); it watches again from the last resourceVersion when a
// watch ends, and lists again on 410 Gone. It can also create and delete
// widgets.
//
// The API runs without authentication (anonymous requests are allowed), so
// the program only listens on loopback addresses:
//
//	go run ./examples/browser
//	open http://127.0.0.1:8080/ui/
//	curl -X POST -H 'Content-Type: application/json' \
//	  -d '{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3,"color":"red"}}' \
//	  http://127.0.0.1:8080/k8s/apis/example.dev/v1/namespaces/default/widgets
package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

//go:embed ui
var uiFiles embed.FS

// Widget is the resource type the page shows.
type Widget struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          WidgetSpec      `json:"spec" kapi:"required"`
	Status        WidgetStatus    `json:"status,omitempty"`
}

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	Size    int64  `json:"size" kapi:"required,min=1,max=100" doc:"Size of the widget, 1 to 100."`
	Color   string `json:"color,omitempty" kapi:"enum=red|green|blue,default=blue" doc:"Color of the widget."`
	Message string `json:"message,omitempty" kapi:"maxLength=256" doc:"Text printed on the widget."`
}

// WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	Phase string `json:"phase,omitempty" doc:"What a controller reports."`
}

// newHandler returns the program's handler: the API under /k8s/, the page
// under /ui/. Close the returned server when done.
func newHandler(ctx context.Context, logger *slog.Logger, store *badger.Store) (http.Handler, *apiserver.Server, error) {
	api, err := apiserver.New(ctx, apiserver.Config{
		Storage:        store,
		Logger:         logger.With("component", "kapi"),
		AllowAnonymous: true, // loopback only, see run
	})
	if err != nil {
		return nil, nil, err
	}
	widgets, err := registry.ForType[Widget](registry.Resource{
		Group: "example.dev", Version: "v1", Resource: "widgets", Kind: "Widget",
		Namespaced: true, ShortNames: []string{"wd"},
		Subresources: registry.Subresources{Status: true},
		PrinterColumns: []registry.Column{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
			{Name: "Color", Type: "string", JSONPath: ".spec.color"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	})
	if err == nil {
		err = api.Register(widgets)
	}
	if err != nil {
		api.Close()
		return nil, nil, err
	}
	ui, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		api.Close()
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/k8s/", http.StripPrefix("/k8s", api))
	mux.Handle("/ui/", http.StripPrefix("/ui/", http.FileServerFS(ui)))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	return mux, api, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on (a loopback address: the API has no authentication)")
	dataDir := flag.String("data-dir", "./browser-data", "Badger directory")
	inMemory := flag.Bool("in-memory", false, "keep widgets in memory only")
	history := flag.Duration("history-window", 10*time.Minute, "how long change history is kept: a page that was away longer lists again (410 Gone)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *listen, *dataDir, *inMemory, *history); err != nil {
		logger.Error("browser", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, listen, dataDir string, inMemory bool, history time.Duration) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("the API allows anonymous requests, so it only listens on loopback addresses, not %q", host)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	opts := badger.DefaultOptions(dataDir)
	if inMemory {
		opts = badger.InMemoryOptions()
	}
	opts = opts.WithRetentionTime(history)
	if interval := history / 4; interval < badger.DefaultCompactionInterval {
		// Apply a short window promptly.
		opts = opts.WithCompactionInterval(max(interval, 100*time.Millisecond))
	}
	store, err := badger.Open(opts.WithLogger(logger))
	if err != nil {
		return err
	}
	defer store.Close()
	handler, api, err := newHandler(ctx, logger, store)
	if err != nil {
		return err
	}
	defer api.Close()

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{Handler: checkHost(handler, host, port), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(api.EndWatches) // the page watches again after a restart
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close() // cut off what is left
		}
	}()
	base := "http://" + ln.Addr().String()
	logger.Info("listening", "ui", base+"/ui/", "api", base+"/k8s/")
	fmt.Printf("UI: %s/ui/\nAPI: %s/k8s/\n", base, base)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Serve returns as soon as Shutdown starts: wait for the requests in
	// flight before the deferred api.Close and store.Close run.
	<-shutdownDone
	return nil
}

// checkHost refuses requests whose Host header is not this server's own
// loopback address (listenHost, localhost, 127.0.0.1 or [::1], with the
// port): the API allows anonymous reads and writes, and a web page on any
// other site could reach it through a DNS name rebound to 127.0.0.1, whose
// requests carry that name as Host.
func checkHost(next http.Handler, listenHost, port string) http.Handler {
	allowed := map[string]bool{}
	for _, h := range []string{listenHost, "localhost", "127.0.0.1", "::1"} {
		allowed[strings.ToLower(net.JoinHostPort(h, port))] = true
		if port == "80" {
			allowed[strings.ToLower(h)] = true
			if strings.Contains(h, ":") {
				allowed["["+strings.ToLower(h)+"]"] = true
			}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[strings.ToLower(r.Host)] {
			http.Error(w, "forbidden: the Host header must name this server's loopback address", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
