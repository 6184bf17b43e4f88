package controllers

import (
	"context"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// The reseal controller keeps every stored value of the sensitive types
// sealed under the current write key (registry.Encryption): when this
// instance starts leading, and every resealInterval after, it runs a
// reseal (registry.Registry.Reseal), which rewrites the values under an
// older key and the plaintext written before encryption was turned on, at
// most Config.MigrationRate values a second (the limiter storage
// migrations use). A key rotation therefore needs no command: put the new
// key first, restart, and once ResealStatus reports a complete pass under
// it the old key can be removed. A pass that finds values it cannot open
// is retried after a growing delay.

// resealInterval is how long after a complete pass the next one starts: it
// catches values written meanwhile under another key, by a server that was
// still configured with the old one.
const resealInterval = 10 * time.Minute

// ResealStatus is the reseal controller's state (Controllers.Reseal).
type ResealStatus struct {
	// Enabled: encryption at rest is configured.
	Enabled bool
	// WriteKey is the key values are sealed under now.
	WriteKey string
	// Running: a pass is under way in this process (the leader's).
	Running bool
	// Passes counts the passes that ended in this process; CompletedAt is
	// when the last complete one (every value under WriteKey) ended.
	Passes      int64
	CompletedAt time.Time
	// Last holds the counts of the current pass, or of the last one.
	Last registry.ResealResult
	// LastError is the error that ended the last failed pass.
	LastError string
}

// Reseal returns the reseal controller's state.
func (c *Controllers) Reseal() ResealStatus {
	c.resealMu.Lock()
	defer c.resealMu.Unlock()
	st := c.reseal
	enc := c.reg.Encryption()
	st.Enabled, st.WriteKey = enc.Enabled, enc.WriteKey
	return st
}

func (c *Controllers) setReseal(fn func(*ResealStatus)) {
	c.resealMu.Lock()
	fn(&c.reseal)
	c.resealMu.Unlock()
}

// runReseal runs reseal passes until ctx ends.
func (c *Controllers) runReseal(ctx context.Context) {
	if !c.reg.Encryption().Enabled {
		return
	}
	backoff := c.cfg.Retry
	for {
		wait := resealInterval
		if err := c.resealPass(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.cfg.Logger.Warn("reseal failed, will retry", "retryIn", backoff, "err", err)
			wait, backoff = backoff, min(2*backoff, migrationMaxBackoff)
		} else {
			backoff = c.cfg.Retry
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// resealPass runs one reseal and records it.
func (c *Controllers) resealPass(ctx context.Context) error {
	c.setReseal(func(s *ResealStatus) { s.Running, s.Last = true, registry.ResealResult{} })
	var done int64 // resealed values already counted in the metric
	res, err := c.reg.Reseal(ctx, registry.ResealOptions{
		Wait: c.migrationLimiter.Wait,
		Progress: func(r registry.ResealResult) {
			c.metrics.resealed(r.Resealed - done)
			done = r.Resealed
			c.setReseal(func(s *ResealStatus) { s.Last = r })
		},
	})
	c.metrics.resealed(res.Resealed - done)
	if ctx.Err() == nil {
		c.metrics.resealPassEnded(res.Failed, err)
	}
	c.setReseal(func(s *ResealStatus) {
		s.Running, s.Last = false, res
		if ctx.Err() != nil {
			return // not a pass that ended
		}
		s.Passes++
		if err != nil {
			s.LastError = err.Error()
			return
		}
		s.LastError, s.CompletedAt = "", time.Now()
	})
	return err
}
