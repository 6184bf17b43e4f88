package registry

import (
	"context"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
)

// Get returns the object ns/name as JSON. resourceVersion follows the get
// semantics of the API: "" most recent, "0" any, other values not older than.
func (s *Store) Get(ctx context.Context, ns, name, resourceVersion string) ([]byte, error) {
	if resourceVersion == "0" {
		// "Any": the watch cache's state may serve it (watch.go).
		if body, ok, err := s.getFromCache(ctx, ns, name); ok || err != nil {
			return body, err
		}
	}
	if err := s.waitForRV(ctx, resourceVersion); err != nil {
		return nil, err
	}
	kv, err := s.storage.Get(ctx, s.key(ns, name), 0)
	if err != nil {
		return nil, storageError(err, s.res.GroupResource(), name)
	}
	so, err := parseStored(kv.Value)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("reading %s %q: %w", s.res.GroupResource(), name, err))
	}
	return so.objectJSON(kv.Revision), nil
}

// GetObject returns the decoded object ns/name at the latest revision.
func (s *Store) GetObject(ctx context.Context, ns, name string) (Object, error) {
	kv, err := s.storage.Get(ctx, s.key(ns, name), 0)
	if err != nil {
		return nil, storageError(err, s.res.GroupResource(), name)
	}
	obj, err := decodeStored(kv.Value, kv.Revision)
	if err != nil {
		return nil, meta.NewInternalError(fmt.Errorf("reading %s %q: %w", s.res.GroupResource(), name, err))
	}
	return obj, nil
}

// waitForRV makes a "not older than" read wait, briefly, until the store has
// reached resourceVersion; it answers 504 when it does not.
func (s *Store) waitForRV(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" || resourceVersion == "0" {
		return nil
	}
	rv, err := parseRV(resourceVersion)
	if err != nil {
		return err
	}
	return s.waitForRevision(ctx, rv)
}

func (s *Store) waitForRevision(ctx context.Context, rv int64) error {
	st := s.storage
	cur, err := st.CurrentRevision(ctx)
	if err != nil {
		return storageError(err, s.res.GroupResource(), "")
	}
	if cur >= rv {
		return nil
	}
	deadline := s.reg.cfg.Now().Add(s.reg.cfg.FutureRevisionWait)
	for cur < rv {
		if !s.reg.cfg.Now().Before(deadline) {
			return meta.NewTimeout(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
		}
		if err := sleepCtx(ctx, 50); err != nil {
			return err
		}
		if cur, err = st.CurrentRevision(ctx); err != nil {
			return storageError(err, s.res.GroupResource(), "")
		}
	}
	return nil
}
