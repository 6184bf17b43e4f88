package registry

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kapi-dev/kapi/meta"
)

// eventBudgetKeys bounds the users and the namespaces whose buckets the
// budget remembers; the least recently seen are forgotten first (a
// forgotten bucket starts full again), as Kubernetes' EventRateLimit does.
const eventBudgetKeys = 4096

// eventBudget is the write budget of events: a token bucket per user and
// one per namespace (EventOptions.PerUser, PerNamespace).
type eventBudget struct {
	users, namespaces *bucketCache
}

func newEventBudget(perUser, perNamespace Limit) *eventBudget {
	return &eventBudget{users: newBucketCache(perUser), namespaces: newBucketCache(perNamespace)}
}

// hook is the admission hook that charges each event write to its user's
// and its namespace's bucket. The server's own writes (no user) and dry
// runs are not charged.
func (b *eventBudget) hook() AdmissionHook {
	return AdmissionHook{
		Name:        "EventRateLimit",
		Operations:  []Operation{OperationCreate, OperationUpdate},
		SideEffects: SideEffectsNone,
		Mutate: func(_ context.Context, req *AdmissionRequest) error {
			if req.User == nil || req.DryRun {
				return nil
			}
			return b.charge(req.User.Name, req.Namespace, time.Now())
		},
	}
}

// charge takes one token from both buckets, or none and a 429 saying when
// to retry.
func (b *eventBudget) charge(user, namespace string, now time.Time) error {
	ru := b.users.reserve(user, now)
	rn := b.namespaces.reserve(namespace, now)
	wait := max(delay(ru, now), delay(rn, now))
	if wait == 0 {
		return nil
	}
	for _, r := range []*rate.Reservation{ru, rn} {
		if r != nil {
			r.CancelAt(now)
		}
	}
	secs := int(math.Ceil(wait.Seconds()))
	se := meta.NewServiceUnavailable(fmt.Sprintf("the event write budget of user %q or namespace %q is exhausted; retry in %ds", user, namespace, secs))
	se.Status.Reason = meta.StatusReasonTooManyRequests
	se.Status.Code = http.StatusTooManyRequests
	se.Status.Details = &meta.StatusDetails{RetryAfterSeconds: int32(secs)}
	se.RetryAfter = secs
	return se
}

// delay is how long r must wait to act (0 for no reservation).
func delay(r *rate.Reservation, now time.Time) time.Duration {
	if r == nil {
		return 0
	}
	if !r.OK() {
		return time.Second
	}
	return r.DelayFrom(now)
}

// bucketCache holds the token buckets of the most recently seen keys.
type bucketCache struct {
	limit Limit
	mu    sync.Mutex
	order *list.List // of *bucket, most recently used first
	byKey map[string]*list.Element
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// newBucketCache returns the buckets of limit l. A limit without a burst
// bursts by its rate (at least 1); one without a rate is off.
func newBucketCache(l Limit) *bucketCache {
	if l.QPS <= 0 {
		l.Disabled = true
	}
	if l.Burst <= 0 {
		l.Burst = max(1, int(math.Ceil(l.QPS)))
	}
	return &bucketCache{limit: l, order: list.New(), byKey: map[string]*list.Element{}}
}

// reserve reserves a token of key's bucket (nil when the budget is off).
func (c *bucketCache) reserve(key string, now time.Time) *rate.Reservation {
	if c.limit.Disabled {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if ok {
		c.order.MoveToFront(e)
	} else {
		e = c.order.PushFront(&bucket{key: key, lim: rate.NewLimiter(rate.Limit(c.limit.QPS), c.limit.Burst)})
		c.byKey[key] = e
		if c.order.Len() > eventBudgetKeys {
			last := c.order.Back()
			c.order.Remove(last)
			delete(c.byKey, last.Value.(*bucket).key)
		}
	}
	return e.Value.(*bucket).lim.ReserveN(now, 1)
}
