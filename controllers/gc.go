package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// The garbage collector follows ownerReferences as Kubernetes' collector
// does:
//
//   - Background: once every owner of an object is gone, the object is
//     deleted; owners that are gone while others remain are dropped from the
//     object's ownerReferences.
//   - Foreground: an owner deleted with the foregroundDeletion finalizer has
//     its dependents deleted; the finalizer is removed once no dependent with
//     blockOwnerDeletion=true remains.
//   - Orphan: an owner deleted with the orphan finalizer has its uid removed
//     from every dependent's ownerReferences, then the finalizer removed.
//
// It keeps a graph of uids and owner references built from one consistent
// list of everything under the registry's key prefix, then kept current by a
// storage watch from that list's revision. Decisions are checked against
// storage (by name and uid) before anything is deleted. After a restart the
// graph is rebuilt from storage, so interrupted work finishes.

type gcNode struct {
	key        string // storage key
	store      *registry.Store
	ns, name   string
	owners     []gcOwner
	finalizers []string
	deleting   bool
}

type gcOwner struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion"`
}

type gcHead struct {
	Metadata struct {
		UID               string    `json:"uid"`
		Name              string    `json:"name"`
		Namespace         string    `json:"namespace"`
		DeletionTimestamp *string   `json:"deletionTimestamp"`
		Finalizers        []string  `json:"finalizers"`
		OwnerReferences   []gcOwner `json:"ownerReferences"`
	} `json:"metadata"`
}

type garbageCollector struct {
	c *Controllers
	// nodes holds only the objects the collector can act on or for: those
	// with owner references and those being deleted. Every other object
	// costs it nothing but a byte scan of each new version.
	nodes      map[string]*gcNode         // by uid
	byKey      map[string]string          // storage key -> uid, for nodes
	dependents map[string]map[string]bool // owner uid -> dependent uids
	queue      map[string]bool            // uids to look at
}

func (c *Controllers) runGarbageCollector(ctx context.Context) {
	for ctx.Err() == nil {
		gc := &garbageCollector{c: c}
		err := gc.run(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, storage.ErrClosed) {
			return
		}
		if errors.Is(err, errTypesChanged) {
			continue
		}
		c.cfg.Logger.Warn("garbage collector restarting", "err", err)
		if !sleep(ctx, c.cfg.Retry) {
			return
		}
	}
}

// errTypesChanged ends a garbage collector run when types are registered or
// unregistered: objects of a type registered after the graph was built are
// not in it, so the graph is built again.
var errTypesChanged = errors.New("the set of types changed")

// build makes the graph from one consistent list of everything under the
// key prefix, queues every node, and returns the list's revision.
func (gc *garbageCollector) build(ctx context.Context, prefix []byte) (int64, error) {
	select {
	case <-gc.c.typesChanged: // this run sees the types registered so far
	default:
	}
	gc.nodes = map[string]*gcNode{}
	gc.byKey = map[string]string{}
	gc.dependents = map[string]map[string]bool{}
	gc.queue = map[string]bool{}
	var rev int64
	var start []byte
	for {
		page, err := gc.c.reg.Storage().List(ctx, storage.ListOptions{Prefix: prefix, StartKey: start, Revision: rev, Limit: 1000, MaxBytes: scanPageBytes})
		if err != nil {
			return 0, err
		}
		rev = page.Revision
		for _, kv := range page.Items {
			gc.upsert(kv.Key, kv.Value)
		}
		if !page.More {
			break
		}
		start = page.NextKey
	}
	for uid, n := range gc.nodes {
		if len(n.owners) > 0 || n.deleting {
			gc.queue[uid] = true
		}
	}
	gc.c.metrics.gcGraph(len(gc.nodes))
	gc.c.metrics.gcSynced()
	return rev, nil
}

// run builds the graph and processes changes until ctx ends, the watch
// fails or the set of types changes (the caller then starts again from a
// fresh list).
func (gc *garbageCollector) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx) // ends the storage watch with this run
	defer cancel()
	prefix := []byte(gc.c.reg.KeyPrefix())
	rev, err := gc.build(ctx, prefix)
	if err != nil {
		return err
	}
	evs, err := gc.c.reg.Storage().Watch(ctx, storage.WatchOptions{Prefix: prefix, FromRevision: rev})
	if err != nil {
		return err
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		if len(gc.queue) > 0 {
			gc.process(ctx)
		}
		var retryC <-chan time.Time
		if len(gc.queue) > 0 {
			retry.Reset(gc.c.cfg.Retry)
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-gc.c.typesChanged:
			return errTypesChanged
		case <-retryC:
		case ev, ok := <-evs:
			if !ok {
				return errors.New("storage watch ended")
			}
			if err := gc.apply(ev); err != nil {
				return err
			}
			// Take every event already waiting before working.
			for drained := false; !drained; {
				select {
				case ev, ok := <-evs:
					if !ok {
						return errors.New("storage watch ended")
					}
					if err := gc.apply(ev); err != nil {
						return err
					}
				default:
					drained = true
				}
			}
			gc.c.metrics.gcGraph(len(gc.nodes))
		}
	}
}

func (gc *garbageCollector) apply(ev storage.Event) error {
	switch ev.Type {
	case storage.EventError:
		return ev.Err
	case storage.EventPut:
		gc.upsert(ev.Key, ev.Value)
	case storage.EventDelete:
		if uid, ok := gc.byKey[string(ev.Key)]; ok {
			gc.remove(uid)
			return nil
		}
		// An object outside the graph matters only as an owner.
		if len(gc.dependents) > 0 && ev.PrevValue != nil {
			if h, ok := decodeHead(ev.PrevValue); ok {
				gc.remove(h.Metadata.UID)
			}
		}
	}
	return nil
}

// mayConcernGC reports whether a stored object may have owner references or
// a deletion timestamp: false means certainly neither, true means decode and
// see (a byte scan of the stored metadata's own keys).
func mayConcernGC(value []byte) bool {
	return registry.StoredMetadataMayHave(value, "ownerReferences", "deletionTimestamp")
}

// forget drops the node stored under key, if any, and its owner links.
func (gc *garbageCollector) forget(key []byte) {
	uid, ok := gc.byKey[string(key)]
	if !ok {
		return
	}
	delete(gc.byKey, string(key))
	if n := gc.nodes[uid]; n != nil {
		gc.unlinkOwners(uid, n)
	}
	delete(gc.nodes, uid)
}

// unlinkOwners removes uid from the dependents of n's owners.
func (gc *garbageCollector) unlinkOwners(uid string, n *gcNode) {
	for _, o := range n.owners {
		delete(gc.dependents[o.UID], uid)
		if len(gc.dependents[o.UID]) == 0 {
			delete(gc.dependents, o.UID)
		}
	}
}

func decodeHead(value []byte) (gcHead, bool) {
	js, err := registry.StoredJSON(value)
	if err != nil {
		return gcHead{}, false
	}
	var h gcHead
	if err := json.Unmarshal(js, &h); err != nil || h.Metadata.UID == "" {
		return gcHead{}, false
	}
	return h, true
}

// upsert records the current state of one stored object.
func (gc *garbageCollector) upsert(key, value []byte) {
	gc.forget(key)
	if !mayConcernGC(value) {
		return
	}
	st, ok := gc.c.reg.StoreForKey(key)
	if !ok {
		return
	}
	h, ok := decodeHead(value)
	if !ok {
		return
	}
	uid := h.Metadata.UID
	n := &gcNode{key: string(key), store: st, ns: h.Metadata.Namespace, name: h.Metadata.Name, owners: h.Metadata.OwnerReferences,
		finalizers: h.Metadata.Finalizers, deleting: h.Metadata.DeletionTimestamp != nil}
	if len(n.owners) == 0 && !n.deleting {
		return
	}
	if old := gc.nodes[uid]; old != nil { // the same uid under another key: cannot happen, but stay consistent
		gc.unlinkOwners(uid, old)
	}
	gc.nodes[uid] = n
	gc.byKey[string(key)] = uid
	for _, o := range n.owners {
		if gc.dependents[o.UID] == nil {
			gc.dependents[o.UID] = map[string]bool{}
		}
		gc.dependents[o.UID][uid] = true
	}
	if len(n.owners) > 0 || (n.deleting && (slices.Contains(n.finalizers, registry.FinalizerOrphan) || slices.Contains(n.finalizers, registry.FinalizerForeground))) {
		gc.queue[uid] = true
	}
}

// remove forgets a deleted object and queues what depended on it.
func (gc *garbageCollector) remove(uid string) {
	n := gc.nodes[uid]
	delete(gc.nodes, uid)
	for dep := range gc.dependents[uid] {
		gc.queue[dep] = true
	}
	if n != nil {
		delete(gc.byKey, n.key)
		gc.unlinkOwners(uid, n)
		for _, o := range n.owners {
			gc.queue[o.UID] = true // a foreground owner may be done now
		}
	}
}

// process handles every queued uid once; failures stay queued.
func (gc *garbageCollector) process(ctx context.Context) {
	work := gc.queue
	gc.queue = map[string]bool{}
	for uid := range work {
		if ctx.Err() != nil {
			return
		}
		if err := gc.processOne(ctx, uid); err != nil {
			gc.c.cfg.Logger.Debug("garbage collector will retry", "uid", uid, "err", err)
			gc.queue[uid] = true
		}
	}
}

func (gc *garbageCollector) processOne(ctx context.Context, uid string) error {
	n := gc.nodes[uid]
	if n == nil {
		return nil
	}
	if n.deleting {
		if slices.Contains(n.finalizers, registry.FinalizerOrphan) {
			return gc.orphan(ctx, uid, n)
		}
		if slices.Contains(n.finalizers, registry.FinalizerForeground) {
			return gc.foreground(ctx, uid, n)
		}
		return nil
	}
	if len(n.owners) == 0 {
		return nil
	}
	var gone, solid []gcOwner
	for _, o := range n.owners {
		exists, err := gc.ownerExists(ctx, uid, n, o)
		if err != nil {
			return err
		}
		if exists {
			solid = append(solid, o)
		} else {
			gone = append(gone, o)
		}
	}
	switch {
	case len(gone) == 0:
		return nil
	case len(solid) == 0:
		_, err := n.store.Delete(ctx, n.ns, n.name, registry.DeleteOptions{PreconditionUID: uid, PropagationPolicy: registry.PropagationBackground})
		if err == nil {
			gc.done(gcActionDelete, n, "owners gone")
		}
		return ignoreGone(err)
	default:
		drop := map[string]bool{}
		for _, o := range gone {
			drop[o.UID] = true
		}
		changed, err := gc.editObject(ctx, n, uid, func(obj registry.Object) bool { return dropOwnerRefs(obj, drop) })
		if changed {
			gc.done(gcActionDropDangling, n, "dangling owner references removed")
		}
		return err
	}
}

// ownerExists checks an owner reference against storage: the named object of
// the referenced kind must exist with the referenced uid. Owners of kinds
// that are not registered count as existing (nothing can be proven).
func (gc *garbageCollector) ownerExists(ctx context.Context, uid string, n *gcNode, o gcOwner) (bool, error) {
	st, ok := gc.c.reg.StoreForKind(o.APIVersion, o.Kind)
	if !ok {
		return true, nil
	}
	ns := ""
	if st.Resource().Namespaced {
		if n.ns == "" {
			// A cluster-scoped object cannot have a namespaced owner: say
			// so where its user looks, as kube-controller-manager does.
			res := n.store.Resource()
			gc.c.gcEvents.event(ctx, objectRef{APIVersion: res.APIVersion(), Kind: res.Kind, Name: n.name, UID: uid}, "Warning", "OwnerRefInvalidNamespace",
				fmt.Sprintf("ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] does not exist in namespace %q", o.APIVersion, o.Kind, n.ns, o.Name, o.UID, n.ns))
			return false, nil
		}
		ns = n.ns
	}
	obj, err := st.GetObject(ctx, ns, o.Name)
	if meta.ReasonOf(err) == meta.StatusReasonNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return meta.GetUID(obj) == o.UID, nil
}

// orphan removes the owner's uid from its dependents, then its finalizer.
func (gc *garbageCollector) orphan(ctx context.Context, uid string, n *gcNode) error {
	for dep := range gc.dependents[uid] {
		d := gc.nodes[dep]
		if d == nil {
			continue
		}
		if _, err := gc.editObject(ctx, d, dep, func(obj registry.Object) bool { return dropOwnerRefs(obj, map[string]bool{uid: true}) }); err != nil {
			return err
		}
	}
	changed, err := gc.editObject(ctx, n, uid, func(obj registry.Object) bool { return removeFinalizer(obj, registry.FinalizerOrphan) })
	if changed {
		gc.done(gcActionOrphan, n, "dependents orphaned")
	}
	return err
}

// foreground deletes the owner's dependents and removes its finalizer once
// no blocking dependent is left.
func (gc *garbageCollector) foreground(ctx context.Context, uid string, n *gcNode) error {
	blocking := false
	for dep := range gc.dependents[uid] {
		d := gc.nodes[dep]
		if d == nil {
			continue
		}
		for _, o := range d.owners {
			if o.UID == uid && o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				blocking = true
			}
		}
		if !d.deleting {
			_, err := d.store.Delete(ctx, d.ns, d.name, registry.DeleteOptions{PreconditionUID: dep, PropagationPolicy: registry.PropagationForeground})
			if err == nil {
				gc.done(gcActionDelete, d, "owner deleting in the foreground")
			} else if ignoreGone(err) != nil {
				return err
			}
		}
	}
	if blocking {
		return nil // the deletes above bring events that queue the owner again
	}
	changed, err := gc.editObject(ctx, n, uid, func(obj registry.Object) bool { return removeFinalizer(obj, registry.FinalizerForeground) })
	if changed {
		gc.done(gcActionForeground, n, "dependents gone, foreground deletion finished")
	}
	return err
}

// done counts and logs one action of the collector.
func (gc *garbageCollector) done(action string, n *gcNode, what string) {
	gc.c.metrics.gcAction(action)
	gc.c.cfg.Logger.Debug("garbage collector: "+what, "action", action, "resource", n.store.Resource().Resource, "namespace", n.ns, "name", n.name)
}

// editObject applies edit to the current stored object (checked by uid) and
// writes it back, retrying on conflicts. It reports whether it wrote.
func (gc *garbageCollector) editObject(ctx context.Context, n *gcNode, uid string, edit func(registry.Object) bool) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		obj, err := n.store.GetObject(ctx, n.ns, n.name)
		if err != nil {
			return false, ignoreGone(err)
		}
		if meta.GetUID(obj) != uid || !edit(obj) {
			return false, nil
		}
		_, err = n.store.Update(ctx, n.ns, n.name, obj, registry.WriteOptions{FieldValidation: "Ignore", FieldManager: "kapi-garbage-collector"})
		if meta.ReasonOf(err) == meta.StatusReasonConflict {
			continue
		}
		return err == nil, ignoreGone(err)
	}
	return false, errors.New("too many conflicts")
}

func ignoreGone(err error) error {
	if meta.ReasonOf(err) == meta.StatusReasonNotFound {
		return nil
	}
	return err
}

func dropOwnerRefs(obj registry.Object, drop map[string]bool) bool {
	md := obj["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	kept := make([]any, 0, len(refs))
	for _, ref := range refs {
		m, _ := ref.(map[string]any)
		if uid, _ := m["uid"].(string); drop[uid] {
			continue
		}
		kept = append(kept, ref)
	}
	if len(kept) == len(refs) {
		return false
	}
	if len(kept) == 0 {
		delete(md, "ownerReferences")
	} else {
		md["ownerReferences"] = kept
	}
	return true
}

func removeFinalizer(obj registry.Object, f string) bool {
	fins := meta.GetFinalizers(obj)
	kept := make([]string, 0, len(fins))
	for _, x := range fins {
		if x != f {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(fins) {
		return false
	}
	meta.SetFinalizers(obj, kept)
	return true
}
