package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/kapi-dev/kapi/storage"
)

// ElectorOptions configure an Elector.
type ElectorOptions struct {
	// Name tells the elections of one prefix apart. Default "controllers".
	Name string
	// Identity is how this instance shows as leader (Elector.Leader).
	// Default: host name, process id and a random suffix.
	Identity string
	// TTL is the lease time: how long after a leader dies without resigning
	// (a crash, a partition) another instance takes over; a leader that
	// cannot renew its lease for this long stops leading. Default 15
	// seconds; etcd raises shorter ones to its minimum (about 2 s with
	// its default heartbeat settings).
	TTL time.Duration
}

// Elector is a leader election among the stores over one prefix, through
// etcd's election recipe (go.etcd.io/etcd/client/v3/concurrency): each
// candidate holds a key under the election prefix bound to a lease it keeps
// alive, and the candidate with the oldest key leads. Use it as
// apiserver.Config.Elector so that the in-process controllers (namespace
// cleanup, garbage collection) run on one instance at a time:
//
//	api, err := apiserver.New(ctx, apiserver.Config{Storage: st, Elector: st.Elector(etcd.ElectorOptions{})})
//
// Leadership ends when the leader resigns (its context ends, Close), when
// its lease cannot be renewed for TTL, or when its key is deleted; the next
// candidate then takes over.
//
// Leadership is fenced: the context Run hands the leader carries a
// storage.Fence on its leader key (the key's create revision), so every
// write the leader makes through the Store with it is a transaction that
// also requires the key to still exist with that create revision. Once
// the lease has expired and the key is gone, no write of the old leader
// can succeed, however late it reaches etcd: it fails with a
// *storage.FencedError (errors.Is storage.ErrFenced), which also ends the
// leader's context at once. A leader cut off from etcd may still believe
// it leads for a moment after the next one starts; it just cannot write.
type Elector struct {
	s        *Store
	key      string
	identity string
	ttl      int
	leading  atomic.Bool
}

// Elector returns a leader election named opts.Name for the prefix of s.
// Its key prefix is the store's prefix without its trailing slash, then
// "-election/" and the name ("/kapi-election/controllers" by default).
func (s *Store) Elector(opts ElectorOptions) *Elector {
	if opts.Name == "" {
		opts.Name = "controllers"
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		var r [3]byte
		_, _ = rand.Read(r[:])
		opts.Identity = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultElectionTTL
	}
	ttl := int((opts.TTL + time.Second - 1) / time.Second)
	return &Elector{s: s, key: strings.TrimSuffix(s.prefix, "/") + "-election/" + opts.Name,
		identity: opts.Identity, ttl: ttl}
}

// Identity is this instance's identity in the election.
func (e *Elector) Identity() string { return e.identity }

// Key is the election's key prefix in etcd.
func (e *Elector) Key() string { return e.key }

// IsLeader reports whether this instance leads at the moment.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Leader returns the identity of the current leader, or "" when there is
// none.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.s.cli.Get(ctx, e.key+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("etcd: reading the leader of %s: %w", e.key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Run campaigns until ctx ends or the store closes, and calls lead each
// time this instance becomes leader, with a context that ends when
// leadership ends and that carries the term's storage.Fence (see
// storage.WithFence): writes with it through any Store on the same etcd
// cluster succeed only while this term's leader key exists. lead must
// return when its context ends. When ctx ends, Run resigns (revokes its
// lease, so the next candidate takes over at once) and returns.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.s.ctx, cancel)()
	log := e.s.log.With("election", e.key, "identity", e.identity)
	backoff := time.Second
	for {
		start := time.Now()
		err := e.term(ctx, lead)
		if ctx.Err() != nil {
			return
		}
		wait := 500 * time.Millisecond // after a term, before the next campaign
		if err != nil {
			log.Warn("leader election failed; retrying", "err", err, "in", backoff)
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		} else if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// term campaigns with a fresh lease and, once elected, leads until
// leadership or ctx ends; it always gives the lease back.
func (e *Elector) term(ctx context.Context, lead func(ctx context.Context)) error {
	cli := e.s.cli
	grant, err := cli.Grant(ctx, int64(e.ttl))
	if err != nil {
		return fmt.Errorf("granting a lease: %w", err)
	}
	defer func() {
		// Revoking deletes the candidate key: the next candidate leads
		// without waiting for the lease to expire.
		if cli.Ctx().Err() != nil {
			return // the client is closed: the lease expires by itself
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if _, err := cli.Revoke(rctx, grant.ID); err != nil && ctx.Err() == nil {
			e.s.log.Debug("revoking the election lease", "election", e.key, "err", err)
		}
	}()
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(e.ttl))
	if err != nil {
		return fmt.Errorf("keeping the lease alive: %w", err)
	}
	defer sess.Orphan()

	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	go func() {
		select {
		case <-sess.Done(): // the lease could not be renewed
		case <-lctx.Done():
		}
		lcancel()
	}()
	el := concurrency.NewElection(sess, e.key)
	if err := el.Campaign(lctx, e.identity); err != nil {
		if lctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("lost the lease while campaigning: %w", err)
		}
		return err
	}
	held, err := e.watchKey(lctx, el.Key(), lcancel)
	if err != nil || !held {
		return err
	}
	log := e.s.log.With("election", e.key, "identity", e.identity)
	log.Info("leading")
	e.leading.Store(true)
	lead(storage.WithFence(lctx, storage.Fence{Key: []byte(el.Key()), CreateRevision: el.Rev(), Lost: lcancel}))
	e.leading.Store(false)
	log.Info("no longer leading")
	return nil
}

// watchKey checks that the leader key still exists and cancels the
// leadership when it goes. It reports whether the key exists.
func (e *Elector) watchKey(ctx context.Context, key string, lost context.CancelFunc) (bool, error) {
	cli := e.s.cli
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	rev := resp.Header.Revision
	go func() {
		defer lost()
		for ctx.Err() == nil {
			for wr := range cli.Watch(ctx, key, clientv3.WithRev(rev+1)) {
				if wr.CompactRevision > 0 {
					break // look again below
				}
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						return
					}
				}
				rev = max(rev, wr.Header.Revision)
			}
			if ctx.Err() != nil {
				return
			}
			resp, err := cli.Get(ctx, key)
			if err != nil || len(resp.Kvs) == 0 {
				return
			}
			rev = resp.Header.Revision
		}
	}()
	return true, nil
}

// runCompactor compacts history every CompactionInterval to the revision
// seen one interval earlier, until ctx ends.
func (s *Store) runCompactor(ctx context.Context) {
	t := time.NewTicker(s.opts.CompactionInterval)
	defer t.Stop()
	prev, _ := s.CurrentRevision(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := s.CurrentRevision(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("compaction: reading the current revision", "err", err)
			}
			continue
		}
		if prev > 0 {
			if err := s.Compact(ctx, prev); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("compaction failed", "revision", prev, "err", err)
				}
			} else {
				s.log.Debug("compacted", "revision", prev)
			}
		}
		prev = cur
	}
}
