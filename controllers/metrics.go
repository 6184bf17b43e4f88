package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Garbage collector actions, the values of the action label of
// kapi_garbage_collector_actions_total.
const (
	gcActionDelete       = "delete"        // an object was deleted: its owners are all gone, or one is deleting in the foreground
	gcActionDropDangling = "drop_dangling" // references to gone owners were removed from an object that keeps others
	gcActionOrphan       = "orphan"        // an owner's dependents were released and its orphan finalizer removed
	gcActionForeground   = "foreground"    // an owner's dependents went and its foregroundDeletion finalizer was removed
)

// metrics are the controllers' Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	gcActions          *prometheus.CounterVec
	gcGraphObjects     prometheus.Gauge
	gcSyncs            prometheus.Counter
	namespaceFinalized prometheus.Counter
	expiredObjects     prometheus.Counter
	migratedObjects    prometheus.Counter
	migrationFailures  prometheus.Counter
	migrationsRunning  prometheus.Gauge
	migrationsDone     prometheus.Counter
	resealedValues     prometheus.Counter
	resealPasses       *prometheus.CounterVec
	unopenableValues   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		gcActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kapi_garbage_collector_actions_total",
			Help: "Writes made by the garbage collector, by action (delete, drop_dangling, orphan, foreground).",
		}, []string{"action"}),
		gcGraphObjects: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kapi_garbage_collector_graph_objects",
			Help: "Number of objects in the garbage collector's graph: those with owner references and those being deleted.",
		}),
		gcSyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_garbage_collector_syncs_total",
			Help: "Number of times the garbage collector built its graph from a full list of storage (at start, after a failed watch, and when the set of types changes).",
		}),
		namespaceFinalized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_namespace_controller_namespaces_finalized_total",
			Help: "Number of terminating namespaces the namespace controller emptied and finalized.",
		}),
		expiredObjects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_expiry_controller_objects_expired_total",
			Help: "Number of objects of types with a time to live (events) the expiry controller deleted.",
		}),
		migratedObjects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_storage_migration_objects_migrated_total",
			Help: "Number of objects storage migrations rewrote from an earlier storage version into the current one.",
		}),
		migrationFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_storage_migration_object_failures_total",
			Help: "Number of times a storage migration could not convert an object into the storage version (the migration is retried and does not complete).",
		}),
		migrationsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kapi_storage_migrations_running",
			Help: "Number of types whose storage migration is under way (or waiting to retry) in this process.",
		}),
		migrationsDone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_storage_migrations_completed_total",
			Help: "Number of storage migrations completed: every object of the type is stored in its storage version.",
		}),
		resealedValues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kapi_encryption_values_resealed_total",
			Help: "Number of stored values of the sensitive types the reseal controller rewrote under the current encryption key.",
		}),
		resealPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kapi_encryption_reseal_passes_total",
			Help: "Reseal passes that ended, by result: complete (every value is sealed under the current key) or failed.",
		}, []string{"result"}),
		unopenableValues: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kapi_encryption_values_unopenable",
			Help: "Number of stored values of the sensitive types the last reseal pass could not open (a missing key, or a changed value): each read of one is a 500.",
		}),
	}
	for _, c := range []prometheus.Collector{m.gcActions, m.gcGraphObjects, m.gcSyncs, m.namespaceFinalized, m.expiredObjects,
		m.migratedObjects, m.migrationFailures, m.migrationsRunning, m.migrationsDone, m.resealedValues, m.resealPasses, m.unopenableValues} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every action is exported from the start, at zero.
	for _, a := range []string{gcActionDelete, gcActionDropDangling, gcActionOrphan, gcActionForeground} {
		m.gcActions.WithLabelValues(a)
	}
	m.resealPasses.WithLabelValues("complete")
	m.resealPasses.WithLabelValues("failed")
	return m, nil
}

func (m *metrics) gcAction(action string) {
	if m != nil {
		m.gcActions.WithLabelValues(action).Inc()
	}
}

func (m *metrics) gcSynced() {
	if m != nil {
		m.gcSyncs.Inc()
	}
}

func (m *metrics) gcGraph(n int) {
	if m != nil {
		m.gcGraphObjects.Set(float64(n))
	}
}

func (m *metrics) namespaceDone() {
	if m != nil {
		m.namespaceFinalized.Inc()
	}
}

func (m *metrics) expired(n int) {
	if m != nil && n > 0 {
		m.expiredObjects.Add(float64(n))
	}
}

func (m *metrics) migrated() {
	if m != nil {
		m.migratedObjects.Inc()
	}
}

func (m *metrics) migrationFailed() {
	if m != nil {
		m.migrationFailures.Inc()
	}
}

func (m *metrics) migrationRunning(delta float64) {
	if m != nil {
		m.migrationsRunning.Add(delta)
	}
}

func (m *metrics) migrationCompleted() {
	if m != nil {
		m.migrationsDone.Inc()
	}
}

func (m *metrics) resealed(n int64) {
	if m != nil && n > 0 {
		m.resealedValues.Add(float64(n))
	}
}

// resealPassEnded records the end of a pass that found failed values it
// could not open and ended with err.
func (m *metrics) resealPassEnded(failed int64, err error) {
	if m == nil {
		return
	}
	m.unopenableValues.Set(float64(failed))
	if err != nil {
		m.resealPasses.WithLabelValues("failed").Inc()
	} else {
		m.resealPasses.WithLabelValues("complete").Inc()
	}
}
