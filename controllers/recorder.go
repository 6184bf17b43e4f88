package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// eventsGVR is where the controllers record events, when it is served.
var eventsGVR = meta.GroupVersionResource{Version: "v1", Resource: "events"}

// recorderQuiet is how long a recorder leaves an event it recorded alone
// before it counts a repeat; recorderMemory bounds the events it remembers.
const (
	recorderQuiet  = time.Minute
	recorderMemory = 4096
)

// recorder writes core v1 events about objects, as kube-controller-manager's
// controllers do, when the registry serves events. Repeats of one event (same
// object, type, reason and message) update one event's count and
// lastTimestamp, at most once per recorderQuiet, as client-go's recorder
// aggregates them.
type recorder struct {
	c         *Controllers
	component string

	mu   sync.Mutex
	seen map[string]*recorded
}

type recorded struct {
	name  string
	count int64
	first string
	last  time.Time
}

func newRecorder(c *Controllers, component string) *recorder {
	return &recorder{c: c, component: component, seen: map[string]*recorded{}}
}

// objectRef names the object an event is about.
type objectRef struct {
	APIVersion, Kind, Namespace, Name, UID string
}

// event records an event of type typ ("Normal" or "Warning") about ref. It
// never fails the caller: an event that cannot be written is logged.
func (r *recorder) event(ctx context.Context, ref objectRef, typ, reason, message string) {
	st, ok := r.c.reg.Store(eventsGVR)
	if !ok {
		return
	}
	now := time.Now()
	key := strings.Join([]string{ref.Namespace, ref.Name, ref.UID, typ, reason, message}, "\x00")
	r.mu.Lock()
	prev := r.seen[key]
	if prev != nil && now.Sub(prev.last) < recorderQuiet {
		r.mu.Unlock()
		return
	}
	if prev == nil && len(r.seen) >= recorderMemory {
		clear(r.seen)
	}
	rec := &recorded{name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), count: 1, first: now.UTC().Format(time.RFC3339), last: now}
	if prev != nil {
		rec.name, rec.count, rec.first = prev.name, prev.count+1, prev.first
	}
	r.seen[key] = rec
	r.mu.Unlock()

	ns := ref.Namespace
	if ns == "" {
		ns = "default" // events about cluster-scoped objects, as client-go's recorder places them
	}
	obj := registry.Object{
		"metadata": map[string]any{"name": rec.name, "namespace": ns},
		"involvedObject": map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "namespace": ref.Namespace,
			"name": ref.Name, "uid": ref.UID},
		"type": typ, "reason": reason, "message": message,
		"source":         map[string]any{"component": r.component},
		"firstTimestamp": rec.first, "lastTimestamp": now.UTC().Format(time.RFC3339), "count": rec.count,
	}
	var err error
	if rec.count > 1 {
		_, err = st.Update(ctx, ns, rec.name, obj, registry.WriteOptions{FieldManager: r.component})
	} else {
		_, err = st.Create(ctx, ns, obj, registry.WriteOptions{FieldManager: r.component})
	}
	if err != nil && ctx.Err() == nil {
		r.c.cfg.Logger.Warn("event not recorded", "component", r.component, "reason", reason, "object", ref.Name, "err", err)
	}
}
