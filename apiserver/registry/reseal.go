package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kapi-dev/kapi/storage"
)

// A reseal rewrites every stored value of the sensitive types that is not
// sealed under the current write key (the first of Encryption.Keys):
// values under an older key, and plaintext written before encryption was
// turned on (or, with IdentityKey first, sealed values, which it
// decrypts). Like a storage migration it walks storage in pages and
// rewrites each value with a compare-and-swap on its revision (a client's
// write in between wins, and is sealed under the write key anyway), so it
// runs while the server serves. Each rewrite is a write: the object's
// resourceVersion moves on and watchers see an update with the same
// content.

// resealPageSize is how many values a reseal lists at once, and
// resealParallelism how many of their rewrites are in flight together (so
// that storage commits them in one batch).
const (
	resealPageSize    = 100
	resealParallelism = 4
)

// ResealOptions tune Registry.Reseal.
type ResealOptions struct {
	// Wait, when set, is called before each rewrite and may block (a rate
	// limiter's Wait): the reseal stops with its error.
	Wait func(ctx context.Context) error
	// Progress, when set, is called after each page with the counts so
	// far. It must not block for long.
	Progress func(ResealResult)
}

// ResealResult counts what a reseal did.
type ResealResult struct {
	// WriteKey is the key values are sealed under now ("identity":
	// plaintext).
	WriteKey string
	// Scanned is how many stored values the reseal looked at; Resealed how
	// many it rewrote.
	Scanned, Resealed int64
	// Failed is how many could not be opened (a *SealedValueError each,
	// logged): they stay as they are, and the reseal reports an error.
	Failed int64
}

// ErrEncryptionNotConfigured is Reseal's error on a registry without
// Config.Encryption.
var ErrEncryptionNotConfigured = errors.New("registry: encryption at rest is not configured")

// Reseal rewrites every value of the sensitive types that is not sealed
// under the write key, as described above. It fails with
// ErrEncryptionNotConfigured without Config.Encryption, with a storage
// error, with ctx's error, or, after walking everything, with an error
// counting the values it could not open.
func (r *Registry) Reseal(ctx context.Context, opts ResealOptions) (ResealResult, error) {
	res := ResealResult{}
	s := r.sealer
	if s == nil {
		return res, ErrEncryptionNotConfigured
	}
	res.WriteKey = s.write
	for _, prefix := range s.prefixes {
		lo := storage.ListOptions{Prefix: prefix, Limit: resealPageSize, MaxBytes: pageBytes}
		for {
			page, err := r.raw.List(ctx, lo)
			if err != nil {
				return res, fmt.Errorf("registry: resealing: listing %s: %w", prefix, err)
			}
			resealed, failed, err := r.resealPage(ctx, page.Items, opts)
			res.Scanned += int64(len(page.Items))
			res.Resealed += resealed
			res.Failed += failed
			if opts.Progress != nil {
				opts.Progress(res)
			}
			if err != nil {
				return res, err
			}
			if !page.More {
				break
			}
			lo.StartKey = page.NextKey // each page at the latest revision: a long reseal outlives any history window
		}
	}
	if res.Failed > 0 {
		return res, fmt.Errorf("registry: resealing: %d values could not be opened (see the log), the others are sealed under %q", res.Failed, s.write)
	}
	level := slog.LevelDebug
	if res.Resealed > 0 {
		level = slog.LevelInfo
	}
	r.cfg.Logger.Log(ctx, level, "reseal complete", "writeKey", s.write, "scanned", res.Scanned, "resealed", res.Resealed)
	return res, nil
}

// underWriteKey reports whether a raw stored value needs no reseal.
func (s *sealer) underWriteKey(value []byte) bool {
	name, sealed := SealedKeyName(value)
	if _, ok := s.aeads[s.write]; !ok {
		return !sealed // identity: plaintext is the goal
	}
	return sealed && name == s.write
}

// resealPage rewrites the values of a page that need it, a few at a time.
func (r *Registry) resealPage(ctx context.Context, items []storage.KeyValue, opts ResealOptions) (resealed, failed int64, err error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, resealParallelism)
	for _, kv := range items {
		if r.sealer.underWriteKey(kv.Value) {
			continue
		}
		if opts.Wait != nil {
			if err := opts.Wait(ctx); err != nil {
				mu.Lock()
				firstErr = cmpFirst(firstErr, err)
				mu.Unlock()
				break
			}
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			wrote, err := r.resealOne(ctx, kv)
			mu.Lock()
			defer mu.Unlock()
			var sealed *SealedValueError
			switch {
			case errors.As(err, &sealed):
				failed++
				r.cfg.Logger.Error("reseal: a stored value cannot be opened", "key", string(kv.Key), "keyName", sealed.KeyName, "err", err)
			case err != nil:
				firstErr = cmpFirst(firstErr, err)
			case wrote:
				resealed++
			}
		})
	}
	wg.Wait()
	return resealed, failed, firstErr
}

// resealOne rewrites one raw stored value under the write key with a
// compare-and-swap on its revision, reading it again after a conflict.
// It reports whether it wrote.
func (r *Registry) resealOne(ctx context.Context, kv storage.KeyValue) (bool, error) {
	s := r.sealer
	for {
		if s.underWriteKey(kv.Value) {
			return false, nil
		}
		plain, _, err := s.open(kv.Key, kv.Value)
		if err != nil {
			return false, err
		}
		sealed, err := s.seal(kv.Key, plain)
		if err != nil {
			return false, err
		}
		_, err = r.raw.Update(ctx, kv.Key, sealed, kv.Revision)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, storage.ErrConflict):
		case errors.Is(err, storage.ErrNotFound):
			return false, nil // deleted meanwhile
		default:
			return false, fmt.Errorf("registry: resealing %s: %w", kv.Key, err)
		}
		if kv, err = r.raw.Get(ctx, kv.Key, 0); errors.Is(err, storage.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("registry: resealing %s: %w", kv.Key, err)
		}
	}
}

// cmpFirst keeps the first error.
func cmpFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// EncryptionStatus describes encryption at rest (Registry.Encryption).
type EncryptionStatus struct {
	// Enabled: Config.Encryption is set.
	Enabled bool
	// WriteKey is the key new values are sealed under ("identity":
	// plaintext); Keys are every configured key, WriteKey first.
	WriteKey string
	Keys     []string
	// Prefixes are the storage prefixes of the sensitive types.
	Prefixes []string
}

// Encryption returns the registry's encryption at rest configuration, by
// key names (never the keys themselves).
func (r *Registry) Encryption() EncryptionStatus {
	s := r.sealer
	if s == nil {
		return EncryptionStatus{}
	}
	st := EncryptionStatus{Enabled: true, WriteKey: s.write, Keys: append([]string(nil), s.names...)}
	for _, p := range s.prefixes {
		st.Prefixes = append(st.Prefixes, string(p))
	}
	return st
}
