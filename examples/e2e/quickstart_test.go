package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The quickstart logs one line saying where it listens and where its
// kubeconfig is. By default it serves HTTPS, and the kubeconfig carries the CA
// and an admin token; requests without credentials are refused.
func TestQuickstartStartup(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	checkListeningLine(t, s)

	cfg, user := loadKubeconfig(t, s)
	if cfg.Server != "https://"+s.Addr {
		t.Errorf("kubeconfig server = %q, want https://%s", cfg.Server, s.Addr)
	}
	if len(cfg.CertificateAuthorityData) == 0 && cfg.CertificateAuthority == "" {
		t.Errorf("kubeconfig for an HTTPS server has no certificate authority (and does not skip verification: %v)", cfg.InsecureSkipTLSVerify)
	}
	if user == nil || (user.Token == "" && len(user.ClientCertificateData) == 0 && user.ClientCertificate == "") {
		t.Errorf("kubeconfig user has no credentials: %+v", user)
	}

	// The kubeconfig's CA, without its credentials.
	anon := s.RESTConfig(t)
	anon.BearerToken, anon.CertData, anon.KeyData, anon.CertFile, anon.KeyFile = "", nil, nil, "", ""
	anonClient, err := rest.HTTPClientFor(anon)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := anonClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz", ""); code != 200 {
		t.Errorf("GET /readyz without credentials: %d %s, want 200 (probes need no credentials)", code, body)
	}
	for _, token := range []string{"", "not-the-token"} {
		code, body := get("/api/v1/namespaces", token)
		var st metav1.Status
		_ = json.Unmarshal([]byte(body), &st)
		if code != 401 || st.Kind != "Status" || st.Reason != metav1.StatusReasonUnauthorized {
			t.Errorf("GET /api/v1/namespaces with token %q: %d %s; want 401 Status reason Unauthorized", token, code, body)
		}
	}
}

// With --insecure-http it serves plain HTTP without authentication, and the
// kubeconfig says so.
func TestQuickstartInsecureHTTP(t *testing.T) {
	t.Parallel()
	s := startServerWith(t, serverOptions{insecure: true})
	checkListeningLine(t, s)
	cfg, user := loadKubeconfig(t, s)
	if cfg.Server != "http://"+s.Addr {
		t.Errorf("kubeconfig server = %q, want http://%s", cfg.Server, s.Addr)
	}
	if user != nil && (user.Token != "" || user.Password != "" || len(user.ClientKeyData) > 0) {
		t.Errorf("kubeconfig carries credentials for a server without authentication: %+v", user)
	}
	if _, err := s.Dynamic(t).Resource(namespacesGVR).Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace default over plain HTTP: %v", err)
	}
}

func checkListeningLine(t *testing.T, s *server) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(s.Log(), "\n") {
		if strings.Contains(l, "listening") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one log line saying \"listening\", got %d in:\n%s", len(lines), s.Log())
	}
	for _, want := range []string{"addr=" + s.Addr, "kubeconfig=" + s.Kubeconfig} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("listening line %q does not contain %q", lines[0], want)
		}
	}
}

// loadKubeconfig returns the cluster and user of the current context of the
// server's kubeconfig.
func loadKubeconfig(t *testing.T, s *server) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", s.Kubeconfig, err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if cfg.CurrentContext == "" || !ok {
		t.Fatalf("kubeconfig has no usable current-context (%q)", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		t.Fatalf("kubeconfig context %q names cluster %q, which is not defined", cfg.CurrentContext, kctx.Cluster)
	}
	return cluster, cfg.AuthInfos[kctx.AuthInfo]
}

// Without --in-memory the data lives in Badger under --data-dir: it survives
// a clean stop and a crash (writes are durable), and resourceVersions keep
// increasing across restarts.
func TestQuickstartPersistsAcrossRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	opts := serverOptions{dataDir: dataDir, onDisk: true}

	s := startServerWith(t, opts)
	dc := s.Dynamic(t)
	createNamespace(t, dc, "keep")
	w1, err := dc.Resource(widgetsGVR).Namespace("keep").Create(t.Context(), widget(t, "keep", "w1", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create w1: %v", err)
	}
	if err := s.Stop(t, syscall.SIGTERM); err != nil {
		t.Logf("quickstart exit after SIGTERM: %v", err)
	}

	s = startServerWith(t, opts)
	dc = s.Dynamic(t)
	got, err := dc.Resource(widgetsGVR).Namespace("keep").Get(t.Context(), "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after a clean restart, get w1: %v", err)
	}
	if got.GetUID() != w1.GetUID() || got.GetResourceVersion() != w1.GetResourceVersion() || num(t, got, "spec", "size") != 3 {
		t.Errorf("after restart w1 has uid %s rv %s spec %v; want uid %s rv %s size 3",
			got.GetUID(), got.GetResourceVersion(), got.Object["spec"], w1.GetUID(), w1.GetResourceVersion())
	}
	w2, err := dc.Resource(widgetsGVR).Namespace("keep").Create(t.Context(), widget(t, "keep", "w2", 4), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create w2 after restart: %v", err)
	}
	if !rvAfter(w2.GetResourceVersion(), w1.GetResourceVersion()) {
		t.Errorf("resourceVersion after restart %s is not after %s", w2.GetResourceVersion(), w1.GetResourceVersion())
	}
	s.Stop(t, syscall.SIGKILL) // a crash: the acknowledged create of w2 must survive

	s = startServerWith(t, opts)
	dc = s.Dynamic(t)
	for _, name := range []string{"w1", "w2"} {
		if _, err := dc.Resource(widgetsGVR).Namespace("keep").Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("after a crash, get %s: %v", name, err)
		}
	}
	if _, err := dc.Resource(namespacesGVR).Get(t.Context(), "keep", metav1.GetOptions{}); err != nil {
		t.Errorf("after restarts, namespace keep: %v", err)
	}
	if _, err := dc.Resource(widgetsGVR).Namespace("keep").Get(t.Context(), "w3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get w3 (never created): %v, want NotFound", err)
	}
}

// rvAfter reports whether resourceVersion a is later than b. Clients treat
// them as opaque, but kapi's are storage revisions, so they compare as numbers.
func rvAfter(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// --pprof-listen serves Go's profiles on a loopback address of their own,
// and the heap profile has allocation samples: the quickstart samples
// allocations only when something can read them.
func TestQuickstartPprof(t *testing.T) {
	t.Parallel()
	pprofAddr := freeAddr(t)
	s := startServerWith(t, serverOptions{args: []string{"--pprof-listen", pprofAddr}})
	for i := range 20 {
		s.MustKubectl(t, "create", "configmap", "pprof-"+strconv.Itoa(i), "--from-literal=k="+strings.Repeat("v", 4096))
	}
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatalf("GET heap profile: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET heap profile: %d, %v", resp.StatusCode, err)
	}
	// "heap profile: <in-use objects>: <in-use bytes> [<allocated objects>: <allocated bytes>] @ heap/<rate>"
	var inUse, inUseBytes, allocs, allocBytes, rate int64
	if _, err := fmt.Sscanf(string(body), "heap profile: %d: %d [%d: %d] @ heap/%d", &inUse, &inUseBytes, &allocs, &allocBytes, &rate); err != nil {
		t.Fatalf("heap profile header: %v in %.200q", err, body)
	}
	if allocs == 0 || rate == 0 {
		t.Errorf("heap profile has no allocation samples (rate %d): %.200q", rate, body)
	}
}
