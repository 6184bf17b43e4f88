// Package etag computes the entity tags kube-apiserver gives its discovery
// and OpenAPI documents.
package etag

import (
	"crypto/sha512"
	"encoding/hex"
	"strings"
)

// Hash is the upper-case hex SHA-512 of b: the hash an OpenAPI v3 index
// gives each document, and the value of its ETag.
func Hash(b []byte) string {
	sum := sha512.Sum512(b)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// Of is the ETag of b: its Hash, quoted.
func Of(b []byte) string { return `"` + Hash(b) + `"` }
