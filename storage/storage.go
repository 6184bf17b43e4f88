// Package storage defines the contract between kapi's API layer and a storage
// backend: a revisioned key-value store with compare-and-swap writes, snapshot
// reads and a resumable watch.
//
// Keys and values are opaque byte strings chosen by the caller; a backend never
// parses them. Every committed write is assigned one revision from a single,
// strictly increasing, store-wide sequence. The revision at which a key was last
// written is its resourceVersion in the API; the revision a list was read at is
// the list's resourceVersion.
//
// Backends live in sub-packages (storage/badger, storage/etcd) and prove their
// conformance by running storage/storagetest from their own tests.
package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is a revisioned key-value store. All methods are safe for concurrent use.
//
// Revision arguments follow one rule: 0 means "the latest committed revision";
// a positive value names an exact store revision, which must lie inside the
// retention window (older: a *CompactedError) and must already be committed
// (newer: a *FutureRevisionError); a negative one is ErrInvalid.
//
// Keys must be non-empty and at most a backend-specific length (otherwise
// ErrInvalid); a value longer than the backend's limit fails with ErrTooLarge.
// Byte slices returned by Get, List and Delete belong to the caller; the
// slices of watch events may be shared between watchers and must be treated
// as read-only. In the other direction, a store does not retain the key and
// value slices a call is given: the caller may reuse them once the call has
// returned (kapi's registry encodes writes into reused buffers).
type Store interface {
	// Get returns the value of key as of revision (0 = latest). A key that does
	// not exist at that revision returns ErrNotFound.
	Get(ctx context.Context, key []byte, revision int64) (KeyValue, error)

	// List returns the keys with opts.Prefix in ascending key order, as of one
	// snapshot revision that is reported in the result. Passing that revision
	// and the next start key back gives the following page of the same snapshot.
	List(ctx context.Context, opts ListOptions) (ListResult, error)

	// Create writes key only if it does not exist; otherwise ErrAlreadyExists.
	// It returns the revision of the write.
	Create(ctx context.Context, key, value []byte) (int64, error)

	// Update replaces the value of an existing key. When expectedRevision is
	// not 0, the write happens only if the key was last written at exactly that
	// revision; otherwise it fails with ErrConflict. A missing key is
	// ErrNotFound. It returns the revision of the write.
	Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error)

	// Delete removes an existing key, with the same expectedRevision rule as
	// Update. It returns the deleted key-value (as last written) and the
	// revision of the delete.
	Delete(ctx context.Context, key []byte, expectedRevision int64) (KeyValue, int64, error)

	// Watch streams, in revision order, every change to keys with opts.Prefix
	// whose revision is greater than opts.FromRevision (0 = changes after the
	// current revision). Watching from a revision older than the retention
	// window fails at once with a *CompactedError; a revision newer than the
	// current one is allowed and simply waits. The channel is closed when ctx is
	// done, when the store closes, or after an event carrying Err.
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)

	// CurrentRevision returns the revision of the latest committed write.
	CurrentRevision(ctx context.Context) (int64, error)

	// CompactedRevision returns the oldest revision that may still be read or
	// watched from: reads at older revisions fail with a *CompactedError.
	CompactedRevision(ctx context.Context) (int64, error)

	// Compact discards history older than revision. Backends also compact on
	// their own according to their retention settings. Compacting at or below
	// the compacted revision does nothing; a revision newer than the current
	// one fails with a *FutureRevisionError.
	Compact(ctx context.Context, revision int64) error

	// Close releases the store. Pending and later calls fail with ErrClosed and
	// open watches end with an event carrying ErrClosed. Close is idempotent.
	Close() error
}

// ProgressRequester is implemented by stores whose watches can be asked to
// report their progress now rather than at their next ProgressInterval. A
// watch cache that is behind the store's current revision only because the
// latest writes were under other prefixes uses it to catch up at once, which
// is what lets it answer consistent reads without waiting.
type ProgressRequester interface {
	// RequestProgress asks every open watch to send an EventProgress as soon
	// as it has delivered every change up to the store's current revision. It
	// does not wait for them; watches without a ProgressInterval may ignore
	// it.
	RequestProgress(ctx context.Context) error
}

// KeyValue is one stored key at one revision.
type KeyValue struct {
	Key   []byte
	Value []byte
	// Revision is the revision at which the key was last written (its "mod
	// revision").
	Revision int64
	// CreateRevision is the revision at which the key was created (the first
	// write after it last did not exist).
	CreateRevision int64
}

// ListOptions selects a page of keys.
type ListOptions struct {
	// Prefix restricts the list to keys that start with it. Required.
	Prefix []byte
	// StartKey, when set, is the first key (inclusive) to return; it must
	// start with Prefix. Continuation pages pass the result's NextKey here.
	StartKey []byte
	// Limit caps the number of items returned; 0 means no limit.
	Limit int64
	// MaxBytes, when positive, also ends the page once the keys and values
	// it holds reach MaxBytes: the item that reaches it is the page's last
	// (a page holds at least one item), and More, NextKey and Remaining are
	// set as for a page ended by Limit. It bounds the memory of a page of
	// large values; 0 means no bound. The bytes are counted as the backend
	// holds them: a store that seals values may end a page earlier.
	MaxBytes int64
	// Revision is the snapshot to read (0 = latest).
	Revision int64
	// KeysOnly, when set, leaves KeyValue.Value nil.
	KeysOnly bool
	// Count asks for ListResult.Remaining on a page that has More. Without
	// it a backend may leave Remaining at -1 and skip counting, which can
	// cost a read of the rest of the range: ask only when the count is
	// shown to someone (a list's remainingItemCount).
	Count bool
}

// ListResult is one page of a list.
type ListResult struct {
	Items []KeyValue
	// Revision is the snapshot revision the page was read at. Continuation
	// pages must pass it as ListOptions.Revision to see the same snapshot.
	Revision int64
	// More reports whether keys beyond the returned ones exist in the snapshot.
	More bool
	// NextKey is the key to pass as StartKey for the next page when More is set.
	NextKey []byte
	// Remaining is the number of keys after the returned ones in the snapshot,
	// or -1 when ListOptions.Count was not set or the backend cannot tell
	// cheaply. It is 0 when More is false.
	Remaining int64
}

// WatchOptions selects what a watch streams.
type WatchOptions struct {
	// Prefix restricts the watch to keys that start with it. Required.
	Prefix []byte
	// FromRevision: the watch streams changes with a revision strictly greater
	// than this one. 0 starts at the current revision.
	FromRevision int64
	// ProgressInterval, when positive, asks the backend to send a Progress
	// event at about this interval when no other event was sent, carrying a
	// revision up to which every change has been delivered. It is how watch
	// caches learn that time has passed with no changes under their prefix.
	ProgressInterval time.Duration
	// BufferBytes, when positive, bounds what the backend holds for this
	// watch while its consumer does not read, in keys and values, instead
	// of the backend's default: a small multiple of it (say, the events
	// buffered, those being handed over, those in the channel), plus the
	// event that crosses it. A backend that keeps history may then drop
	// what it buffered and read it again from history at the consumer's
	// pace; one that cannot may ignore it. For watches of one client each,
	// which may stall; 0 for a watch cache's own.
	BufferBytes int64
}

// EventType says what happened to a key.
type EventType int

// Event types.
const (
	// EventPut is a create or an update (PrevValue is nil for a create).
	EventPut EventType = iota + 1
	// EventDelete is a delete; Value is nil and PrevValue holds the deleted value.
	EventDelete
	// EventProgress carries no key: every change up to Revision has been sent.
	EventProgress
	// EventError ends the stream; Err says why.
	EventError
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	case EventProgress:
		return "PROGRESS"
	case EventError:
		return "ERROR"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change delivered by Watch.
type Event struct {
	Type EventType
	Key  []byte
	// Value is the new value (nil for deletes).
	Value []byte
	// PrevValue is the value before the change (nil for creates).
	PrevValue []byte
	// Revision is the revision of the change (for EventProgress, the revision
	// up to which everything was delivered).
	Revision int64
	// PrevRevision is the revision at which the key was last written before
	// this change (0 for creates).
	PrevRevision int64
	// CreateRevision is the revision at which the key was created.
	CreateRevision int64
	// Err is set on EventError.
	Err error
}

// IsCreate reports whether a put event created its key.
func (e Event) IsCreate() bool { return e.Type == EventPut && e.PrevRevision == 0 }

// Sentinel errors. Backends wrap them (or return the typed errors below, which
// match them with errors.Is) so callers can test with errors.Is.
var (
	ErrNotFound      = errors.New("storage: key not found")
	ErrAlreadyExists = errors.New("storage: key already exists")
	ErrConflict      = errors.New("storage: revision conflict")
	ErrCompacted     = errors.New("storage: revision compacted")
	ErrFutureRev     = errors.New("storage: revision not yet available")
	ErrClosed        = errors.New("storage: store closed")
	ErrInvalid       = errors.New("storage: invalid argument")
	// ErrKeyTooLong: a key is longer than the backend accepts, so no value
	// can be stored under it; it matches ErrInvalid too.
	ErrKeyTooLong = fmt.Errorf("%w: key too long", ErrInvalid)
	ErrTooLarge   = errors.New("storage: value too large")

	// ErrNoSpace: a write was refused because the volume holding the store
	// is (nearly) full. Reads continue; writes resume once space is freed.
	ErrNoSpace = errors.New("storage: no space left on the data volume")
	// ErrUnavailable: the store cannot write now (its data directory is
	// read-only or gone, or a write failed and the store is recovering).
	// Reads continue where the store can still serve them.
	ErrUnavailable = errors.New("storage: writes unavailable")
	// ErrBusy: a write waited too long for room in the store's write queue
	// (the disk is slower than the writes arrive). It was not applied;
	// retrying later is safe.
	ErrBusy = errors.New("storage: too busy, retry later")
)

// CompactedError reports a read or watch at a revision older than the
// retention window.
type CompactedError struct {
	Requested int64 // the revision asked for
	Oldest    int64 // the oldest revision still available
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("storage: revision %d is compacted (oldest available %d)", e.Requested, e.Oldest)
}

// Is makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// FutureRevisionError reports a read at a revision that is not committed yet.
type FutureRevisionError struct {
	Requested int64 // the revision asked for
	Current   int64 // the current revision
}

func (e *FutureRevisionError) Error() string {
	return fmt.Sprintf("storage: revision %d is newer than the current revision %d", e.Requested, e.Current)
}

// Is makes errors.Is(err, ErrFutureRev) true.
func (e *FutureRevisionError) Is(target error) bool { return target == ErrFutureRev }

// ConflictError reports a compare-and-swap that found another revision.
type ConflictError struct {
	Key      []byte
	Expected int64 // the revision the caller expected
	Actual   int64 // the key's current revision
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("storage: conflict on %q: expected revision %d, found %d", e.Key, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// PrefixEnd returns the smallest key greater than every key with prefix p, or
// nil when no such key exists (p is empty or all 0xff).
func PrefixEnd(p []byte) []byte {
	end := make([]byte, len(p))
	copy(end, p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
