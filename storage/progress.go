package storage

import "context"

// KeepProgress returns wrapper, a Store that wraps inner (a view that
// converts, times or seals its values), able to request progress events
// when inner can (ProgressRequester): a watch cache over storage that
// cannot answers a consistent read only when progress comes on its own.
// Unwrap on the result returns wrapper.
func KeepProgress(wrapper, inner Store) Store {
	if p, ok := inner.(ProgressRequester); ok {
		return progressStore{Store: wrapper, p: p}
	}
	return wrapper
}

// progressStore is a wrapper with its inner store's RequestProgress.
type progressStore struct {
	Store
	p ProgressRequester
}

func (s progressStore) RequestProgress(ctx context.Context) error { return s.p.RequestProgress(ctx) }

// Unwrap returns the wrapper KeepProgress was given.
func (s progressStore) Unwrap() Store { return s.Store }
