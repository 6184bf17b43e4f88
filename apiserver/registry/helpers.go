package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// storageError turns a storage error into the Status error the API answers.
func storageError(err error, gr meta.GroupResource, name string) error {
	if _, ok := meta.AsStatusError(err); ok {
		return err
	}
	var compacted *storage.CompactedError
	var future *storage.FutureRevisionError
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrKeyTooLong):
		// No object can have a name whose key the storage refuses.
		return meta.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrAlreadyExists):
		return meta.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return meta.NewConflict(gr, name, meta.ConflictModified)
	case errors.Is(err, errSetRetired):
		return meta.NewConflict(gr, name, err.Error())
	case errors.As(err, &compacted):
		return meta.NewGone(fmt.Sprintf("The resourceVersion for the provided list is too old. (requested %d, oldest available %d)", compacted.Requested, compacted.Oldest))
	case errors.As(err, &future):
		return meta.NewTimeout(fmt.Sprintf("Too large resource version: %d, current: %d", future.Requested, future.Current), 1)
	case errors.Is(err, storage.ErrTooLarge):
		return meta.NewRequestEntityTooLarge(err.Error())
	case errors.Is(err, storage.ErrClosed):
		return meta.NewServiceUnavailable("the storage is shutting down")
	case errors.Is(err, storage.ErrFenced):
		// Only a leader's own work carries a fence: it learns it lost the
		// lease from the storage error, which stays in the chain.
		return fmt.Errorf("%w: %w", meta.NewServiceUnavailable("this instance no longer leads: the write was refused"), err)
	case errors.Is(err, storage.ErrNoSpace):
		return meta.NewInsufficientStorage(fmt.Sprintf("the server's storage is out of disk space; writes are refused until space is freed: %v", err))
	case errors.Is(err, storage.ErrBusy):
		return meta.NewTooManyRequests(fmt.Sprintf("the server's storage is busy (writes are waiting for the disk); retry: %v", err), 1)
	case errors.Is(err, storage.ErrUnavailable):
		return meta.NewServiceUnavailable(fmt.Sprintf("the server's storage cannot write: %v", err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return meta.NewTimeout("request did not complete in time", 1)
	}
	return meta.NewInternalError(err)
}

// parseRV parses a resourceVersion query parameter (400 when malformed).
func parseRV(s string) (int64, error) {
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv < 0 {
		return 0, meta.NewBadRequest(fmt.Sprintf("invalid resource version %q", s))
	}
	return rv, nil
}

// parseObjectRV parses metadata.resourceVersion of a request body.
func parseObjectRV(s string) (int64, error) {
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv <= 0 {
		return 0, meta.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q in the object's metadata", s))
	}
	return rv, nil
}

// generateName appends five random characters to prefix, as Kubernetes does.
func generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	const n = 5
	if len(prefix) > 63-n {
		prefix = prefix[:63-n]
	}
	var b [n]byte
	_, _ = rand.Read(b[:])
	out := []byte(prefix)
	for _, c := range b {
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out)
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

func sleepCtx(ctx context.Context, ms int) error {
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// numberString returns the canonical decimal text of a JSON number value.
func numberString(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		if f, err := n.Float64(); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64), true
		}
		return n.String(), true
	case int64:
		return strconv.FormatInt(n, 10), true
	case int:
		return strconv.Itoa(n), true
	case int32:
		return strconv.FormatInt(int64(n), 10), true
	case float64:
		if n == float64(int64(n)) {
			return strconv.FormatInt(int64(n), 10), true
		}
		return strconv.FormatFloat(n, 'g', -1, 64), true
	}
	return "", false
}

// shallowCopyWithMeta copies obj and its metadata map so that a retried
// update starts from the request body again.
func shallowCopyWithMeta(obj Object) Object {
	out := make(Object, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		out["metadata"] = m
	}
	return out
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func setRV(obj Object, rev int64) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		md["resourceVersion"] = strconv.FormatInt(rev, 10)
	}
}

// equalIgnoring compares two objects without the given top-level fields.
func equalIgnoring(a, b Object, skip ...string) bool {
	count := func(o Object) int {
		n := 0
		for k := range o {
			if !contains(skip, k) {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, av := range a {
		if contains(skip, k) {
			continue
		}
		bv, ok := b[k]
		if !ok || !meta.DeepEqual(av, bv) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
