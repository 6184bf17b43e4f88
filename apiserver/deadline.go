package apiserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is a request's context with the server's request timeout
// (Config.RequestTimeout). It behaves as context.WithDeadline(parent,
// deadline), but sets up nothing until something asks for its Done channel:
// most requests never wait on their context, and a timer, a registration
// with the parent and a channel per request were 2% of a create's CPU.
//
// Done makes the real context.WithDeadline child, and from then on the child
// answers Err and Value. Until then Err is the parent's error, or
// DeadlineExceeded once the clock passes the deadline (and, so that the two
// stay in step, makes the child, already expired). One imperfection is left:
// context.Cause of a context whose deadline passed before anything called
// its Done or Err is nil instead of DeadlineExceeded.
type deadlineCtx struct {
	context.Context // the request's
	deadline        time.Time

	mu    sync.Mutex
	child atomic.Pointer[derivedCtx]
}

// derivedCtx is the context.WithDeadline child of a deadlineCtx.
type derivedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func withRequestDeadline(parent context.Context, timeout time.Duration) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: time.Now().Add(timeout)}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.derived().Done() }

func (c *deadlineCtx) Err() error {
	if d := c.child.Load(); d != nil {
		return d.ctx.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if time.Now().Before(c.deadline) {
		return nil
	}
	return c.derived().Err()
}

func (c *deadlineCtx) Value(key any) any {
	if d := c.child.Load(); d != nil {
		return d.ctx.Value(key)
	}
	return c.Context.Value(key)
}

// derived returns the context.WithDeadline child, making it on first use.
func (c *deadlineCtx) derived() context.Context {
	if d := c.child.Load(); d != nil {
		return d.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.child.Load(); d != nil {
		return d.ctx
	}
	ctx, cancel := context.WithDeadline(c.Context, c.deadline)
	c.child.Store(&derivedCtx{ctx: ctx, cancel: cancel})
	return ctx
}

// release frees the child's timer and parent registration, if it was made,
// once the request is over (as the cancel of context.WithDeadline).
func (c *deadlineCtx) release() {
	if d := c.child.Load(); d != nil {
		d.cancel()
	}
}

func (c *deadlineCtx) String() string { return "apiserver.requestDeadline" }
