package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is the quickstart's certificate authority, serving certificate and
// admin token, generated on first start and kept in <data-dir>/pki.
type pki struct {
	caPEM      []byte
	caCert     *x509.Certificate
	caKey      *ecdsa.PrivateKey
	serving    tls.Certificate
	adminToken string
}

// loadOrCreatePKI reads the PKI from dir, creating what is missing. The
// serving certificate is re-issued when it does not cover host.
func loadOrCreatePKI(dir, host string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	p := &pki{}
	caCrt, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := p.loadCA(caCrt, caKey); errors.Is(err, os.ErrNotExist) {
		if err := p.createCA(caCrt, caKey); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	srvCrt, srvKey := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	cert, err := tls.LoadX509KeyPair(srvCrt, srvKey)
	if err != nil || !covers(cert, host, p.caCert) {
		if err := p.createServing(srvCrt, srvKey, host); err != nil {
			return nil, err
		}
		if cert, err = tls.LoadX509KeyPair(srvCrt, srvKey); err != nil {
			return nil, err
		}
	}
	p.serving = cert
	tokenPath := filepath.Join(dir, "admin.token")
	tok, err := os.ReadFile(tokenPath)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tok = []byte(hex.EncodeToString(b))
		if err := os.WriteFile(tokenPath, tok, 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	p.adminToken = strings.TrimSpace(string(tok))
	return p, nil
}

func (p *pki) loadCA(crtPath, keyPath string) error {
	crtPEM, err := os.ReadFile(crtPath)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return fmt.Errorf("%s or %s is not PEM", crtPath, keyPath)
	}
	if p.caCert, err = x509.ParseCertificate(cb.Bytes); err != nil {
		return fmt.Errorf("parsing %s: %w", crtPath, err)
	}
	if p.caKey, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
		return fmt.Errorf("parsing %s: %w", keyPath, err)
	}
	p.caPEM = crtPEM
	return nil
}

func (p *pki) createCA(crtPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kapi-quickstart-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writePEM(crtPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", kb, 0o600); err != nil {
		return err
	}
	return p.loadCA(crtPath, keyPath)
}

// issue signs a certificate for the given names with the CA.
func (p *pki) issue(cn string, orgs []string, hosts []string, usage x509.ExtKeyUsage) (certDER []byte, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	return certDER, key, err
}

func (p *pki) createServing(crtPath, keyPath, host string) error {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	der, key, err := p.issue("kapi-quickstart", nil, hosts, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if err := writePEM(crtPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", kb, 0o600)
}

// covers reports whether cert was issued by ca and is valid for host.
func covers(cert tls.Certificate, host string, ca *x509.Certificate) bool {
	if len(cert.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil || time.Now().After(leaf.NotAfter.Add(-24*time.Hour)) {
		return false
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return leaf.VerifyHostname(host) == nil
}

func (p *pki) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
