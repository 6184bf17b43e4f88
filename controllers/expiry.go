package controllers

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage"
)

// The expiry controller deletes the objects of types with a time to live
// (registry.Options.TTL, the events' --event-ttl) TTL after their last
// write, as etcd deletes events when their lease ends in Kubernetes: from
// storage directly, whatever their finalizers, each delete conditional on
// the revision it expires so that a write in between keeps the object.
//
// One expirer per stored type keeps the keys of its objects in a heap
// ordered by expiry: built from a list at start (an object's last write is
// the latest of its creationTimestamp and its managedFields times) and kept
// by a storage watch from that list's revision (a write seen now expires
// TTL from now). Its memory is a few words per object; expiring costs one
// conditional delete per object, sent a few at a time so that storage
// commits them together.

// expiryParallelism is how many expiring deletes are in flight at once.
const expiryParallelism = 8

// runExpiry runs an expirer per type with a TTL, started and stopped as
// types are registered and unregistered, until ctx ends.
func (c *Controllers) runExpiry(ctx context.Context) {
	type running struct {
		ttl    time.Duration
		cancel context.CancelFunc
		done   chan struct{}
	}
	byPrefix := map[string]running{}
	defer func() {
		for _, r := range byPrefix {
			r.cancel()
			<-r.done
		}
	}()
	for {
		want := c.expiringTypes()
		for p, r := range byPrefix {
			if ttl, ok := want[p]; !ok || ttl != r.ttl {
				r.cancel()
				<-r.done
				delete(byPrefix, p)
			}
		}
		for p, ttl := range want {
			if _, ok := byPrefix[p]; ok {
				continue
			}
			ectx, cancel := context.WithCancel(ctx)
			r := running{ttl: ttl, cancel: cancel, done: make(chan struct{})}
			byPrefix[p] = r
			e := &expirer{c: c, prefix: []byte(p), ttl: ttl}
			go func() { defer close(r.done); e.run(ectx) }()
		}
		select {
		case <-ctx.Done():
			return
		case <-c.expiryTypesChanged:
		}
	}
}

// expiringTypes returns the storage prefix and TTL of every registered type
// with a TTL (the shortest, when two views of one stored type differ).
func (c *Controllers) expiringTypes() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, res := range c.reg.Resources() {
		ttl := res.Options.TTL
		if ttl <= 0 || res.Virtual != nil {
			continue
		}
		group, resource := res.Group, res.Resource
		if v := res.StoredAs; v != nil {
			group, resource = v.Group, v.Resource
		}
		p := string(c.reg.ResourcePrefix(group, resource, ""))
		if cur, ok := out[p]; !ok || ttl < cur {
			out[p] = ttl
		}
	}
	return out
}

// expirer expires the objects under one storage prefix.
type expirer struct {
	c      *Controllers
	prefix []byte
	ttl    time.Duration
	due    expiryHeap
	byKey  map[string]*expiryItem
}

type expiryItem struct {
	key   string
	rev   int64 // the revision the item expires
	at    time.Time
	index int // in the heap
}

// run follows the prefix until ctx ends, starting again from a fresh list
// after a failed watch.
func (e *expirer) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := e.follow(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		e.c.cfg.Logger.Warn("expiry controller restarting", "prefix", string(e.prefix), "err", err)
		if !sleep(ctx, e.c.cfg.Retry) {
			return
		}
	}
}

// follow loads the objects, then applies changes and expires objects as
// they fall due until ctx ends (nil) or the watch fails.
func (e *expirer) follow(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx) // ends the storage watch with this attempt
	defer cancel()
	rev, err := e.load(ctx)
	if err != nil {
		return err
	}
	evs, err := e.c.reg.Storage().Watch(ctx, storage.WatchOptions{Prefix: e.prefix, FromRevision: rev})
	if err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if err := e.expire(ctx); err != nil {
			return err
		}
		if len(e.due) > 0 {
			timer.Reset(time.Until(e.due[0].at))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case ev, ok := <-evs:
			if !ok {
				return errors.New("storage watch ended")
			}
			if ev.Type == storage.EventError {
				return ev.Err
			}
			e.apply(ev, time.Now())
		}
	}
}

// load lists the prefix at one revision and returns it.
func (e *expirer) load(ctx context.Context) (int64, error) {
	e.due, e.byKey = nil, map[string]*expiryItem{}
	var rev int64
	var start []byte
	for {
		page, err := e.c.reg.Storage().List(ctx, storage.ListOptions{Prefix: e.prefix, StartKey: start, Revision: rev, Limit: 1000, MaxBytes: scanPageBytes})
		if err != nil {
			return 0, err
		}
		rev = page.Revision
		for _, kv := range page.Items {
			e.set(string(kv.Key), kv.Revision, lastWrite(kv.Value).Add(e.ttl))
		}
		if !page.More {
			return rev, nil
		}
		start = page.NextKey
	}
}

// apply records a change seen at now.
func (e *expirer) apply(ev storage.Event, now time.Time) {
	switch ev.Type {
	case storage.EventPut:
		e.set(string(ev.Key), ev.Revision, now.Add(e.ttl))
	case storage.EventDelete:
		if it, ok := e.byKey[string(ev.Key)]; ok {
			heap.Remove(&e.due, it.index)
			delete(e.byKey, it.key)
		}
	}
}

func (e *expirer) set(key string, rev int64, at time.Time) {
	if it, ok := e.byKey[key]; ok {
		it.rev, it.at = rev, at
		heap.Fix(&e.due, it.index)
		return
	}
	it := &expiryItem{key: key, rev: rev, at: at}
	e.byKey[key] = it
	heap.Push(&e.due, it)
}

// expire deletes every object that is due, a few at a time. An object
// written since (a conflict) is kept: its new write is on its way through
// the watch. A storage failure is returned.
func (e *expirer) expire(ctx context.Context) error {
	now := time.Now()
	var batch []*expiryItem
	for len(e.due) > 0 && !e.due[0].at.After(now) {
		it := heap.Pop(&e.due).(*expiryItem)
		delete(e.byKey, it.key)
		batch = append(batch, it)
	}
	if len(batch) == 0 {
		return nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		expired  int
	)
	sem := make(chan struct{}, expiryParallelism)
	for _, it := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, _, err := e.c.reg.Storage().Delete(ctx, []byte(it.key), it.rev)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				expired++
			case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			case firstErr == nil:
				firstErr = err
			}
		})
	}
	wg.Wait()
	e.c.metrics.expired(expired)
	return firstErr
}

// lastWrite is when a stored object was last written, as far as it says:
// the latest of its creationTimestamp and its managedFields times (now,
// when it says nothing readable).
func lastWrite(value []byte) time.Time {
	var head struct {
		Metadata struct {
			CreationTimestamp string `json:"creationTimestamp"`
			ManagedFields     []struct {
				Time string `json:"time"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	js, err := registry.StoredJSON(value)
	if err != nil || json.Unmarshal(js, &head) != nil {
		return time.Now()
	}
	var last time.Time
	for _, s := range append([]string{head.Metadata.CreationTimestamp}, timesOf(head.Metadata.ManagedFields)...) {
		if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return time.Now()
	}
	return last
}

func timesOf(entries []struct {
	Time string `json:"time"`
}) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Time
	}
	return out
}

// expiryHeap orders items by expiry time.
type expiryHeap []*expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	it := x.(*expiryItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
