package watch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// Default settings. A zero field of Settings means its default.
const (
	DefaultWindowEvents       = 10_000
	DefaultWindowAge          = 5 * time.Minute
	DefaultWindowBytes        = 64 << 20
	DefaultWindowTotalBytes   = 256 << 20
	DefaultStateBytes         = 256 << 20
	DefaultWatcherBuffer      = 1_000
	DefaultProgressInterval   = 100 * time.Millisecond
	DefaultBookmarkInterval   = time.Minute
	DefaultConsistentReadWait = 250 * time.Millisecond
	DefaultTimeout            = 30 * time.Minute
	DefaultRetainedSnapshots  = 4
	DefaultRetainFor          = 30 * time.Second
	DefaultReadmitInterval    = 10 * time.Second
)

// Settings are the tunables of a Cache. Every zero field takes its default,
// so the zero Settings is the default configuration.
type Settings struct {
	// WindowEvents bounds the number of recent events the cache keeps so that
	// watches can resume from a past revision without reading storage.
	// Default 10,000.
	WindowEvents int

	// WindowAge bounds the age of the events in the window. Default 5
	// minutes. Older resumptions replay from storage history instead.
	WindowAge time.Duration

	// WindowBytes bounds the bytes of the objects and encoded frames held by
	// the events in the window. Default 64 MiB.
	WindowBytes int64

	// WindowTotalBytes bounds the windows of all the caches that share a
	// Budget together (in a registry, every type's). Past it, a cache whose
	// window holds more than an equal share of the bound (the bound divided
	// by the caches whose windows hold events) evicts its oldest events
	// down to that share when it next applies events or progress. Default
	// 256 MiB, or WindowBytes if that is larger; negative: only WindowBytes
	// bounds each window.
	WindowTotalBytes int64

	// StateBytes bounds the memory of the cache's copy of the current state
	// (the latest version of every object, about key + value + 128 bytes
	// each) and of the encodings its objects keep (Cache.Encoding). The
	// state serves resourceVersion=0 lists and gets and the synthetic ADDED
	// events of new watches from memory. Caches given a Config.Budget share
	// that budget instead (a registry gives every type one budget of this
	// size); see Budget for what happens past it. Default 256 MiB; negative
	// keeps no state.
	StateBytes int64

	// ReadmitInterval is the shortest time between two attempts of a cache
	// whose state the budget dropped to bring it back (a read that finds it
	// dropped starts one when the budget has room for it). Default 10
	// seconds.
	ReadmitInterval time.Duration

	// WatcherBuffer is the number of events queued for a watcher whose
	// consumer is busy. A watcher whose queue is full drops it and replays
	// from the window later; a watcher that falls behind the window is
	// closed (its client resumes from its last resourceVersion). Default
	// 1,000.
	WatcherBuffer int

	// ProgressInterval is how often the storage reports progress to the cache
	// when nothing under its prefix changes. It bounds how long a consistent
	// read waits for the cache to catch up with writes elsewhere in the
	// store. Default 100ms.
	ProgressInterval time.Duration

	// BookmarkInterval is how often a watch that allows bookmarks gets one
	// when idle. A watch with a deadline also gets one 2s before it ends.
	// Default 1 minute, as kube-apiserver.
	BookmarkInterval time.Duration

	// ConsistentReadWait is how long a read at the most recent revision waits
	// for the cache to reach the storage's current revision before it reads
	// a storage snapshot instead. Default 250ms.
	ConsistentReadWait time.Duration

	// Timeout ends watches whose context has no deadline after a random
	// duration between Timeout and twice Timeout, so that clients reconnect
	// and spread over servers, as kube-apiserver's --min-request-timeout.
	// Default 30 minutes; negative: never.
	Timeout time.Duration

	// RetainedSnapshots is how many past states the cache keeps for lists
	// served in pages (limit and continue), so that every page of one list
	// comes from memory at the first page's revision. A kept state shares
	// the objects that have not changed since; it holds on to the versions
	// replaced since. Default 4; negative keeps none (continued pages are
	// then read from storage snapshots).
	RetainedSnapshots int

	// RetainFor is how long a kept state survives without being used.
	// Default 30 seconds.
	RetainFor time.Duration
}

func (s Settings) withDefaults() (Settings, error) {
	if s.WindowEvents == 0 {
		s.WindowEvents = DefaultWindowEvents
	}
	if s.WindowAge == 0 {
		s.WindowAge = DefaultWindowAge
	}
	if s.WindowBytes == 0 {
		s.WindowBytes = DefaultWindowBytes
	}
	if s.WindowTotalBytes == 0 {
		s.WindowTotalBytes = max(DefaultWindowTotalBytes, s.WindowBytes)
	}
	if s.StateBytes == 0 {
		s.StateBytes = DefaultStateBytes
	}
	if s.WatcherBuffer == 0 {
		s.WatcherBuffer = DefaultWatcherBuffer
	}
	if s.ProgressInterval == 0 {
		s.ProgressInterval = DefaultProgressInterval
	}
	if s.BookmarkInterval == 0 {
		s.BookmarkInterval = DefaultBookmarkInterval
	}
	if s.ConsistentReadWait == 0 {
		s.ConsistentReadWait = DefaultConsistentReadWait
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.RetainedSnapshots == 0 {
		s.RetainedSnapshots = DefaultRetainedSnapshots
	}
	if s.RetainFor == 0 {
		s.RetainFor = DefaultRetainFor
	}
	if s.ReadmitInterval == 0 {
		s.ReadmitInterval = DefaultReadmitInterval
	}
	switch {
	case s.WindowEvents < 0:
		return s, fmt.Errorf("watch: WindowEvents %d is negative", s.WindowEvents)
	case s.WindowAge < 0:
		return s, fmt.Errorf("watch: WindowAge %v is negative", s.WindowAge)
	case s.WindowBytes < 0:
		return s, fmt.Errorf("watch: WindowBytes %d is negative", s.WindowBytes)
	case s.WatcherBuffer < 1:
		return s, fmt.Errorf("watch: WatcherBuffer %d must be positive", s.WatcherBuffer)
	case s.ProgressInterval < 0:
		return s, fmt.Errorf("watch: ProgressInterval %v is negative", s.ProgressInterval)
	case s.BookmarkInterval < 0:
		return s, fmt.Errorf("watch: BookmarkInterval %v is negative", s.BookmarkInterval)
	case s.ReadmitInterval < 0:
		return s, fmt.Errorf("watch: ReadmitInterval %v is negative", s.ReadmitInterval)
	case s.RetainFor < 0:
		return s, fmt.Errorf("watch: RetainFor %v is negative", s.RetainFor)
	case s.ConsistentReadWait < 0:
		return s, fmt.Errorf("watch: ConsistentReadWait %v is negative", s.ConsistentReadWait)
	}
	return s, nil
}

// Config configures a Cache.
type Config struct {
	Settings

	// Storage is the store the cache follows. Required.
	Storage storage.Store
	// Prefix is the storage prefix of the objects the cache holds. Required.
	Prefix []byte
	// Attrs computes what watch filters look at (labels, field values) from
	// a stored value. It is called at most once per object version, only
	// when a filter needs it, and its result is shared. Nil: filters see nil.
	Attrs func(key, value []byte) (any, error)
	// PrevValue, when set, converts the previous value of a change into the
	// form the cache holds: Storage's watch then hands previous values up as
	// stored, and the cache converts one only when its state does not hold
	// that version already (a store that converts every value it reads pays
	// one conversion per change, not two). Nil: previous values are used as
	// the watch hands them up.
	PrevValue func(key, value []byte) []byte
	// Budget, when set, is the memory budget the cache's state shares with
	// other caches' (Settings.StateBytes is then not used). Nil: a budget
	// of Settings.StateBytes for this cache alone.
	Budget *Budget
	// Logger receives operational messages. Default: discard.
	Logger *slog.Logger
}

// Errors a watch ends with. Next returns them once the watch is over; none
// of them is sent to the client as an event (the client resumes from the
// last resourceVersion it saw).
var (
	// ErrStopped: the cache was stopped (the type was re-registered or
	// unregistered, or the server is shutting down).
	ErrStopped = errors.New("watch: cache stopped")
	// ErrTooSlow: the watcher fell behind the cache's window.
	ErrTooSlow = errors.New("watch: watcher fell too far behind")
	// ErrResync: the cache lost its storage watch and listed storage again;
	// the continuity of its watchers is broken.
	ErrResync = errors.New("watch: cache resynchronised with storage")
	// ErrEnded: the watch's context ended (the client went away or the
	// watch timed out).
	ErrEnded = errors.New("watch: ended")
)
