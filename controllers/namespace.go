package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

var namespacesGVR = meta.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// runNamespaceController empties terminating namespaces: it deletes every
// namespaced object of every registered type inside them (their own
// finalizers are respected: the controller waits for them), then removes the
// namespace's "kubernetes" finalizer, which lets the namespace go. It works
// from storage, so a deletion interrupted by a restart finishes after it.
func (c *Controllers) runNamespaceController(ctx context.Context) {
	if _, ok := c.reg.Store(namespacesGVR); !ok {
		return
	}
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	go c.watchPrefix(ctx, c.reg.ResourcePrefix(namespacesGVR.Group, namespacesGVR.Resource, ""), poke)
	poke()
	resync := time.NewTicker(c.cfg.Resync)
	defer resync.Stop()
	failures := 0
	var retry <-chan time.Time // a pass is due then, as well as at the next change
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-resync.C:
		case <-retry:
		}
		pending, err := c.finalizeNamespaces(ctx)
		if ctx.Err() != nil {
			return
		}
		retry = nil
		failures++
		if err == nil {
			failures = 0
		} else {
			c.cfg.Logger.Warn("namespace controller", "err", err)
		}
		switch {
		case pending:
			// Objects are still going (their finalizers, or a pass that
			// just deleted some): look again soon, whatever else failed.
			retry = time.After(c.cfg.Retry)
		case err != nil:
			// A failed pass is tried again, backing off up to Resync,
			// rather than left to the next change or resync.
			retry = time.After(c.retryAfter(failures))
		}
	}
}

// retryAfter is the wait after the given number of failed passes in a row:
// Retry, doubled for each failure after the first, at most Resync.
func (c *Controllers) retryAfter(failures int) time.Duration {
	d := c.cfg.Retry
	for i := 1; i < failures && d < c.cfg.Resync; i++ {
		d *= 2
	}
	return min(d, c.cfg.Resync)
}

// watchPrefix calls fn after every change under prefix until ctx ends,
// re-establishing the storage watch when it fails. It also calls fn once
// each time the watch is established: a change made before then (right
// after the process started, or while the watch was down) is seen by the
// pass that call starts.
func (c *Controllers) watchPrefix(ctx context.Context, prefix []byte, fn func()) {
	for ctx.Err() == nil {
		evs, err := c.reg.Storage().Watch(ctx, storage.WatchOptions{Prefix: prefix})
		if err != nil {
			if errors.Is(err, storage.ErrClosed) {
				return
			}
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		fn()
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
// reports whether some are still waiting for objects to go; a namespace
// that fails does not hold back the others (their errors are joined).
func (c *Controllers) finalizeNamespaces(ctx context.Context) (bool, error) {
	nsStore, ok := c.reg.Store(namespacesGVR)
	if !ok {
		return false, nil
	}
	var list registry.ListResult
	if err := nsStore.List(ctx, "", registry.ListOptions{KeepItems: true}, &list); err != nil {
		return false, err
	}
	pending := false
	var errs []error
	for _, raw := range list.Items {
		var ns struct {
			Metadata struct {
				Name              string  `json:"name"`
				UID               string  `json:"uid"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				Finalizers []string `json:"finalizers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &ns); err != nil {
			return pending, err
		}
		if ns.Metadata.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, registry.NamespaceFinalizer) {
			continue
		}
		left, err := c.emptyNamespace(ctx, ns.Metadata.Name)
		if err != nil {
			// The others go on: one namespace that fails holds no other.
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns.Metadata.Name, err))
			continue
		}
		if !left.empty() {
			pending = true
			if len(left.objects) > 0 || len(left.unserved) > 0 {
				c.reportRemaining(ctx, objectRef{APIVersion: "v1", Kind: "Namespace", Name: ns.Metadata.Name, UID: ns.Metadata.UID}, left)
			}
			continue
		}
		var fins []any
		for _, f := range ns.Spec.Finalizers {
			if f != registry.NamespaceFinalizer {
				fins = append(fins, f)
			}
		}
		body := registry.Object{"metadata": map[string]any{"name": ns.Metadata.Name}, "spec": map[string]any{"finalizers": fins}}
		if fins == nil {
			body["spec"] = map[string]any{}
		}
		_, err = nsStore.Update(ctx, "", ns.Metadata.Name, body, registry.WriteOptions{Subresource: "finalize", FieldManager: "kapi-namespace-controller"})
		if meta.ReasonOf(err) == meta.StatusReasonNotFound {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("finalize namespace %s: %w", ns.Metadata.Name, err))
			continue
		}
		c.metrics.namespaceDone()
		c.cfg.Logger.Info("namespace emptied and finalized", "namespace", ns.Metadata.Name)
	}
	return pending, errors.Join(errs...)
}

// emptyNamespace deletes every object in namespace ns and returns what is
// left. Objects of types recorded in storage but not registered in this
// process keep the namespace: they cannot be deleted properly here.
func (c *Controllers) emptyNamespace(ctx context.Context, ns string) (*remaining, error) {
	left := &remaining{objects: map[string]int{}, finalizers: map[string]int{}}
	records, err := c.reg.RecordedTypes(ctx)
	if err != nil {
		return nil, err
	}
	for _, tr := range records {
		if !tr.Namespaced {
			continue
		}
		st, ok := c.reg.StoreForGroupResource(meta.GroupResource{Group: tr.Group, Resource: tr.Resource})
		if !ok {
			prefix := c.reg.ResourcePrefix(tr.Group, tr.Resource, ns)
			page, err := c.reg.Storage().List(ctx, storage.ListOptions{Prefix: prefix, Limit: 1, KeysOnly: true})
			if err != nil {
				return nil, err
			}
			if len(page.Items) > 0 {
				left.unserved = append(left.unserved, meta.GroupResource{Group: tr.Group, Resource: tr.Resource}.String())
				c.cfg.Logger.Warn("namespace deletion waits for a type to be registered", "namespace", ns, "resource", tr.Resource, "group", tr.Group)
			}
			continue
		}
		var list registry.ListResult
		if err := st.List(ctx, ns, registry.ListOptions{KeepItems: true}, &list); err != nil {
			return nil, err
		}
		for _, raw := range list.Items {
			var head struct {
				Metadata struct {
					Name              string   `json:"name"`
					DeletionTimestamp *string  `json:"deletionTimestamp"`
					Finalizers        []string `json:"finalizers"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				return nil, err
			}
			if head.Metadata.DeletionTimestamp == nil {
				res, err := st.Delete(ctx, ns, head.Metadata.Name, registry.DeleteOptions{PropagationPolicy: registry.PropagationBackground})
				if meta.ReasonOf(err) == meta.StatusReasonNotFound || err == nil && !res.Pending {
					left.deleted++ // gone: the next pass makes sure nothing else came
					continue
				}
				if err != nil {
					return nil, err
				}
			}
			// Waiting for its finalizers.
			left.objects[st.Resource().GroupResource().String()]++
			for _, f := range head.Metadata.Finalizers {
				left.finalizers[f]++
			}
		}
	}
	return left, nil
}

// remaining is what keeps a terminating namespace: objects waiting for
// their finalizers by group and resource, those finalizers, types not
// served here that hold objects, and the objects a pass just deleted.
type remaining struct {
	objects    map[string]int
	finalizers map[string]int
	unserved   []string
	deleted    int
}

func (r *remaining) empty() bool {
	return len(r.objects) == 0 && len(r.unserved) == 0 && r.deleted == 0
}

// reportRemaining records why a namespace is still there, as events with
// the reasons of kube-controller-manager's namespace conditions.
func (c *Controllers) reportRemaining(ctx context.Context, ns objectRef, r *remaining) {
	counts := func(m map[string]int, format string) string {
		parts := make([]string, 0, len(m))
		for k, n := range m {
			parts = append(parts, fmt.Sprintf(format, k, n))
		}
		slices.Sort(parts)
		return strings.Join(parts, ", ")
	}
	if len(r.objects) > 0 {
		c.nsEvents.event(ctx, ns, "Normal", "NamespaceContentRemaining", "Some resources are remaining: "+counts(r.objects, "%s has %d resource instances"))
	}
	if len(r.finalizers) > 0 {
		c.nsEvents.event(ctx, ns, "Normal", "NamespaceFinalizersRemaining", "Some content in the namespace has finalizers remaining: "+counts(r.finalizers, "%s in %d resource instances"))
	}
	if len(r.unserved) > 0 {
		slices.Sort(r.unserved)
		c.nsEvents.event(ctx, ns, "Warning", "NamespaceDeletionDiscoveryFailure", "Objects of types this server does not serve now remain: "+strings.Join(r.unserved, ", "))
	}
}
