// Command embed is an existing chi service — its own routes, middleware,
// logger and Prometheus registry — that mounts a kapi API under /kube and
// serves its own typed resource type there, shop.example.com/v1 Products.
//
//	go run ./examples/embed --listen 127.0.0.1:8080
//	curl -H 'Authorization: Bearer dev-token' localhost:8080/kube/apis/shop.example.com/v1/namespaces/default/products
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Product is the service's own resource type.
type Product struct {
	meta.TypeMeta `json:",inline"`
	Metadata      meta.ObjectMeta `json:"metadata"`
	Spec          ProductSpec     `json:"spec" kapi:"required"`
	Status        ProductStatus   `json:"status,omitempty"`
}

// ProductSpec is what the product should be.
type ProductSpec struct {
	Title    string `json:"title" kapi:"required,minLength=1" doc:"Title shown in the shop."`
	PriceCts int64  `json:"priceCents" kapi:"required,min=0" doc:"Price in cents."`
	Currency string `json:"currency,omitempty" kapi:"enum=EUR|USD,default=EUR" doc:"Currency of the price."`
}

// ProductStatus is what the shop observed.
type ProductStatus struct {
	InStock int64 `json:"inStock,omitempty"`
}

// service is the host application: the routes it already had plus the
// mounted kapi handler.
type service struct {
	router  chi.Router
	api     *apiserver.Server
	metrics *prometheus.Registry
	orders  prometheus.Counter
}

func newService(ctx context.Context, logger *slog.Logger, store *badger.Store, tokens map[string]auth.User) (*service, error) {
	reg := prometheus.NewRegistry()
	orders := prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_orders_total", Help: "Orders taken by the shop's own API."})
	reg.MustRegister(orders)

	api, err := apiserver.New(ctx, apiserver.Config{
		Storage:       store,
		Logger:        logger.With("component", "kapi"),
		Metrics:       reg, // the service's own registry, shared
		Authenticator: auth.StaticTokens(tokens),
	})
	if err != nil {
		return nil, err
	}
	products, err := registry.ForType[Product](registry.Resource{
		Group: "shop.example.com", Version: "v1", Resource: "products", Kind: "Product",
		Namespaced: true, ShortNames: []string{"prod"},
		Subresources: registry.Subresources{Status: true},
		PrinterColumns: []registry.Column{
			{Name: "Title", Type: "string", JSONPath: ".spec.title"},
			{Name: "Price", Type: "integer", JSONPath: ".spec.priceCents"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
		Strategy: registry.Strategy{
			Validate: registry.Typed(func(_ context.Context, p *Product) meta.ErrorList {
				if p.Spec.Currency == "USD" && p.Spec.PriceCts%5 != 0 {
					return meta.ErrorList{meta.Invalid(meta.NewPath("spec", "priceCents"), p.Spec.PriceCts, "USD prices are multiples of 5 cents")}
				}
				return nil
			}),
		},
	})
	if err != nil {
		api.Close()
		return nil, err
	}
	if err := api.Register(products); err != nil {
		api.Close()
		return nil, err
	}

	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Recoverer)
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the shop") })
	r.Post("/orders", func(w http.ResponseWriter, _ *http.Request) {
		orders.Inc()
		w.WriteHeader(http.StatusAccepted)
	})
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	r.Mount("/kube", api)
	return &service{router: r, api: api, metrics: reg, orders: orders}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on")
	dataDir := flag.String("data-dir", "./embed-data", "Badger directory")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *listen, *dataDir); err != nil {
		logger.Error("embed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, listen, dataDir string) error {
	store, err := badger.Open(badger.DefaultOptions(dataDir).WithLogger(logger))
	if err != nil {
		return err
	}
	defer store.Close()
	svc, err := newService(ctx, logger, store, map[string]auth.User{"dev-token": {Name: "dev", Groups: []string{auth.GroupMasters}}})
	if err != nil {
		return err
	}
	defer svc.api.Close()
	srv := &http.Server{Addr: listen, Handler: svc.router}
	svc.api.ConfigureHTTPServer(srv) // header and idle timeouts
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("listening", "addr", listen, "api", "/kube")
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
