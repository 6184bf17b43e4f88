package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// The migration controller rewrites the objects of a type in several
// versions (registry.Registry.RegisterVersions) that are still stored in
// an earlier storage version into the current one, as Kubernetes' storage
// version migrator does, and then records the migration complete
// (TypeRecord.StoredVersions becomes the storage version alone), after
// which the host may remove the old versions.
//
// One pass walks the type's storage prefix in pages and rewrites every
// object not in the storage version (registry.Registry.MigrateStored: a
// compare-and-swap, so a client's write in between wins), at most
// Config.MigrationRate objects a second over all types. After each page
// it records its progress (the target version and the last key done)
// under the registry's key prefix, so that a pass interrupted by a crash,
// a restart or a change of leader resumes after that key. A pass with
// objects that could not be converted does not complete: it is run again,
// from the start, after a growing delay. A new storage version while a
// pass runs restarts it for the new target.

const (
	// migrationPageSize is how many objects a pass lists at once; its
	// progress is recorded after each page.
	migrationPageSize = 100
	// scanPageBytes bounds the values of one page of the controllers'
	// storage scans (migration, garbage collection, expiry).
	scanPageBytes = 4 << 20
	// migrationParallelism is how many rewrites of a page are in flight at
	// once, so that storage commits them together.
	migrationParallelism = 4
	// migrationMaxBackoff bounds the delay before a failed pass is tried
	// again.
	migrationMaxBackoff = 5 * time.Minute
	// migrationsPrefix is where, under the registry's key prefix, each
	// type's migration progress is recorded.
	migrationsPrefix = "_kapi/migrations/"
)

// MigrationStatus is the storage migration state of one type registered in
// several versions (Controllers.Migrations).
type MigrationStatus struct {
	Group, Resource string
	// StorageVersion is the version objects are written in: the target.
	StorageVersion string
	// StoredVersions are the versions objects may still be stored in (the
	// type record's, a CRD's status.storedVersions).
	StoredVersions []string
	// Complete: every object is stored in StorageVersion (StoredVersions
	// holds it alone), so the other versions may be removed.
	Complete bool
	// Running: a pass is under way in this process (the leader's).
	Running bool
	// Migrated is how many objects the migration to StorageVersion has
	// rewritten, over restarts.
	Migrated int64
	// Failed is how many objects the last pass that ended could not
	// convert: such a pass does not complete the migration, and another
	// one follows.
	Failed int64
	// LastKey is the last storage key the current pass has done, as
	// recorded: a restarted pass resumes after it.
	LastKey string
	// ResumedAfter is the key this process's current pass started after
	// ("" for a pass from the start); Scanned is how many objects it has
	// looked at since.
	ResumedAfter string
	Scanned      int64
	// LastError is the error that ended this process's last failed pass.
	LastError string
}

// migrationProgress is the recorded progress of one type's migration.
type migrationProgress struct {
	StorageVersion string `json:"storageVersion"`
	LastKey        string `json:"lastKey,omitempty"`
	Migrated       int64  `json:"migrated"`
	PassFailed     int64  `json:"passFailed,omitempty"` // in the current pass, so far
	Failed         int64  `json:"failed,omitempty"`     // in the last pass that ended
	Complete       bool   `json:"complete,omitempty"`
}

// migrator runs the migration of one type to one storage version.
type migrator struct {
	c   *Controllers
	gr  meta.GroupResource
	mig registry.StorageMigration

	mu sync.Mutex // guards the fields below, read by Migrations
	MigrationStatus

	cancel context.CancelFunc
	done   chan struct{}
}

// runMigrations runs a migrator for every type in several versions whose
// objects may be stored in another version than its storage version,
// restarting it when the storage version changes, until ctx ends.
func (c *Controllers) runMigrations(ctx context.Context) {
	defer func() {
		for gr, m := range c.migrators() {
			m.cancel()
			<-m.done
			c.setMigrator(gr, nil)
		}
	}()
	for {
		if err := c.startMigrations(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("storage migrations: reading the types", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.migrationTypesChanged:
		case <-time.After(c.cfg.Resync):
		}
	}
}

// startMigrations stops the migrators whose target is no longer a
// type's storage version and starts one for every pending migration
// without one.
func (c *Controllers) startMigrations(ctx context.Context) error {
	ms, err := c.reg.StorageMigrations(ctx)
	if err != nil {
		return err
	}
	want := map[meta.GroupResource]registry.StorageMigration{}
	for _, m := range ms {
		if m.Pending() {
			want[meta.GroupResource{Group: m.Group, Resource: m.Resource}] = m
		}
	}
	for gr, m := range c.migrators() {
		select {
		case <-m.done:
		default:
			if w, ok := want[gr]; ok && w.StorageVersion == m.mig.StorageVersion {
				continue // running for the right target
			}
			m.cancel()
			<-m.done
		}
		c.setMigrator(gr, nil)
	}
	for gr, mig := range want {
		if _, ok := c.migrators()[gr]; ok {
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		m := &migrator{c: c, gr: gr, mig: mig, cancel: cancel, done: make(chan struct{})}
		m.Group, m.Resource, m.StorageVersion = gr.Group, gr.Resource, mig.StorageVersion
		c.setMigrator(gr, m)
		go func() { defer close(m.done); m.run(mctx) }()
	}
	return nil
}

func (c *Controllers) migrators() map[meta.GroupResource]*migrator {
	c.migMu.Lock()
	defer c.migMu.Unlock()
	out := make(map[meta.GroupResource]*migrator, len(c.running))
	for gr, m := range c.running {
		out[gr] = m
	}
	return out
}

func (c *Controllers) setMigrator(gr meta.GroupResource, m *migrator) {
	c.migMu.Lock()
	defer c.migMu.Unlock()
	if m == nil {
		delete(c.running, gr)
		return
	}
	c.running[gr] = m
}

// run runs passes until one completes the migration or ctx ends, waiting
// longer after each failed one.
func (m *migrator) run(ctx context.Context) {
	m.c.metrics.migrationRunning(1)
	defer m.c.metrics.migrationRunning(-1)
	backoff := m.c.cfg.Retry
	for ctx.Err() == nil {
		err := m.pass(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		m.Running, m.LastError = false, err.Error()
		m.mu.Unlock()
		m.c.cfg.Logger.Warn("storage migration failed, will retry", "resource", m.gr.String(),
			"storageVersion", m.mig.StorageVersion, "retryIn", backoff, "err", err)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, migrationMaxBackoff)
	}
}

// pass rewrites every object not in the target version, from the recorded
// progress on, and then completes the migration.
func (m *migrator) pass(ctx context.Context) error {
	p, rev, err := m.c.loadProgress(ctx, m.gr)
	if err != nil {
		return err
	}
	if p.StorageVersion != m.mig.StorageVersion {
		p = migrationProgress{StorageVersion: m.mig.StorageVersion}
	} else if p.Complete {
		// Complete for this target once, pending again since: the type
		// was written in another version meanwhile.
		p = migrationProgress{StorageVersion: m.mig.StorageVersion, Migrated: p.Migrated}
	}
	m.mu.Lock()
	m.Running, m.ResumedAfter, m.Scanned = true, p.LastKey, 0
	m.Migrated, m.Failed, m.LastKey = p.Migrated, p.Failed, p.LastKey
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.Running = false
		m.mu.Unlock()
	}()
	for {
		opts := storage.ListOptions{Prefix: m.mig.Prefix, Limit: migrationPageSize, MaxBytes: scanPageBytes}
		if p.LastKey != "" {
			opts.StartKey = append([]byte(p.LastKey), 0) // the first key after it
		}
		page, err := m.c.reg.Storage().List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing %s: %w", m.mig.Prefix, err)
		}
		if len(page.Items) == 0 {
			break
		}
		migrated, failed, err := m.migratePage(ctx, page.Items)
		p.Migrated += migrated
		p.PassFailed += failed
		if err != nil {
			return err
		}
		p.LastKey = string(page.Items[len(page.Items)-1].Key)
		if rev, err = m.c.saveProgress(ctx, m.gr, p, rev); err != nil {
			return err
		}
		m.mu.Lock()
		m.Scanned += int64(len(page.Items))
		m.Migrated, m.LastKey = p.Migrated, p.LastKey
		m.mu.Unlock()
		if !page.More {
			break
		}
	}
	if p.PassFailed > 0 {
		p.LastKey, p.Failed, p.PassFailed = "", p.PassFailed, 0 // the next pass starts from the start
		if _, err := m.c.saveProgress(ctx, m.gr, p, rev); err != nil {
			return err
		}
		m.mu.Lock()
		m.Failed, m.LastKey = p.Failed, ""
		m.mu.Unlock()
		return fmt.Errorf("%d objects could not be converted to %s", p.Failed, m.mig.StorageVersion)
	}
	if err := m.c.reg.CompleteMigration(ctx, m.gr, m.mig.StorageVersion); err != nil {
		return fmt.Errorf("completing the migration: %w", err)
	}
	p.LastKey, p.Failed, p.Complete = "", 0, true
	if _, err := m.c.saveProgress(ctx, m.gr, p, rev); err != nil {
		return err
	}
	m.c.metrics.migrationCompleted()
	m.c.cfg.Logger.Info("storage migration complete", "resource", m.gr.String(), "storageVersion", m.mig.StorageVersion, "migrated", p.Migrated)
	m.mu.Lock()
	m.LastKey, m.LastError, m.Failed = "", "", 0
	m.mu.Unlock()
	return nil
}

// migratePage rewrites the objects of a page not in the target version, a
// few at a time, each after a token of the rate limiter. It counts the
// objects rewritten and those that could not be converted (logged), and
// returns the first other error (the page is then not done).
func (m *migrator) migratePage(ctx context.Context, items []storage.KeyValue) (migrated, failed int64, err error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, migrationParallelism)
	for _, kv := range items {
		if m.mig.InStorageVersion(kv.Value) {
			continue
		}
		if err := m.c.migrationLimiter.Wait(ctx); err != nil {
			mu.Lock()
			firstErr = cmpErr(firstErr, err)
			mu.Unlock()
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			wrote, err := m.c.reg.MigrateStored(ctx, m.gr, m.mig.StorageVersion, kv)
			var conv *registry.ConversionError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && wrote:
				migrated++
				m.c.metrics.migrated()
			case err == nil:
			case errors.As(err, &conv):
				failed++
				m.c.metrics.migrationFailed()
				m.c.cfg.Logger.Error("storage migration: an object cannot be converted", "key", string(kv.Key), "err", err)
			default:
				firstErr = cmpErr(firstErr, err)
			}
		})
	}
	wg.Wait()
	return migrated, failed, firstErr
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// progressKey is where the migration progress of gr is recorded.
func (c *Controllers) progressKey(gr meta.GroupResource) []byte {
	group := gr.Group
	if group == "" {
		group = "core"
	}
	return []byte(c.reg.KeyPrefix() + migrationsPrefix + group + "/" + gr.Resource)
}

// loadProgress reads the recorded progress of gr and its revision (zero
// values when there is none).
func (c *Controllers) loadProgress(ctx context.Context, gr meta.GroupResource) (migrationProgress, int64, error) {
	var p migrationProgress
	kv, err := c.reg.Storage().Get(ctx, c.progressKey(gr), 0)
	if errors.Is(err, storage.ErrNotFound) {
		return p, 0, nil
	}
	if err != nil {
		return p, 0, fmt.Errorf("reading the migration progress of %s: %w", gr, err)
	}
	if err := json.Unmarshal(kv.Value, &p); err != nil {
		return p, 0, fmt.Errorf("corrupt migration progress of %s: %w", gr, err)
	}
	return p, kv.Revision, nil
}

// saveProgress records p over the record at revision rev (0: none) and
// returns the new revision. A record written meanwhile (by a previous
// leader) is overwritten.
func (c *Controllers) saveProgress(ctx context.Context, gr meta.GroupResource, p migrationProgress, rev int64) (int64, error) {
	key := c.progressKey(gr)
	val, _ := json.Marshal(p)
	for {
		var err error
		var out int64
		if rev == 0 {
			out, err = c.reg.Storage().Create(ctx, key, val)
		} else {
			out, err = c.reg.Storage().Update(ctx, key, val, rev)
		}
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, storage.ErrAlreadyExists), errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			kv, gerr := c.reg.Storage().Get(ctx, key, 0)
			switch {
			case errors.Is(gerr, storage.ErrNotFound):
				rev = 0
			case gerr != nil:
				return 0, fmt.Errorf("recording the migration progress of %s: %w", gr, gerr)
			default:
				rev = kv.Revision
			}
		default:
			return 0, fmt.Errorf("recording the migration progress of %s: %w", gr, err)
		}
	}
}

// Migrations returns the storage migration state of every type registered
// in several versions, from storage and, for passes running in this
// process, from the running pass: any instance sharing the storage can
// answer it.
func (c *Controllers) Migrations(ctx context.Context) ([]MigrationStatus, error) {
	ms, err := c.reg.StorageMigrations(ctx)
	if err != nil {
		return nil, err
	}
	running := c.migrators()
	out := make([]MigrationStatus, 0, len(ms))
	for _, mig := range ms {
		gr := meta.GroupResource{Group: mig.Group, Resource: mig.Resource}
		s := MigrationStatus{Group: mig.Group, Resource: mig.Resource, StorageVersion: mig.StorageVersion,
			StoredVersions: slices.Clone(mig.StoredVersions), Complete: !mig.Pending()}
		if m, ok := running[gr]; ok && m.mig.StorageVersion == mig.StorageVersion {
			m.mu.Lock()
			s.Running, s.Migrated, s.Failed, s.LastKey = m.Running, m.Migrated, m.Failed, m.LastKey
			s.ResumedAfter, s.Scanned, s.LastError = m.ResumedAfter, m.Scanned, m.LastError
			m.mu.Unlock()
		} else {
			p, _, err := c.loadProgress(ctx, gr)
			if err != nil {
				return nil, err
			}
			if p.StorageVersion == mig.StorageVersion {
				s.Migrated, s.Failed, s.LastKey = p.Migrated, p.Failed, p.LastKey
			}
		}
		out = append(out, s)
	}
	return out, nil
}
