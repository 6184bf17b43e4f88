package registry

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/kapi-dev/kapi/meta"
)

// Encryption configures encryption at rest (Config.Encryption): the values
// of the sensitive types are sealed with AES-256-GCM before they reach
// storage and opened on the way out, as kube-apiserver's aesgcm provider
// does. Everything above storage (stores, watch caches, controllers,
// Registry.Storage) sees plaintext; storage, and so every backup of it,
// holds sealed values only.
type Encryption struct {
	// Resources are the sensitive types, by group and resource. Default:
	// core secrets. A view (Resource.StoredAs) of a sensitive type is
	// sealed with it: what counts is where objects are stored.
	Resources []meta.GroupResource
	// Keys seal and open the values. The first one seals every value
	// written; every one opens. Rotation: add the new key after the
	// current one everywhere, then put it first, then Reseal, then drop
	// the old one. A first key named "identity" (IdentityKey) writes
	// plaintext: with it, a Reseal decrypts everything, after which
	// Encryption can be removed. At least one key is required.
	Keys []EncryptionKey
}

// EncryptionKey is one named key.
type EncryptionKey struct {
	// Name identifies the key in every value sealed with it: 1 to 64 of
	// [A-Za-z0-9._-]. It must never be reused for other key material.
	Name string
	// Secret is the 32-byte AES-256 key; empty for IdentityKey.
	Secret []byte
}

// IdentityKey is the name of the key that seals nothing: as first key, it
// makes writes plaintext (kube-apiserver's identity provider).
const IdentityKey = "identity"

// sealedPrefix starts every sealed value; the key name and ':' follow,
// then the 12-byte nonce and the ciphertext with its 16-byte tag. A stored
// object begins with storedMagic and a version byte, so the two can never
// be confused, and a value of a sensitive type without the prefix is
// plaintext written before encryption was turned on.
const sealedPrefix = "kapi:enc:aesgcm:v1:"

// sealer seals and opens the values of the sensitive types.
type sealer struct {
	write    string                 // the first key's name ("identity": plaintext)
	aeads    map[string]cipher.AEAD // by name; no entry for identity
	names    []string               // the configured key names, in order
	prefixes [][]byte               // storage prefixes of the sensitive types
}

// newSealer checks enc and returns its sealer over the sensitive types'
// storage prefixes, as prefixOf gives them.
func newSealer(enc *Encryption, prefixOf func(gr meta.GroupResource) []byte) (*sealer, error) {
	if len(enc.Keys) == 0 {
		return nil, errors.New("registry: Config.Encryption has no keys")
	}
	s := &sealer{write: enc.Keys[0].Name, aeads: map[string]cipher.AEAD{}}
	seen := map[string]bool{}
	for i, k := range enc.Keys {
		if err := checkKeyName(k.Name); err != nil {
			return nil, fmt.Errorf("registry: encryption key %d: %w", i+1, err)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("registry: encryption key %q is configured twice", k.Name)
		}
		seen[k.Name] = true
		s.names = append(s.names, k.Name)
		if k.Name == IdentityKey {
			if len(k.Secret) != 0 {
				return nil, fmt.Errorf("registry: encryption key %q takes no secret", IdentityKey)
			}
			continue
		}
		if len(k.Secret) != 32 {
			return nil, fmt.Errorf("registry: encryption key %q has %d bytes, want 32 (AES-256)", k.Name, len(k.Secret))
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("registry: encryption key %q: %w", k.Name, err)
		}
		if s.aeads[k.Name], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("registry: encryption key %q: %w", k.Name, err)
		}
	}
	grs := enc.Resources
	if len(grs) == 0 {
		grs = []meta.GroupResource{{Resource: "secrets"}}
	}
	for _, gr := range grs {
		if gr.Resource == "" {
			return nil, fmt.Errorf("registry: Config.Encryption: a sensitive type of group %q has no resource", gr.Group)
		}
		s.prefixes = append(s.prefixes, prefixOf(gr))
	}
	return s, nil
}

// checkKeyName refuses names that could not be told apart in a sealed
// value's prefix.
func checkKeyName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("key name %q must have 1 to 64 characters", name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("key name %q may only hold letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// sensitive reports whether key belongs to a sensitive type.
func (s *sealer) sensitive(key []byte) bool {
	for _, p := range s.prefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// overlaps reports whether a list or watch of prefix may reach a
// sensitive key.
func (s *sealer) overlaps(prefix []byte) bool {
	for _, p := range s.prefixes {
		if bytes.HasPrefix(p, prefix) || bytes.HasPrefix(prefix, p) {
			return true
		}
	}
	return false
}

// seal returns value sealed under the write key for storage key key (or
// value itself under identity). The key name and the storage key are the
// additional data, so a sealed value opens only under its own key.
func (s *sealer) seal(key, value []byte) ([]byte, error) {
	return s.sealWith(s.write, key, value)
}

func (s *sealer) sealWith(name string, key, value []byte) ([]byte, error) {
	aead, ok := s.aeads[name]
	if !ok {
		return value, nil // identity
	}
	head := len(sealedPrefix) + len(name) + 1
	out := make([]byte, head+aead.NonceSize(), head+aead.NonceSize()+len(value)+aead.Overhead())
	copy(out, sealedPrefix)
	copy(out[len(sealedPrefix):], name)
	out[head-1] = ':'
	if _, err := rand.Read(out[head:]); err != nil {
		return nil, fmt.Errorf("registry: sealing %s: %w", key, err)
	}
	ad := additionalData(out[:head], key)
	return aead.Seal(out, out[head:], value, ad), nil
}

// additionalData binds a sealed value to its key name and storage key.
func additionalData(head, key []byte) []byte {
	ad := make([]byte, 0, len(head)+len(key))
	return append(append(ad, head...), key...)
}

// SealedValueError is the error of a stored value of a sensitive type that
// cannot be opened: its key is not configured, or the value does not
// authenticate under it (a wrong key, or a value that was changed or moved
// to another storage key).
type SealedValueError struct {
	Key     string // the storage key
	KeyName string // the key the value names ("" when the prefix is unreadable)
	Err     error
}

func (e *SealedValueError) Error() string {
	return fmt.Sprintf("the value of %s sealed under encryption key %q cannot be opened: %v", e.Key, e.KeyName, e.Err)
}

func (e *SealedValueError) Unwrap() error { return e.Err }

// errKeyNotConfigured is the cause of a SealedValueError whose key is not
// configured.
var errKeyNotConfigured = errors.New("the key is not configured")

// open returns the plaintext of a stored value of storage key key: the
// value itself when it is not sealed (written before encryption), a
// *SealedValueError when it cannot be opened. keyName is the key it was
// sealed under ("" for plaintext).
func (s *sealer) open(key, value []byte) (plain []byte, keyName string, err error) {
	if !bytes.HasPrefix(value, []byte(sealedPrefix)) {
		return value, "", nil
	}
	rest := value[len(sealedPrefix):]
	i := bytes.IndexByte(rest, ':')
	if i <= 0 {
		return nil, "", &SealedValueError{Key: string(key), Err: errors.New("the sealed value's prefix is corrupt")}
	}
	keyName = string(rest[:i])
	aead, ok := s.aeads[keyName]
	if !ok {
		return nil, keyName, &SealedValueError{Key: string(key), KeyName: keyName, Err: errKeyNotConfigured}
	}
	head := len(sealedPrefix) + i + 1
	if len(value) < head+aead.NonceSize()+aead.Overhead() {
		return nil, keyName, &SealedValueError{Key: string(key), KeyName: keyName, Err: errors.New("the sealed value is truncated")}
	}
	nonce := value[head : head+aead.NonceSize()]
	plain, err = aead.Open(nil, nonce, value[head+aead.NonceSize():], additionalData(value[:head], key))
	if err != nil {
		return nil, keyName, &SealedValueError{Key: string(key), KeyName: keyName,
			Err: errors.New("it does not authenticate: a wrong key, or a value changed or moved in storage")}
	}
	return plain, keyName, nil
}

// SealedKeyName returns the name of the key a stored value is sealed
// under, as read from storage itself (not through Registry.Storage, which
// opens values), and whether it is sealed at all.
func SealedKeyName(value []byte) (string, bool) {
	if !bytes.HasPrefix(value, []byte(sealedPrefix)) {
		return "", false
	}
	rest := value[len(sealedPrefix):]
	i := bytes.IndexByte(rest, ':')
	if i <= 0 {
		return "", true
	}
	return string(rest[:i]), true
}
