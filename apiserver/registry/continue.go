package registry

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// listStart decides the snapshot revision and the first key of a list.
func (s *Store) listStart(ctx context.Context, prefix []byte, opts ListOptions) (rev int64, start []byte, err error) {
	invalid := func(field, value, msg string) error {
		return meta.NewInvalidOptions("ListOptions", meta.ErrorList{meta.Invalid(meta.NewPath(field), value, msg)})
	}
	match := opts.ResourceVersionMatch
	switch match {
	case "", "Exact", "NotOlderThan":
	default:
		return 0, nil, invalid("resourceVersionMatch", match, "must be one of: Exact, NotOlderThan")
	}
	if opts.Continue != "" {
		if match != "" {
			return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch is forbidden when continue is provided")
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return 0, nil, meta.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		rev, rel, err := s.reg.decodeContinue(opts.Continue)
		if err != nil {
			return 0, nil, err
		}
		if rev == latestContinueRV {
			rev = 0 // a fresh snapshot: see continueExpired
		}
		start = append(append([]byte{}, s.prefix...), rel...)
		if !bytes.HasPrefix(start, prefix) {
			return 0, nil, meta.NewBadRequest("continue key is not in the listed collection")
		}
		return rev, start, nil
	}
	if match != "" && opts.ResourceVersion == "" {
		return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	switch {
	case opts.ResourceVersion == "" || opts.ResourceVersion == "0":
		if match == "Exact" {
			return 0, nil, invalid("resourceVersionMatch", match, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
		}
		return 0, nil, nil
	}
	want, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return 0, nil, err
	}
	// Either way, a future revision is waited for (then a 504), as
	// kube-apiserver does for any unrecognised resourceVersion.
	if err := s.waitForRevision(ctx, want); err != nil {
		return 0, nil, err
	}
	if match == "Exact" || (match == "" && opts.Limit > 0) {
		return want, nil, nil // a snapshot at exactly that revision
	}
	return 0, nil, nil // not older than: the latest state
}

// Continue tokens are base64url(JSON{"v":1,"rv":N,"start":K}) + "." +
// base64url(HMAC-SHA256(payload)[:16]) under a random key kept in storage (so
// every instance over one store shares it and tokens survive restarts):
// opaque, versioned and tamper-evident, so that a mangled or forged token is
// a 400; K is relative to the type's key prefix and is checked against the
// listed prefix, so no token reads outside its collection.
type continueToken struct {
	V     int    `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

// latestContinueRV is the revision of a continue token that resumes at the
// latest revision instead of a snapshot (as kube-apiserver's -1).
const latestContinueRV = -1

// continueExpired is the 410 for a continue token whose snapshot has been
// compacted away. Like kube-apiserver's, its Status carries a fresh token that
// resumes from the same key at the latest revision: following it gives an
// inconsistent but complete remainder.
func (s *Store) continueExpired(relKey []byte) error {
	se := meta.NewGone("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. " +
		"Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	se.Status.Continue = s.reg.encodeContinue(latestContinueRV, relKey)
	return se
}

func (r *Registry) encodeContinue(rev int64, relKey []byte) string {
	payload, _ := json.Marshal(continueToken{V: 1, RV: rev, Start: string(relKey)})
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(r.continueMAC(payload))
}

// continueMAC signs a continue token's payload with the store's continue key
// (HMAC-SHA256, truncated to 128 bits).
func (r *Registry) continueMAC(payload []byte) []byte {
	mac := hmac.New(sha256.New, r.continueKey)
	mac.Write(payload)
	return mac.Sum(nil)[:16]
}

func (r *Registry) decodeContinue(tok string) (int64, []byte, error) {
	bad := meta.NewBadRequest("continue key is not valid: the token is malformed")
	dot := strings.LastIndexByte(tok, '.')
	if dot < 0 {
		return 0, nil, bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(tok[:dot])
	if err != nil {
		return 0, nil, bad
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil || !hmac.Equal(sig, r.continueMAC(payload)) {
		return 0, nil, bad
	}
	var ct continueToken
	if err := json.Unmarshal(payload, &ct); err != nil || ct.V != 1 || (ct.RV <= 0 && ct.RV != latestContinueRV) {
		return 0, nil, bad
	}
	return ct.RV, []byte(ct.Start), nil
}
