package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir and returns their file names.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kapi test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kapi-" + name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", keyDER)
	}
	p := testPKI{ca: write("ca.crt", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// TestTLSAndAuth runs a store over TLS with a client certificate against an
// etcd with authentication enabled, as a user allowed only its prefix.
func TestTLSAndAuth(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	srv := etcdtest.Start(t, etcdtest.Options{TLS: &etcdtest.TLSFiles{CertFile: pki.serverCert, KeyFile: pki.serverKey, CAFile: pki.ca}})
	tlsCfg, err := LoadTLS(pki.ca, pki.clientCert, pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// Set up users as an administrator would: root, and "kapi" with read
	// and write on /secure/ only.
	admin := openStore(t, Options{Endpoints: srv.Endpoints(), TLS: tlsCfg, CompactionInterval: -1, Logger: testLogger(t)})
	cli := admin.Client()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "kapi"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "kapi", "/secure/", clientv3.GetPrefixRangeEnd("/secure/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "kapi", "kapi-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "kapi", "kapi"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up etcd auth: %v", err)
		}
	}

	opts := Options{Endpoints: srv.Endpoints(), TLS: tlsCfg, Prefix: "/secure/", Username: "kapi", Password: "kapi-secret",
		CompactionInterval: -1, Logger: testLogger(t)}
	st := openStore(t, opts)
	ch, err := st.Watch(ctx, storage.WatchOptions{Prefix: []byte("a/")})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.Create(ctx, []byte("a/x"), []byte("v"))
	if err != nil {
		t.Fatalf("Create as kapi: %v", err)
	}
	if kv, err := st.Get(ctx, []byte("a/x"), 0); err != nil || string(kv.Value) != "v" || kv.Revision != rev {
		t.Fatalf("Get = %+v, %v", kv, err)
	}
	select {
	case ev := <-ch:
		if ev.Type != storage.EventPut || ev.Revision != rev {
			t.Fatalf("watch event %+v, want the put at %d", ev, rev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event over TLS with auth")
	}

	// Wrong password, no client certificate, another prefix: refused.
	bad := opts
	bad.Password = "wrong"
	if s, err := Open(ctx, bad); err == nil {
		s.Close()
		t.Fatal("Open with a wrong password succeeded")
	}
	noCert, err := LoadTLS(pki.ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	bad = opts
	bad.TLS, bad.DialTimeout = noCert, 2*time.Second
	if s, err := Open(ctx, bad); err == nil {
		s.Close()
		t.Fatal("Open without a client certificate succeeded")
	}
	other := opts
	other.Prefix = "/other/"
	if s, err := Open(ctx, other); err == nil {
		s.Close()
		t.Fatal("Open outside the user's permissions succeeded")
	}
	if _, err := LoadTLS("", pki.clientCert, ""); err == nil {
		t.Fatal("LoadTLS with a certificate and no key succeeded")
	}
	if _, err := LoadTLS(filepath.Join(t.TempDir(), "missing"), "", ""); err == nil || errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("LoadTLS with a missing CA: %v", err)
	}
}
