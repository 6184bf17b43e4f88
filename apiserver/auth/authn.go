// Package auth holds kapi's authentication and authorization: small
// interfaces, ready implementations (bearer tokens, client certificates, a
// host callback; an RBAC-style rule authorizer), and the attributes a request
// is authorized on, which follow Kubernetes' model.
package auth

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Well-known users and groups, as Kubernetes names them.
const (
	AnonymousUser        = "system:anonymous"
	GroupUnauthenticated = "system:unauthenticated"
	GroupAuthenticated   = "system:authenticated"
	// GroupMasters is allowed everything by the default authorizer and by
	// RBAC, as in Kubernetes.
	GroupMasters = "system:masters"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether the user is in group g.
func (u *User) InGroup(g string) bool {
	for _, x := range u.Groups {
		if x == g {
			return true
		}
	}
	return false
}

// Authenticator finds the user of a request.
//
// It returns (user, true, nil) when the request carries credentials it
// accepts, (nil, false, nil) when the request carries no credentials of its
// kind (the next authenticator may try), and an error when it carries
// credentials of its kind that are invalid (the request is refused with 401).
type Authenticator interface {
	Authenticate(r *http.Request) (*User, bool, error)
}

// AuthenticatorFunc adapts a function to Authenticator; it is how a host
// plugs in its own sessions, OIDC or API keys.
type AuthenticatorFunc func(r *http.Request) (*User, bool, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (*User, bool, error) { return f(r) }

// ErrInvalidCredentials is returned for credentials that were recognised but
// are not valid.
var ErrInvalidCredentials = errors.New("invalid credentials")

// Union tries each authenticator in turn; the first that recognises the
// request decides.
func Union(auths ...Authenticator) Authenticator {
	return AuthenticatorFunc(func(r *http.Request) (*User, bool, error) {
		for _, a := range auths {
			u, ok, err := a.Authenticate(r)
			if err != nil || ok {
				return u, ok, err
			}
		}
		return nil, false, nil
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}

// TokenCallback authenticates bearer tokens with fn, which returns the user
// of a token, false for an unknown token, or an error.
func TokenCallback(fn func(ctx context.Context, token string) (*User, bool, error)) Authenticator {
	return AuthenticatorFunc(func(r *http.Request) (*User, bool, error) {
		tok, ok := bearerToken(r)
		if !ok {
			return nil, false, nil
		}
		u, ok, err := fn(r.Context(), tok)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, ErrInvalidCredentials
		}
		return u, true, nil
	})
}

// StaticTokens authenticates bearer tokens from a fixed table. Tokens are
// compared in constant time.
func StaticTokens(tokens map[string]User) Authenticator {
	type entry struct {
		token []byte
		user  User
	}
	entries := make([]entry, 0, len(tokens))
	for t, u := range tokens {
		entries = append(entries, entry{[]byte(t), u})
	}
	return TokenCallback(func(_ context.Context, token string) (*User, bool, error) {
		tb := []byte(token)
		var found *User
		for i := range entries {
			if subtle.ConstantTimeCompare(entries[i].token, tb) == 1 {
				u := entries[i].user
				found = &u
			}
		}
		return found, found != nil, nil
	})
}

// TokenFile reads a static token file in kube-apiserver's format: CSV lines
// `token,user,uid[,"group1,group2"]`; empty lines and lines starting with #
// are skipped.
func TokenFile(path string) (Authenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading token file: %w", err)
	}
	defer f.Close()
	tokens, err := parseTokenCSV(f)
	if err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	return StaticTokens(tokens), nil
}

func parseTokenCSV(rd io.Reader) (map[string]User, error) {
	r := csv.NewReader(rd)
	r.FieldsPerRecord = -1
	r.Comment = '#'
	r.TrimLeadingSpace = true
	tokens := map[string]User{}
	line := 0
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return tokens, nil
		}
		line++
		if err != nil {
			return nil, err
		}
		if len(rec) < 3 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("record %d: want token,user,uid[,groups]", line)
		}
		u := User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			for _, g := range strings.Split(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		if _, dup := tokens[rec[0]]; dup {
			return nil, fmt.Errorf("record %d: duplicate token", line)
		}
		tokens[rec[0]] = u
	}
}

// ClientCertificates authenticates TLS client certificates that chain to
// roots: the subject's common name is the user name and its organizations
// are the groups, as Kubernetes does. The server's tls.Config must request
// client certificates (tls.VerifyClientCertIfGiven) for them to arrive.
func ClientCertificates(roots *x509.CertPool) Authenticator {
	return AuthenticatorFunc(func(r *http.Request) (*User, bool, error) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return nil, false, nil
		}
		leaf := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return nil, false, fmt.Errorf("%w: client certificate: %v", ErrInvalidCredentials, err)
		}
		if leaf.Subject.CommonName == "" {
			return nil, false, fmt.Errorf("%w: client certificate has no common name", ErrInvalidCredentials)
		}
		return &User{Name: leaf.Subject.CommonName, Groups: append([]string{}, leaf.Subject.Organization...)}, true, nil
	})
}

// UserContextKey is the context key of the user a request was
// authenticated as: WithUser stores the user under it, and UserFrom asks a
// context's Value for it. A context type that keeps the user in its own
// way (the API server's request state does) answers Value(UserContextKey{})
// with the *User.
type UserContextKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, UserContextKey{}, u)
}

// UserFrom returns the user a request was authenticated as.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(UserContextKey{}).(*User)
	return u, ok && u != nil
}
