package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// opsPolicy grants group ops get and list on configmaps, and discovery
// (which kubectl needs to resolve "configmaps"), nothing else.
const opsPolicy = `roles:
- name: configmap-reader
  rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list]
  - nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*", "/openapi/*"]
    verbs: [get]
bindings:
- name: ops-read-configmaps
  role: configmap-reader
  groups: [ops]
`

// clientCertKubeconfig issues a client certificate (CN=user, O=groups)
// from the server's CA in <data-dir>/pki and writes a kubeconfig that
// authenticates with it alone (no token). It returns the kubeconfig path.
func clientCertKubeconfig(t *testing.T, s *server, user string, groups ...string) string {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	if cb == nil || kb == nil {
		t.Fatal("ca.crt or ca.key is not PEM")
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	b64 := base64.StdEncoding.EncodeToString
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kapi
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: kapi
  context:
    cluster: kapi
    user: %s
    namespace: default
current-context: kapi
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
`, s.URL, b64(caPEM), user, user, b64(certPEM), b64(keyPEM))
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlClientCertificateRBAC: kubectl authenticated by an mTLS client
// certificate (CN=alice, O=ops) is held to an --authorization-policy
// granting ops get and list on configmaps only; kubectl auth can-i agrees.
func TestKubectlClientCertificateRBAC(t *testing.T) {
	needKubectl(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(opsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, serverOptions{args: []string{"--authorization-policy", policy}})
	// The admin (system:masters) creates an object for alice to read.
	s.MustKubectl(t, "create", "configmap", "existing", "--from-literal=k=v")

	alice := clientCertKubeconfig(t, s, "alice", "ops")
	// The later --kubeconfig wins over the server's own. (kubectl create
	// configmap reports a 403 as "failed to create configmap: configmaps is
	// forbidden: ...", not as "Error from server (Forbidden)".)
	as := func(args ...string) kubectlResult {
		return s.Kubectl(t, append([]string{"--kubeconfig", alice}, args...)...)
	}

	r := as("get", "configmaps")
	if r.Err != nil || !strings.Contains(r.Stdout, "existing") {
		t.Fatalf("alice: kubectl get configmaps: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	r = as("get", "configmap", "existing", "-o", "jsonpath={.data.k}")
	if r.Err != nil || r.Stdout != "v" {
		t.Fatalf("alice: kubectl get configmap existing: %v %q %s", r.Err, r.Stdout, r.Stderr)
	}
	r = as("create", "configmap", "x")
	if r.Err == nil || !strings.Contains(r.Stderr, `configmaps is forbidden: User "alice" cannot create resource "configmaps"`) {
		t.Fatalf("alice: kubectl create configmap x: want Forbidden, got %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	if code, _ := s.Do(t, "GET", "/api/v1/namespaces/default/configmaps/x", nil); code != http.StatusNotFound {
		t.Fatalf("configmap x after a forbidden create: GET = %d, want 404", code)
	}

	// kubectl auth can-i: "yes" and exit 0, or "no" and exit 1.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "configmaps"}, "yes"},
		{[]string{"list", "configmaps"}, "yes"},
		{[]string{"create", "configmaps"}, "no"},
		{[]string{"delete", "configmaps"}, "no"},
		{[]string{"get", "namespaces"}, "no"},
	} {
		r := as(append([]string{"auth", "can-i"}, c.args...)...)
		got := strings.TrimSpace(r.Stdout)
		wantCode := 0
		if c.want == "no" {
			wantCode = 1
		}
		if got != c.want || exitCode(r.Err) != wantCode {
			t.Errorf("alice: kubectl auth can-i %s = %q (exit %d), want %q (exit %d)\nstderr:\n%s",
				strings.Join(c.args, " "), got, exitCode(r.Err), c.want, wantCode, r.Stderr)
		}
	}
	// The admin, in system:masters, may.
	if out := strings.TrimSpace(s.MustKubectl(t, "auth", "can-i", "create", "configmaps")); out != "yes" {
		t.Errorf("admin: kubectl auth can-i create configmaps = %q, want yes", out)
	}
}

// TestAuditLog: --audit-log writes one JSON line per request, complete once
// the server has stopped.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	s := startServerWith(t, serverOptions{args: []string{"--audit-log", path}})
	if code, body := s.Do(t, "GET", "/api/v1/namespaces/default/configmaps", nil); code != http.StatusOK {
		t.Fatalf("list configmaps: %d %s", code, body)
	}
	if err := s.Stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("server exit after SIGTERM: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			User, Verb, Resource, Namespace string
			Code                            int
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if rec.User == "admin" && rec.Verb == "list" && rec.Resource == "configmaps" && rec.Namespace == "default" && rec.Code == 200 {
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		b, _ := os.ReadFile(path)
		t.Fatalf("no audit record of admin listing configmaps in:\n%s", b)
	}
}

// TestGracefulShutdown: on SIGTERM an open watch ends cleanly (end of
// stream, not a reset) at once, while a create in flight (its body still
// being sent) is let finish; then the server exits 0.
func TestGracefulShutdown(t *testing.T) {
	s := startServerWith(t, serverOptions{args: []string{"--shutdown-timeout", "60s"}})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// A watch, open.
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/namespaces/default/configmaps?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	watchEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		watchEnded <- err
	}()

	// A create in flight: its body arrives in two parts.
	pr, pw := io.Pipe()
	defer pw.Close()
	creq, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/api/v1/namespaces/default/configmaps", pr)
	if err != nil {
		t.Fatal(err)
	}
	creq.Header.Set("Content-Type", "application/json")
	type result struct {
		code int
		body string
		err  error
	}
	created := make(chan result, 1)
	go func() {
		resp, err := s.client.Do(creq)
		if err != nil {
			created <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		created <- result{code: resp.StatusCode, body: string(b)}
	}()
	if _, err := pw.Write([]byte(`{"metadata":`)); err != nil {
		t.Fatal(err)
	}
	// Wait until the server counts it in flight.
	awaitCond(t, 20*time.Second, "the create in flight", func() bool {
		_, body := s.Do(t, "GET", "/metrics", nil)
		return strings.Contains(string(body), `apiserver_current_inflight_requests{request_kind="mutating"} 1`)
	})

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watchEnded:
		if err != nil {
			t.Fatalf("watch stream ended with %v, want a clean end", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end on SIGTERM")
	}
	awaitCond(t, 20*time.Second, "the shutdown to start", func() bool { return strings.Contains(s.Log(), "shutting down") })
	select {
	case <-s.exited:
		t.Fatalf("the server exited with a request in flight: %v\n%s", s.waitErr, tail(s.Log(), 30))
	case <-time.After(300 * time.Millisecond):
	}
	// The rest of the body: the create completes.
	if _, err := pw.Write([]byte(`{"name":"in-flight"}}`)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	select {
	case r := <-created:
		if r.err != nil || r.code != http.StatusCreated {
			t.Fatalf("in-flight create during shutdown: %d %v %s", r.code, r.err, r.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight create did not finish")
	}
	select {
	case <-s.exited:
		if s.waitErr != nil {
			t.Fatalf("server exit after SIGTERM: %v\n%s", s.waitErr, tail(s.Log(), 30))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit after its last request")
	}
}

// awaitCond polls cond every 50ms until it holds, failing the test after
// timeout.
func awaitCond(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
