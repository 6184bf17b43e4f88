package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// The --encryption-key-file turns on encryption at rest for secrets
// (docs/security.md): one key a line, NAME:BASE64, where BASE64 decodes to
// 32 random bytes (head -c 32 /dev/urandom | base64). The first key seals
// every secret written; every key opens. A line "identity" (no key) first
// writes plaintext, which with a reseal turns encryption off. Blank lines
// and lines starting with # are ignored:
//
//	# key2 writes, key1 still opens the values sealed before the rotation
//	key2:<44 characters of base64>
//	key1:<44 characters of base64>

// loadEncryptionKeys reads an encryption key file; "" is no encryption.
func loadEncryptionKeys(path string, logger *slog.Logger) (*registry.Encryption, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--encryption-key-file: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		logger.Warn("the encryption key file is readable by other users: chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
	enc, err := parseEncryptionKeys(data)
	if err != nil {
		return nil, fmt.Errorf("--encryption-key-file %s: %w", path, err)
	}
	return enc, nil
}

// parseEncryptionKeys parses the contents of a key file.
func parseEncryptionKeys(data []byte) (*registry.Encryption, error) {
	enc := &registry.Encryption{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == registry.IdentityKey {
			enc.Keys = append(enc.Keys, registry.EncryptionKey{Name: registry.IdentityKey})
			continue
		}
		name, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want NAME:BASE64 (or identity)", n)
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not base64: %w", n, name, err)
		}
		if len(secret) != 32 {
			return nil, fmt.Errorf("line %d: key %q has %d bytes, want 32 (head -c 32 /dev/urandom | base64)", n, name, len(secret))
		}
		enc.Keys = append(enc.Keys, registry.EncryptionKey{Name: strings.TrimSpace(name), Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(enc.Keys) == 0 {
		return nil, fmt.Errorf("no keys")
	}
	return enc, nil
}
