package registry

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

var namespacesGVR = meta.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// runNamespaceController empties terminating namespaces: it deletes every
// namespaced object of every registered type inside them (their own
// finalizers are respected: the controller waits for them), then removes the
// namespace's "kubernetes" finalizer, which lets the namespace go. It works
// from storage, so a deletion interrupted by a restart finishes after it.
func (r *Registry) runNamespaceController(ctx context.Context) {
	st, ok := r.Store(namespacesGVR)
	if !ok {
		return
	}
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	go r.watchPrefix(ctx, st.prefix, poke)
	poke()
	resync := time.NewTicker(r.cfg.ControllerResync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-resync.C:
		}
		pending, err := r.finalizeNamespaces(ctx)
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("namespace controller", "err", err)
		}
		if pending {
			// Objects with finalizers are still going: look again soon.
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.cfg.ControllerRetry):
				poke()
			}
		}
	}
}

// watchPrefix calls fn after every change under prefix until ctx ends,
// re-establishing the storage watch when it fails.
func (r *Registry) watchPrefix(ctx context.Context, prefix []byte, fn func()) {
	for ctx.Err() == nil {
		evs, err := r.cfg.Storage.Watch(ctx, storage.WatchOptions{Prefix: prefix})
		if err != nil {
			if errors.Is(err, storage.ErrClosed) {
				return
			}
			if sleepCtx(ctx, 1000) != nil {
				return
			}
			continue
		}
		for ev := range evs {
			if ev.Type == storage.EventError {
				break
			}
			fn()
		}
		fn()
	}
}

// finalizeNamespaces makes one pass over the terminating namespaces. It
// reports whether some are still waiting for objects to go.
func (r *Registry) finalizeNamespaces(ctx context.Context) (bool, error) {
	nsStore, ok := r.Store(namespacesGVR)
	if !ok {
		return false, nil
	}
	list, err := nsStore.listWithTypeMeta(ctx, "", ListOptions{}, true)
	if err != nil {
		return false, err
	}
	pending := false
	for _, raw := range list.Items {
		var ns struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				Finalizers []string `json:"finalizers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &ns); err != nil {
			return pending, err
		}
		if ns.Metadata.DeletionTimestamp == nil || !contains(ns.Spec.Finalizers, NamespaceFinalizer) {
			continue
		}
		empty, err := r.emptyNamespace(ctx, ns.Metadata.Name)
		if err != nil {
			return pending, err
		}
		if !empty {
			pending = true
			continue
		}
		var fins []any
		for _, f := range ns.Spec.Finalizers {
			if f != NamespaceFinalizer {
				fins = append(fins, f)
			}
		}
		body := Object{"metadata": map[string]any{"name": ns.Metadata.Name}, "spec": map[string]any{"finalizers": fins}}
		if fins == nil {
			body["spec"] = map[string]any{}
		}
		_, err = nsStore.Update(ctx, "", ns.Metadata.Name, body, WriteOptions{Subresource: "finalize", FieldManager: "kapi-namespace-controller"})
		if meta.ReasonOf(err) == meta.StatusReasonNotFound {
			continue
		}
		if err != nil {
			return pending, err
		}
		r.metrics.namespaceDone()
		r.cfg.Logger.Info("namespace emptied and finalized", "namespace", ns.Metadata.Name)
	}
	return pending, nil
}

// emptyNamespace deletes every object in namespace ns and reports whether
// none is left. Objects of types recorded in storage but not registered in
// this process keep the namespace: they cannot be deleted properly here.
func (r *Registry) emptyNamespace(ctx context.Context, ns string) (bool, error) {
	records, err := r.recordedTypes(ctx)
	if err != nil {
		return false, err
	}
	empty := true
	for _, tr := range records {
		if !tr.Namespaced {
			continue
		}
		st := r.storeForGroupResource(tr.Group, tr.Resource)
		if st == nil {
			prefix := []byte(r.cfg.KeyPrefix + groupDir(tr.Group) + "/" + tr.Resource + "/" + ns + "/")
			page, err := r.cfg.Storage.List(ctx, storage.ListOptions{Prefix: prefix, Limit: 1, KeysOnly: true})
			if err != nil {
				return false, err
			}
			if len(page.Items) > 0 {
				empty = false
				r.cfg.Logger.Warn("namespace deletion waits for a type to be registered", "namespace", ns, "resource", tr.Resource, "group", tr.Group)
			}
			continue
		}
		list, err := st.listWithTypeMeta(ctx, ns, ListOptions{}, true)
		if err != nil {
			return false, err
		}
		for _, raw := range list.Items {
			empty = false
			var head struct {
				Metadata struct {
					Name              string  `json:"name"`
					DeletionTimestamp *string `json:"deletionTimestamp"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				return false, err
			}
			if head.Metadata.DeletionTimestamp != nil {
				continue // waiting for its finalizers
			}
			if _, err := st.Delete(ctx, ns, head.Metadata.Name, DeleteOptions{PropagationPolicy: PropagationBackground}); err != nil &&
				meta.ReasonOf(err) != meta.StatusReasonNotFound {
				return false, err
			}
		}
	}
	return empty, nil
}

// storeForGroupResource returns a registered store of group/resource (any
// version: all versions share the objects).
func (r *Registry) storeForGroupResource(group, resource string) *Store {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for gvr, st := range r.stores {
		if gvr.Group == group && gvr.Resource == resource && st.res.Virtual == nil {
			return st
		}
	}
	return nil
}

func groupDir(group string) string {
	if group == "" {
		return "core"
	}
	return group
}
