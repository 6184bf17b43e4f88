package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// encryptionKeyName is where, under the key prefix, the registry keeps
// one canary per encryption key: a known text sealed under the key, which
// the key configured under that name must open. It is how a wrong key is
// an error at startup rather than garbage (or 500s) at run time.
const encryptionKeyName = "_kapi/encryption"

// canaryText is what every canary seals.
const canaryText = "kapi encryption canary"

// encryptionRecord is the value at encryptionKeyName.
type encryptionRecord struct {
	// Canaries holds, by key name, canaryText sealed under that key (at
	// storage key encryptionKeyName), for every key configured since the
	// last time the configuration dropped one.
	Canaries map[string][]byte `json:"canaries"`
}

// checkEncryption runs at New, on the raw storage: every configured key
// that has a canary must open it; a key that has one but is no longer
// configured may be dropped only when no stored value is sealed under it
// (one scan of everything under the key prefix, once per dropped key);
// then every configured key gets its canary. s is nil without encryption.
func (r *Registry) checkEncryption(raw storage.Store, s *sealer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	key := []byte(r.cfg.KeyPrefix + encryptionKeyName)
	for {
		var rec encryptionRecord
		kv, err := raw.Get(ctx, key, 0)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			if s == nil {
				return nil // never encrypted
			}
		case err != nil:
			return fmt.Errorf("registry: reading the encryption record: %w", err)
		default:
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				return fmt.Errorf("registry: the encryption record %s is corrupt: %w", key, err)
			}
		}
		configured := map[string]bool{}
		if s != nil {
			for _, n := range s.names {
				configured[n] = true
			}
		}
		var dropped []string
		for _, name := range slices.Sorted(maps.Keys(rec.Canaries)) {
			if !configured[name] {
				dropped = append(dropped, name)
				continue
			}
			if plain, _, err := s.open(key, rec.Canaries[name]); err != nil || string(plain) != canaryText {
				return fmt.Errorf("registry: encryption key %q is not the key of that name that values were sealed with "+
					"(it does not open the canary at %s): configure the right key material for %q", name, key, name)
			}
		}
		if len(dropped) > 0 {
			if err := r.checkDroppedKeys(ctx, raw, dropped); err != nil {
				return err
			}
		}
		next := encryptionRecord{Canaries: map[string][]byte{}}
		if s != nil {
			for _, n := range s.names {
				if _, ok := s.aeads[n]; !ok {
					continue // identity
				}
				if c, ok := rec.Canaries[n]; ok {
					next.Canaries[n] = c
				} else if next.Canaries[n], err = s.sealWith(n, key, []byte(canaryText)); err != nil {
					return err
				}
			}
		}
		val, _ := json.Marshal(next)
		switch {
		case kv.Value == nil:
			_, err = raw.Create(ctx, key, val)
		case len(next.Canaries) == 0:
			_, _, err = raw.Delete(ctx, key, kv.Revision)
		case !bytes.Equal(val, kv.Value):
			_, err = raw.Update(ctx, key, val, kv.Revision)
		}
		switch {
		case errors.Is(err, storage.ErrAlreadyExists), errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			continue // another instance changed it: check again
		case err != nil:
			return fmt.Errorf("registry: writing the encryption record: %w", err)
		}
		return nil
	}
}

// checkDroppedKeys fails when a value under the key prefix is sealed under
// one of the dropped keys.
func (r *Registry) checkDroppedKeys(ctx context.Context, raw storage.Store, dropped []string) error {
	counts := map[string]int{}
	first := map[string]string{}
	opts := storage.ListOptions{Prefix: []byte(r.cfg.KeyPrefix), Limit: 1000, MaxBytes: pageBytes}
	for {
		page, err := raw.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("registry: looking for values sealed under the encryption keys no longer configured %v: %w", dropped, err)
		}
		for _, kv := range page.Items {
			if name, ok := SealedKeyName(kv.Value); ok && slices.Contains(dropped, name) {
				if counts[name] == 0 {
					first[name] = string(kv.Key)
				}
				counts[name]++
			}
		}
		if !page.More {
			break
		}
		opts.StartKey, opts.Revision = page.NextKey, page.Revision
	}
	for _, name := range dropped {
		if n := counts[name]; n > 0 {
			return fmt.Errorf("registry: %d stored values (the first %s) are sealed under encryption key %q, which is not configured: "+
				"configure it; to remove a key, first let a reseal under the new first key finish (Registry.Reseal, run by the controllers)", n, first[name], name)
		}
	}
	return nil
}
