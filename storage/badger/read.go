package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// Get returns the value of key as of revision (0 = latest).
func (s *Store) Get(ctx context.Context, key []byte, revision int64) (storage.KeyValue, error) {
	if err := ctx.Err(); err != nil {
		return storage.KeyValue{}, err
	}
	if err := s.checkKey(key); err != nil {
		return storage.KeyValue{}, err
	}
	if !s.enter() {
		return storage.KeyValue{}, storage.ErrClosed
	}
	defer s.leave()
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	rev, err := s.readRevision(revision)
	if err != nil {
		return storage.KeyValue{}, err
	}
	txn := s.db.NewTransactionAt(uint64(rev), false)
	defer txn.Discard()
	item, err := txn.Get(dataKey(key))
	if errors.Is(err, bdb.ErrKeyNotFound) {
		return storage.KeyValue{}, fmt.Errorf("get %q at revision %d: %w", key, rev, storage.ErrNotFound)
	}
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("get %q at revision %d: %w", key, rev, err)
	}
	kv, err := readItem(txn, item, bytes.Clone(key), false)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("get %q at revision %d: %w", key, rev, err)
	}
	return kv, nil
}

// List returns a page of the keys under opts.Prefix as of one snapshot.
// With opts.Count, Remaining is exact up to countLimit keys: a first page
// counts the rest of the snapshot and remembers the count for its NextKey,
// so that the continuation pages (which start at that key, at the same
// revision) derive theirs without counting again; a snapshot never changes,
// so the count stays right. A rest longer than countLimit is not counted
// (Remaining -1, remembered too): counting a million keys would make the
// first page of a paged list take seconds, and the API's
// remainingItemCount is optional.
func (s *Store) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	if err := ctx.Err(); err != nil {
		return storage.ListResult{}, err
	}
	if err := checkListOptions(opts); err != nil {
		return storage.ListResult{}, err
	}
	if !s.enter() {
		return storage.ListResult{}, storage.ErrClosed
	}
	defer s.leave()
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	rev, err := s.readRevision(opts.Revision)
	if err != nil {
		return storage.ListResult{}, err
	}
	txn := s.db.NewTransactionAt(uint64(rev), false)
	defer txn.Discard()
	res, err := s.readPage(ctx, txn, rev, opts)
	if err != nil {
		return storage.ListResult{}, err
	}
	if res.More && opts.Count {
		n := res.Remaining
		if n < 0 {
			n = tooManyToCount
		}
		s.counts.put(rev, opts.Prefix, res.NextKey, n)
	}
	return res, nil
}

// checkListOptions refuses a list without a prefix, with a start key outside
// it, or with a negative limit.
func checkListOptions(opts storage.ListOptions) error {
	switch {
	case len(opts.Prefix) == 0:
		return fmt.Errorf("list: empty prefix: %w", storage.ErrInvalid)
	case opts.StartKey != nil && !bytes.HasPrefix(opts.StartKey, opts.Prefix):
		return fmt.Errorf("list: start key %q is not under prefix %q: %w", opts.StartKey, opts.Prefix, storage.ErrInvalid)
	case opts.Limit < 0:
		return fmt.Errorf("list: negative limit %d: %w", opts.Limit, storage.ErrInvalid)
	case opts.MaxBytes < 0:
		return fmt.Errorf("list: negative byte bound %d: %w", opts.MaxBytes, storage.ErrInvalid)
	}
	return nil
}

// readPage reads the page opts asks for from txn, a snapshot at rev: up to
// opts.Limit items (and opts.MaxBytes bytes) from opts.StartKey on, then, on
// a full page, the key after it and the count of the rest (restCounter).
func (s *Store) readPage(ctx context.Context, txn *bdb.Txn, rev int64, opts storage.ListOptions) (storage.ListResult, error) {
	prefix := dataKey(opts.Prefix)
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	start := prefix
	if opts.StartKey != nil {
		start = dataKey(opts.StartKey)
	}
	res := storage.ListResult{Revision: rev}
	rest := restCounter{count: opts.Count, known: s.knownRest(rev, opts)}
	n := 0
	var size int64 // bytes of the page's keys and values
	full := false
	for it.Seek(start); it.Valid(); it.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return storage.ListResult{}, err
			}
		}
		item := it.Item()
		if full {
			if !res.More {
				res.More = true
				res.NextKey = item.KeyCopy(nil)[1:]
			}
			if !rest.add(&res, int64(len(res.Items))) {
				break
			}
			continue
		}
		key := item.KeyCopy(nil)[1:]
		kv, err := readItem(txn, item, key, opts.KeysOnly)
		if err != nil {
			return storage.ListResult{}, fmt.Errorf("list %q at revision %d: %w", opts.Prefix, rev, err)
		}
		res.Items = append(res.Items, kv)
		size += int64(len(kv.Key) + len(kv.Value))
		full = opts.Limit > 0 && int64(len(res.Items)) == opts.Limit ||
			opts.MaxBytes > 0 && size >= opts.MaxBytes
	}
	return res, nil
}

// restCounter counts the keys after a full page (ListResult.Remaining).
type restCounter struct {
	count bool  // the count is wanted (ListOptions.Count)
	known int64 // from knownRest
}

// knownRest returns how many keys are at or after opts.StartKey, as a
// previous page of the same snapshot counted them: -1 when none did (or the
// count is not wanted), tooManyToCount when it found too many to count.
func (s *Store) knownRest(rev int64, opts storage.ListOptions) int64 {
	if (opts.Limit > 0 || opts.MaxBytes > 0) && opts.StartKey != nil && opts.Count {
		return s.counts.get(rev, opts.Prefix, opts.StartKey)
	}
	return -1
}

// add counts one more key after the full page res and reports whether to
// go on counting: not when the count is not wanted, known already, or past
// countLimit (Remaining -1: not counted).
func (c restCounter) add(res *storage.ListResult, items int64) bool {
	switch {
	case !c.count || c.known == tooManyToCount:
		res.Remaining = -1
		return false
	case c.known >= 0:
		res.Remaining = c.known - items
		return false
	}
	if res.Remaining++; res.Remaining > countLimit {
		res.Remaining = -1
		return false
	}
	return true
}

// countLimit bounds the keys a page counts after itself (a few
// milliseconds of iteration); tooManyToCount marks, in the count cache, a
// rest longer than that.
const (
	countLimit     = 10_000
	tooManyToCount = -2
)

// countCache remembers, per snapshot revision and prefix, how many keys are
// at or after a continuation key. Entries are evicted first in, first out.
type countCache struct {
	mu   sync.Mutex
	m    map[countKey]int64
	ring []countKey
	next int
}

type countKey struct {
	rev          int64
	prefix, from string
}

const countCacheSize = 4096

func (c *countCache) get(rev int64, prefix, from []byte) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.m[countKey{rev, string(prefix), string(from)}]; ok {
		return n
	}
	return -1
}

func (c *countCache) put(rev int64, prefix, from []byte, n int64) {
	k := countKey{rev, string(prefix), string(from)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[countKey]int64, countCacheSize)
		c.ring = make([]countKey, countCacheSize)
	}
	if _, ok := c.m[k]; ok {
		return
	}
	delete(c.m, c.ring[c.next])
	c.ring[c.next] = k
	c.next = (c.next + 1) % countCacheSize
	c.m[k] = n
}

// readItem decodes the data item of key read in txn, including the value's
// chunks unless keysOnly.
func readItem(txn *bdb.Txn, item *bdb.Item, key []byte, keysOnly bool) (storage.KeyValue, error) {
	kv := storage.KeyValue{Key: key, Revision: int64(item.Version())}
	if keysOnly {
		err := item.Value(func(v []byte) error {
			h, err := decodeData(v)
			kv.CreateRevision = h.createRev
			return err
		})
		return kv, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return kv, err
	}
	h, err := decodeData(v)
	if err != nil {
		return kv, err
	}
	kv.CreateRevision = h.createRev
	kv.Value, err = readParts(txn, key, item.Version(), h)
	return kv, err
}

// readParts returns the whole value described by h, reading chunks 1..n-1
// of key from txn; each must carry the data item's version.
func readParts(txn *bdb.Txn, key []byte, version uint64, h dataHeader) ([]byte, error) {
	if h.parts == 1 {
		return h.part0, nil
	}
	value := make([]byte, 0, h.parts*chunkSize)
	value = append(value, h.part0...)
	for i := 1; i < h.parts; i++ {
		item, err := txn.Get(chunkKey(key, i))
		if err != nil {
			return nil, fmt.Errorf("read chunk %d of %d: %w", i, h.parts, err)
		}
		if item.Version() != version {
			return nil, fmt.Errorf("chunk %d has revision %d, want %d", i, item.Version(), version)
		}
		if err := item.Value(func(v []byte) error {
			value = append(value, v...)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read chunk %d of %d: %w", i, h.parts, err)
		}
	}
	return value, nil
}
