// Package controllers holds the controllers kapi runs in-process on top of a
// registry: the namespace controller, which empties terminating namespaces
// (namespace.go), the garbage collector, which follows ownerReferences
// (gc.go), the expiry controller, which deletes objects of types with a
// time to live (expiry.go), and the migration controller, which rewrites
// objects stored in an earlier storage version (migration.go), and the reseal controller, which keeps the values of the sensitive types sealed under the current encryption key (reseal.go). They use only the registry's exported API, as a controller
// outside kapi would, and work from storage alone: a restart rebuilds their
// state and finishes interrupted work.
//
// apiserver.New starts them (see its Config.DisableControllers and
// Config.Elector); a host that serves a registry.Registry itself runs them
// with New and Run. Every write they make uses the context Run was given,
// so under storage/etcd's Elector each one carries the term's
// storage.Fence: a write refused by it (storage.ErrFenced) ends the term's
// context, and they stop.
package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Config configures the controllers.
type Config struct {
	// Logger receives operational messages. Default: discard.
	Logger *slog.Logger
	// Resync is how often the namespace controller looks at every
	// terminating namespace again even without a change. Default 30s.
	Resync time.Duration
	// Retry is how soon a controller looks again at work that is waiting
	// for finalizers or that failed. Default 1s.
	Retry time.Duration
	// Metrics, when set, is where the controllers register their Prometheus
	// metrics (kapi_garbage_collector_actions_total,
	// kapi_garbage_collector_graph_objects,
	// kapi_garbage_collector_syncs_total,
	// kapi_namespace_controller_namespaces_finalized_total,
	// kapi_expiry_controller_objects_expired_total,
	// kapi_storage_migration_objects_migrated_total,
	// kapi_storage_migration_object_failures_total,
	// kapi_storage_migrations_running,
	// kapi_storage_migrations_completed_total,
	// kapi_encryption_values_resealed_total,
	// kapi_encryption_reseal_passes_total,
	// kapi_encryption_values_unopenable).
	Metrics prometheus.Registerer
	// MigrationRate is how many objects a second storage migrations
	// rewrite at most, all types together, so that they leave storage to
	// the clients. Default 200.
	MigrationRate float64
}

// Controllers are the in-process controllers of one registry.
type Controllers struct {
	reg     *registry.Registry
	cfg     Config
	metrics *metrics // nil without Config.Metrics
	// typesChanged is signalled (without blocking) after every Register and
	// Unregister; the garbage collector rebuilds its graph then.
	typesChanged chan struct{}
	// expiryTypesChanged is the same signal for the expiry controller.
	expiryTypesChanged chan struct{}
	// migrationTypesChanged is the same signal for the migration
	// controller.
	migrationTypesChanged chan struct{}
	// nsEvents and gcEvents record the controllers' events.
	nsEvents, gcEvents *recorder

	// migrationLimiter throttles the storage migrations' rewrites.
	migrationLimiter *rate.Limiter
	migMu            sync.Mutex
	running          map[meta.GroupResource]*migrator // guarded by migMu

	resealMu sync.Mutex
	reseal   ResealStatus // guarded by resealMu
}

// New returns the controllers of reg and registers their metrics. Nothing
// runs before Run.
func New(reg *registry.Registry, cfg Config) (*Controllers, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.MigrationRate <= 0 {
		cfg.MigrationRate = 200
	}
	c := &Controllers{reg: reg, cfg: cfg, typesChanged: make(chan struct{}, 1), expiryTypesChanged: make(chan struct{}, 1),
		migrationTypesChanged: make(chan struct{}, 1), migrationLimiter: rate.NewLimiter(rate.Limit(cfg.MigrationRate), 1),
		running: map[meta.GroupResource]*migrator{}}
	c.nsEvents = newRecorder(c, "namespace-controller")
	c.gcEvents = newRecorder(c, "garbage-collector-controller")
	if cfg.Metrics != nil {
		var err error
		if c.metrics, err = newMetrics(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("controllers: registering metrics: %w", err)
		}
	}
	reg.OnChange(func() {
		for _, ch := range []chan struct{}{c.typesChanged, c.expiryTypesChanged, c.migrationTypesChanged} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return c, nil
}

// Run runs the namespace controller, the garbage collector, the expiry
// controller, the migration controller and, with encryption at rest, the
// reseal controller until ctx ends. It may run again after it returned (an
// apiserver.Elector runs it each time this instance leads), but two runs
// must not overlap.
func (c *Controllers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.runNamespaceController(ctx) })
	wg.Go(func() { c.runGarbageCollector(ctx) })
	wg.Go(func() { c.runExpiry(ctx) })
	wg.Go(func() { c.runMigrations(ctx) })
	wg.Go(func() { c.runReseal(ctx) })
	wg.Wait()
}

// sleep waits for d, or less when ctx ends first: it reports whether it
// waited the whole of d.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
