// Package etcd is kapi's distributed storage backend: the storage.Store
// contract on an etcd v3 cluster, through the official client
// (go.etcd.io/etcd/client/v3; the etcd server is no dependency).
//
// The mapping is direct:
//
//   - a revision is an etcd revision (a key's mod revision is its
//     resourceVersion), so revisions are comparable across every kapi
//     instance over the same cluster;
//   - Create, Update and Delete are etcd transactions comparing the key's
//     create or mod revision (compare-and-swap); a failed compare writes
//     nothing and consumes no revision; when the context carries a
//     storage.Fence (the leader's work under Elector.Run), the transaction
//     also compares the fence key's create revision, and a write refused
//     by it fails with a *storage.FencedError;
//   - List is a ranged read at one revision (WithRev), with one extra key
//     fetched to name the next page's start and etcd's count for
//     Remaining (exact);
//   - Watch is an etcd watch with previous values, on its own gRPC stream,
//     resumed from the last delivered revision whenever the stream breaks
//     (etcd restarts, member failover); progress is asked of etcd
//     (RequestProgress) when the watch has been quiet for
//     WatchOptions.ProgressInterval, and each answer, sent by etcd only
//     once the watch has caught up, becomes an EventProgress;
//   - Compact is an etcd compaction (of the whole cluster), and reads or
//     watches below the compacted revision fail with a
//     *storage.CompactedError naming it exactly.
//
// Every read that does not name a revision, CurrentRevision included, is
// linearizable: etcd confirms with a quorum of its members that it serves
// the latest committed revision. That is what lets a watch cache on one
// instance serve consistent reads: it compares its own revision with
// CurrentRevision, which includes every write acknowledged by any instance.
//
// Several stores (several API instances) over one prefix form one API.
// Store.Elector returns a leader election for the work only one of them
// should do (apiserver.Config.Elector), and the store's own compaction is
// elected the same way.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kapi-dev/kapi/storage"
)

// closeGrace bounds how long Close waits for calls in flight to finish
// before it closes the client under them.
const closeGrace = 10 * time.Second

// Store is a storage.Store on etcd. It is safe for concurrent use.
type Store struct {
	opts      Options
	cli       *clientv3.Client
	ownClient bool
	prefix    string
	log       *slog.Logger

	// ctx ends when the store closes: watches, elections and the compactor
	// stop with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup // calls in flight
	bg     sync.WaitGroup // the compactor's election
	done   chan struct{}  // closed when Close has finished

	// compacted is a revision known to be at or below etcd's compacted
	// revision (1 until a compaction is seen).
	compacted atomic.Int64

	// pokes are the open watches' progress-request signals (RequestProgress).
	pokesMu sync.Mutex
	pokes   map[chan struct{}]struct{}
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.ProgressRequester = (*Store)(nil)
)

// Open connects to etcd and checks, with one quorum read, that it answers
// within Options.DialTimeout.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cli, own := opts.Client, false
	if cli == nil {
		if cli, err = clientv3.New(opts.clientConfig()); err != nil {
			return nil, fmt.Errorf("etcd: connecting to %v: %w", opts.Endpoints, err)
		}
		own = true
	}
	s := &Store{opts: opts, cli: cli, ownClient: own, prefix: opts.Prefix, log: opts.Logger, done: make(chan struct{})}
	s.compacted.Store(1)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := s.CurrentRevision(pctx); err != nil {
		s.cancel()
		if own {
			cli.Close()
		}
		return nil, fmt.Errorf("etcd: no answer from %v: %w", cli.Endpoints(), err)
	}
	if opts.CompactionInterval > 0 {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			e := s.Elector(ElectorOptions{Name: "compactor", TTL: opts.ElectionTTL})
			e.Run(s.ctx, s.runCompactor)
		}()
	}
	return s, nil
}

// Client returns the etcd client of the store.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the key prefix of the store.
func (s *Store) Prefix() string { return s.prefix }

// Close stops the store's watches (each ends with an event carrying
// storage.ErrClosed), resigns its elections and closes its client (unless
// given in Options.Client). Calls in flight finish first (for up to 10 s);
// later calls fail with storage.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	defer close(s.done)

	waited := make(chan struct{})
	go func() { s.ops.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(closeGrace):
		s.log.Warn("etcd store closing with calls still in flight", "waited", closeGrace)
	}
	s.cancel()
	s.bg.Wait()
	if s.ownClient {
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("etcd: closing the client: %w", err)
		}
	}
	return nil
}

// begin registers a call in flight; it fails once the store is closed.
func (s *Store) begin() (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, storage.ErrClosed
	}
	s.ops.Add(1)
	return s.ops.Done, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// key is the etcd key of a storage key.
func (s *Store) key(k []byte) string { return s.prefix + string(k) }

// strip turns an etcd key back into a storage key.
func (s *Store) strip(k []byte) []byte {
	out := make([]byte, len(k)-len(s.prefix))
	copy(out, k[len(s.prefix):])
	return out
}

func (s *Store) checkKey(k []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", storage.ErrInvalid)
	}
	if len(k) > s.opts.MaxKeySize {
		return fmt.Errorf("%w: %d bytes exceed the limit of %d", storage.ErrKeyTooLong, len(k), s.opts.MaxKeySize)
	}
	return nil
}

func (s *Store) checkValue(v []byte) error {
	if len(v) > s.opts.MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", storage.ErrTooLarge, len(v), s.opts.MaxValueSize)
	}
	return nil
}

// kv converts an etcd key-value; keysOnly leaves the value nil.
func (s *Store) kv(kv *mvccpb.KeyValue, keysOnly bool) storage.KeyValue {
	out := storage.KeyValue{Key: s.strip(kv.Key), Revision: kv.ModRevision, CreateRevision: kv.CreateRevision}
	if !keysOnly {
		out.Value = value(kv.Value)
	}
	return out
}

// value returns v, or an empty non-nil slice for an empty value (protobuf
// decodes empty bytes as nil; nil means "no value" in the storage API).
func value(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key []byte, revision int64) (storage.KeyValue, error) {
	if err := s.checkKey(key); err != nil {
		return storage.KeyValue{}, err
	}
	if revision < 0 {
		return storage.KeyValue{}, fmt.Errorf("%w: negative revision %d", storage.ErrInvalid, revision)
	}
	done, err := s.begin()
	if err != nil {
		return storage.KeyValue{}, err
	}
	defer done()
	var opts []clientv3.OpOption
	if revision > 0 {
		opts = append(opts, clientv3.WithRev(revision))
	}
	resp, err := s.cli.Get(ctx, s.key(key), opts...)
	if err != nil {
		return storage.KeyValue{}, s.readError(ctx, err, revision)
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, storage.ErrNotFound
	}
	return s.kv(resp.Kvs[0], false), nil
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	switch {
	case len(opts.Prefix) == 0:
		return storage.ListResult{}, fmt.Errorf("%w: empty list prefix", storage.ErrInvalid)
	case opts.StartKey != nil && !hasPrefix(opts.StartKey, opts.Prefix):
		return storage.ListResult{}, fmt.Errorf("%w: start key %q outside prefix %q", storage.ErrInvalid, opts.StartKey, opts.Prefix)
	case opts.Limit < 0:
		return storage.ListResult{}, fmt.Errorf("%w: negative limit %d", storage.ErrInvalid, opts.Limit)
	case opts.MaxBytes < 0:
		return storage.ListResult{}, fmt.Errorf("%w: negative byte bound %d", storage.ErrInvalid, opts.MaxBytes)
	case opts.Revision < 0:
		return storage.ListResult{}, fmt.Errorf("%w: negative revision %d", storage.ErrInvalid, opts.Revision)
	}
	done, err := s.begin()
	if err != nil {
		return storage.ListResult{}, err
	}
	defer done()
	from := opts.Prefix
	if opts.StartKey != nil {
		from = opts.StartKey
	}
	if opts.MaxBytes > 0 {
		return s.listBounded(ctx, from, opts)
	}
	ops := []clientv3.OpOption{clientv3.WithRange(s.rangeEnd(opts.Prefix))}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(opts.Revision))
	}
	if opts.Limit > 0 {
		// One more than asked: its key is the next page's start.
		ops = append(ops, clientv3.WithLimit(opts.Limit+1))
	}
	if opts.KeysOnly {
		ops = append(ops, clientv3.WithKeysOnly())
	}
	resp, err := s.cli.Get(ctx, s.key(from), ops...)
	if err != nil {
		return storage.ListResult{}, s.readError(ctx, err, opts.Revision)
	}
	kvs := resp.Kvs
	res := storage.ListResult{Revision: opts.Revision}
	if res.Revision == 0 {
		res.Revision = resp.Header.Revision
	}
	if opts.Limit > 0 && int64(len(kvs)) > opts.Limit {
		res.More = true
		res.NextKey = s.strip(kvs[opts.Limit].Key)
		kvs = kvs[:opts.Limit]
	}
	res.Items = make([]storage.KeyValue, len(kvs))
	for i, kv := range kvs {
		res.Items[i] = s.kv(kv, opts.KeysOnly)
	}
	if res.More {
		// etcd counts every key of the range from the start key.
		res.Remaining = resp.Count - int64(len(kvs))
	}
	return res, nil
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

// rangeEnd is the etcd range end of the keys with storage prefix p.
func (s *Store) rangeEnd(p []byte) string {
	end := storage.PrefixEnd([]byte(s.key(p)))
	if end == nil {
		return "\x00" // etcd: every key from the start
	}
	return string(end)
}

// Create implements storage.Store.
func (s *Store) Create(ctx context.Context, key, value []byte) (int64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, err
	}
	if err := s.checkValue(value); err != nil {
		return 0, err
	}
	done, err := s.begin()
	if err != nil {
		return 0, err
	}
	defer done()
	k := s.key(key)
	fence := fenceOf(ctx)
	resp, err := s.cli.Txn(ctx).
		If(fence.cmps(clientv3.Compare(clientv3.CreateRevision(k), "=", 0))...).
		Then(clientv3.OpPut(k, string(value))).
		Else(fence.elses()...).
		Commit()
	if err != nil {
		return 0, s.writeError(ctx, err)
	}
	if !resp.Succeeded {
		if err := fence.refused(key, resp); err != nil {
			return 0, err
		}
		return 0, storage.ErrAlreadyExists
	}
	return resp.Header.Revision, nil
}

// guard is the compare of a write expecting expected (0: any revision, but
// the key must exist).
func guard(k string, expected int64) clientv3.Cmp {
	if expected == 0 {
		return clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(k), "=", expected)
}

// failed explains a write whose guard did not hold, from the Else read.
func failed(key []byte, expected int64, resp *clientv3.TxnResponse) error {
	rr := resp.Responses[0].GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return storage.ErrNotFound
	}
	return &storage.ConflictError{Key: append([]byte(nil), key...), Expected: expected, Actual: rr.Kvs[0].ModRevision}
}

// Update implements storage.Store.
func (s *Store) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, err
	}
	if expectedRevision < 0 {
		return 0, fmt.Errorf("%w: negative expected revision %d", storage.ErrInvalid, expectedRevision)
	}
	if err := s.checkValue(value); err != nil {
		return 0, err
	}
	done, err := s.begin()
	if err != nil {
		return 0, err
	}
	defer done()
	k := s.key(key)
	fence := fenceOf(ctx)
	resp, err := s.cli.Txn(ctx).
		If(fence.cmps(guard(k, expectedRevision))...).
		Then(clientv3.OpPut(k, string(value))).
		Else(fence.elses(clientv3.OpGet(k, clientv3.WithKeysOnly()))...).
		Commit()
	if err != nil {
		return 0, s.writeError(ctx, err)
	}
	if !resp.Succeeded {
		if err := fence.refused(key, resp); err != nil {
			return 0, err
		}
		return 0, failed(key, expectedRevision, resp)
	}
	return resp.Header.Revision, nil
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key []byte, expectedRevision int64) (storage.KeyValue, int64, error) {
	if err := s.checkKey(key); err != nil {
		return storage.KeyValue{}, 0, err
	}
	if expectedRevision < 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("%w: negative expected revision %d", storage.ErrInvalid, expectedRevision)
	}
	done, err := s.begin()
	if err != nil {
		return storage.KeyValue{}, 0, err
	}
	defer done()
	k := s.key(key)
	fence := fenceOf(ctx)
	resp, err := s.cli.Txn(ctx).
		If(fence.cmps(guard(k, expectedRevision))...).
		Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
		Else(fence.elses(clientv3.OpGet(k, clientv3.WithKeysOnly()))...).
		Commit()
	if err != nil {
		return storage.KeyValue{}, 0, s.writeError(ctx, err)
	}
	if !resp.Succeeded {
		if err := fence.refused(key, resp); err != nil {
			return storage.KeyValue{}, 0, err
		}
		return storage.KeyValue{}, 0, failed(key, expectedRevision, resp)
	}
	dr := resp.Responses[0].GetResponseDeleteRange()
	if dr == nil || len(dr.PrevKvs) == 0 {
		// Impossible: the guard saw the key in the same transaction.
		return storage.KeyValue{}, 0, fmt.Errorf("etcd: delete of %q returned no previous value", key)
	}
	return s.kv(dr.PrevKvs[0], false), resp.Header.Revision, nil
}

// CurrentRevision implements storage.Store with a linearizable read: the
// revision returned includes every write etcd acknowledged before the call,
// through any client.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	done, err := s.begin()
	if err != nil {
		return 0, err
	}
	defer done()
	return s.currentRevision(ctx)
}

func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	// The bare prefix is never a data key (keys are not empty), so the read
	// returns no data, just the header.
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, s.readError(ctx, err, 0)
	}
	return resp.Header.Revision, nil
}

// CompactedRevision implements storage.Store. etcd does not report its
// compacted revision directly: a read at the last one known tells whether
// it still holds, and when it does not, a watch from there is answered with
// the compacted revision.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	done, err := s.begin()
	if err != nil {
		return 0, err
	}
	defer done()
	return s.compactedRevision(ctx)
}

func (s *Store) compactedRevision(ctx context.Context) (int64, error) {
	known := s.compacted.Load()
	_, err := s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly(), clientv3.WithRev(known))
	switch {
	case err == nil:
		// Compaction only moves forward and known was compacted (or is 1):
		// it is exact.
		return known, nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return s.probeCompacted(ctx, known)
	default:
		return 0, s.readError(ctx, err, -1)
	}
}

// probeCompacted learns etcd's compacted revision, known to be above from,
// by watching from there: etcd answers such a watch with its compacted
// revision (within about 100 ms, its watch sync period).
func (s *Store) probeCompacted(ctx context.Context, from int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch := s.cli.Watch(streamContext(ctx), s.prefix, clientv3.WithRev(from))
	for resp := range ch {
		if resp.CompactRevision > 0 {
			for {
				known := s.compacted.Load()
				if resp.CompactRevision <= known || s.compacted.CompareAndSwap(known, resp.CompactRevision) {
					break
				}
			}
			return resp.CompactRevision, nil
		}
		if err := resp.Err(); err != nil {
			return 0, s.readError(ctx, err, -1)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, s.readError(ctx, err, -1)
	}
	return 0, errors.New("etcd: no compacted revision from a watch below it")
}

// Compact implements storage.Store. etcd compacts the whole cluster: other
// prefixes (other APIs on the same etcd) lose the same history.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	if revision < 0 {
		return fmt.Errorf("%w: negative revision %d", storage.ErrInvalid, revision)
	}
	done, err := s.begin()
	if err != nil {
		return err
	}
	defer done()
	if revision <= s.compacted.Load() {
		return nil
	}
	_, err = s.cli.Compact(ctx, revision)
	switch {
	case err == nil:
		s.compacted.Store(max(s.compacted.Load(), revision))
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return nil // compacted at or beyond revision already
	default:
		return s.readError(ctx, err, revision)
	}
}

// readError converts an error of a read at revision (0: latest; -1: not a
// read at a revision).
func (s *Store) readError(ctx context.Context, err error, revision int64) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted) && revision > 0:
		oldest, perr := s.compactedRevision(ctx)
		if perr != nil {
			return fmt.Errorf("%w (%v)", &storage.CompactedError{Requested: revision}, perr)
		}
		return &storage.CompactedError{Requested: revision, Oldest: oldest}
	case errors.Is(err, rpctypes.ErrFutureRev) && revision > 0:
		cur, cerr := s.currentRevision(ctx)
		if cerr != nil {
			return fmt.Errorf("%w (%v)", &storage.FutureRevisionError{Requested: revision}, cerr)
		}
		return &storage.FutureRevisionError{Requested: revision, Current: cur}
	}
	return s.writeError(ctx, err)
}

// writeError converts a client error.
func (s *Store) writeError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("etcd: %w", ctx.Err())
	case s.isClosed() && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled ||
		errors.Is(err, clientv3.ErrNoAvailableEndpoints)):
		return storage.ErrClosed
	case errors.Is(err, rpctypes.ErrRequestTooLarge) || status.Code(err) == codes.ResourceExhausted:
		return fmt.Errorf("%w: %v", storage.ErrTooLarge, err)
	}
	return fmt.Errorf("etcd: %w", err)
}
