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
// with the parent and a channel would otherwise be paid by every one.
//
// Done makes the real context.WithDeadline child, and from then on the child
// answers Err and Value. Until then Err is the parent's error, or, once the
// clock passes the deadline or the request is over (release), the error of
// the child it then makes, already expired or canceled: so Err, Done, Value
// and context.Cause stay in step.
type deadlineCtx struct {
	context.Context // the request's
	deadline        time.Time

	mu       sync.Mutex
	child    atomic.Pointer[derivedCtx]
	released atomic.Bool // set under mu
}

// derivedCtx is the context.WithDeadline child of a deadlineCtx.
type derivedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
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
	if !c.released.Load() && time.Now().Before(c.deadline) {
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
	if c.released.Load() {
		cancel() // the request is over: canceled, as after release
	}
	c.child.Store(&derivedCtx{ctx: ctx, cancel: cancel})
	return ctx
}

// release ends the context when the request is over, as the cancel function
// of context.WithDeadline: the child, if made, is canceled (its timer and
// parent registration freed), and one made later is canceled from the start.
func (c *deadlineCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released.Store(true)
	if d := c.child.Load(); d != nil {
		d.cancel()
	}
}

func (c *deadlineCtx) String() string { return "apiserver.requestDeadline" }
