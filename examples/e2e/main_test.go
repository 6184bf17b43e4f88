// Package e2e starts the quickstart server (examples/quickstart) as a separate
// process and drives it with real Kubernetes clients: client-go (discovery,
// RESTMapper, dynamic client), a kubectl built from the Go module proxy, and
// the helm CLI (helm_test.go), likewise built from the Go module proxy.
//
// The tests of validation rules (rules_test.go) run examples/dynamic instead,
// which defines types at run time from schemas, as CRDs do.
//
// TestMain builds both servers and kubectl once; when the tests run with
// -race, the servers are built with it too. helm is built the first time a test needs
// it. The first build of kubectl or helm takes a few minutes (later ones come
// from the Go build cache); set KAPI_KUBECTL or KAPI_HELM to use a kubectl or
// helm of your own instead, or pass -short to skip the tests that need them.
//
// Every test starts its own server (in memory, on a free loopback port, with
// the quickstart's defaults: HTTPS and the admin token of the kubeconfig it
// writes) and stops it when it ends.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	binDir        string // where TestMain's builds go; removed when the tests end
	quickstartBin string // path of the built quickstart server
	dynamicBin    string // path of the built examples/dynamic server
	kubectlBin    string // path of kubectl, built or from $KAPI_KUBECTL
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kapi-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir

	// The servers are built with the race detector when the tests are, so that
	// a data race inside them under real client traffic fails the test that
	// caused it. One go build links both, in parallel, into dir; the
	// quickstart with its etcd backend (-tags etcd), which the etcd tests use.
	args := []string{"build", "-tags", "etcd", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/kapi-dev/kapi/examples/quickstart", "github.com/kapi-dev/kapi/examples/dynamic")
	if err := goBuild(args...); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the servers:", err)
		return 1
	}
	quickstartBin, dynamicBin = filepath.Join(dir, "quickstart"), filepath.Join(dir, "dynamic")

	switch {
	case os.Getenv("KAPI_KUBECTL") != "":
		kubectlBin = os.Getenv("KAPI_KUBECTL")
	case testing.Short():
		// kubectl tests skip under -short; see needKubectl.
	default:
		kubectlBin = filepath.Join(dir, "kubectl")
		args := []string{"build", "-o", kubectlBin}
		if v := kubectlVersion(); v != "" {
			args = append(args, "-ldflags", "-X k8s.io/component-base/version.gitVersion="+v)
		}
		if err := goBuild(append(args, "./cmd/kubectl")...); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building kubectl:", err)
			return 1
		}
	}
	return m.Run()
}

// goBuild runs the go command of this toolchain in the test's directory (the
// e2e module), so that the build resolves modules exactly as the tests do.
func goBuild(args ...string) error {
	return goCommand(nil, args...)
}

// goCommand is goBuild with env (KEY=value) added to the test's environment.
func goCommand(env []string, args ...string) error {
	start := time.Now()
	// go test puts its own toolchain's bin directory first in PATH.
	cmd := exec.Command("go", args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: go %s took %s\n", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// kubectlVersion is the Kubernetes version matching the k8s.io modules this
// module requires (client-go v0.M.P, kubectl likewise → v1.M.P), stamped into
// the kubectl binary so that it reports and sends a real version instead of
// v0.0.0-master.
func kubectlVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/client-go" && strings.HasPrefix(dep.Version, "v0.") {
			return "v1." + strings.TrimPrefix(dep.Version, "v0.")
		}
	}
	return ""
}

// server is one running quickstart (or examples/dynamic) process.
type server struct {
	Addr       string // host:port it listens on
	URL        string // the server URL of its kubeconfig: https://Addr, http://Addr with --insecure-http, http://Addr/kube for examples/dynamic
	DataDir    string
	Kubeconfig string // DataDir/kubeconfig, written by the server
	LogPath    string // the process's stdout and stderr

	cfg         *rest.Config // from Kubeconfig
	client      *http.Client // with the kubeconfig's TLS settings and credentials
	kubectlHome string       // HOME for kubectl runs
	cmd         *exec.Cmd
	exited      chan struct{}
	waitErr     error
}

// serverOptions select how startServer runs the quickstart.
type serverOptions struct {
	dataDir  string   // default: a fresh t.TempDir()
	onDisk   bool     // without --in-memory: Badger in dataDir
	insecure bool     // --insecure-http: plain HTTP, no authentication
	args     []string // more quickstart flags
	// dynamic runs examples/dynamic instead: Badger in dataDir, plain HTTP
	// without authentication, the API under /kube and its admin API (PUT
	// /types/{name}) beside it. It writes no kubeconfig, so launch writes
	// one for the API; onDisk, insecure and args do not apply.
	dynamic bool
}

// startServer starts an in-memory quickstart server with its defaults (HTTPS,
// the admin token of its kubeconfig) on a free loopback port and waits until
// it is ready. The server is stopped when the test ends.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerWith(t, serverOptions{})
}

func startServerWith(t *testing.T, opts serverOptions) *server {
	t.Helper()
	if opts.dataDir == "" {
		opts.dataDir = t.TempDir()
	}
	var lastErr error
	// A port found free may be taken by someone else before the server binds
	// it; try a few ports before giving up.
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(t, opts)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("starting the server: %v", lastErr)
	return nil
}

func launch(t *testing.T, opts serverOptions) (*server, error) {
	t.Helper()
	addr := freeAddr(t)
	s := &server{
		Addr:        addr,
		DataDir:     opts.dataDir,
		Kubeconfig:  filepath.Join(opts.dataDir, "kubeconfig"),
		LogPath:     filepath.Join(t.TempDir(), "server.log"),
		kubectlHome: t.TempDir(),
		exited:      make(chan struct{}),
	}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	bin, args := quickstartBin, []string{"--data-dir", opts.dataDir, "--listen", addr}
	switch {
	case opts.dynamic:
		bin = dynamicBin
		kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: dynamic, cluster: {server: \"http://%s/kube\"}}]\n"+
			"users: [{name: anonymous, user: {}}]\ncontexts: [{name: dynamic, context: {cluster: dynamic, user: anonymous}}]\ncurrent-context: dynamic\n", addr)
		if err := os.WriteFile(s.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
	default:
		if !opts.onDisk {
			args = append(args, "--in-memory")
		}
		if opts.insecure {
			args = append(args, "--insecure-http")
		}
		args = append(args, opts.args...)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	setProcAttr(s.cmd)
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	t.Cleanup(func() { s.cleanup(t) })

	if err := s.waitReady(60 * time.Second); err != nil {
		s.Stop(t, syscall.SIGKILL)
		return nil, fmt.Errorf("%v\nserver log:\n%s", err, tail(s.Log(), 60))
	}
	return s, nil
}

// waitReady waits until the server has written a kubeconfig for its address
// and answers GET /readyz with 200 through it.
func (s *server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("server exited before it was ready: %v", s.waitErr)
		default:
		}
		err := s.probe()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not ready after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) probe() error {
	// A restarted server finds its previous kubeconfig (for another port) in
	// place until it writes the new one: read it afresh each time.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %v", err)
	}
	if u, err := url.Parse(cfg.Host); err != nil || u.Host != s.Addr {
		return fmt.Errorf("kubeconfig names server %q, want one at %s", cfg.Host, s.Addr)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Timeout = 30 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("client from kubeconfig: %v", err)
	}
	resp, err := client.Get(cfg.Host + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	s.cfg, s.client, s.URL = cfg, client, cfg.Host
	return nil
}

// Stop sends sig to the server and waits for it to exit (killing it after 15s).
// It returns the process's exit error (nil for exit status 0).
func (s *server) Stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	select {
	case <-s.exited:
		return s.waitErr
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		t.Errorf("server did not exit within 15s of %v; killing it", sig)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return s.waitErr
}

func (s *server) cleanup(t *testing.T) {
	s.Stop(t, syscall.SIGTERM)
	log := s.Log()
	if strings.Contains(log, "WARNING: DATA RACE") {
		t.Errorf("the server reported a data race:\n%s", log)
	} else if strings.Contains(log, "panic:") {
		t.Errorf("the server panicked:\n%s", log)
	} else if t.Failed() {
		t.Logf("server log (%s):\n%s", s.Addr, tail(log, 60))
	}
}

// Log returns what the server has written to stdout and stderr so far.
func (s *server) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// RESTConfig is the client configuration of the kubeconfig the server wrote.
func (s *server) RESTConfig(t *testing.T) *rest.Config {
	t.Helper()
	return rest.CopyConfig(s.cfg)
}

// Dynamic returns a dynamic client for the server.
func (s *server) Dynamic(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	dc, err := dynamic.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// Do sends a raw HTTP request with the kubeconfig's credentials and returns
// the status code and body.
func (s *server) Do(t *testing.T, method, path string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	return s.DoURL(t, method, s.URL+path, body, header...)
}

// DoURL is Do with a whole URL, for what a server serves beside the API
// (the admin API of examples/dynamic).
func (s *server) DoURL(t *testing.T, method, rawURL string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: reading body: %v", method, rawURL, err)
	}
	return resp.StatusCode, buf.Bytes()
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// kubectlResult is the outcome of one kubectl (or helm) run.
type kubectlResult struct {
	Stdout, Stderr string
	Err            error // nil when kubectl exited 0
}

// needKubectl skips the test under -short when no kubectl was built.
func needKubectl(t *testing.T) {
	t.Helper()
	if kubectlBin == "" && testing.Short() {
		t.Skip("-short: kubectl is not built; set KAPI_KUBECTL to run the kubectl tests")
	}
}

// Kubectl runs kubectl against the server with the kubeconfig it wrote and a
// home directory (discovery cache, preferences) of its own.
func (s *server) Kubectl(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	needKubectl(t)
	full := append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", filepath.Join(s.kubectlHome, "cache")}, args...)
	return runClient(t, append(os.Environ(), "KUBECONFIG=", "HOME="+s.kubectlHome), kubectlBin, full...)
}

// runClient runs a client program (kubectl, helm) with the environment env,
// for two minutes at the most.
func runClient(t *testing.T, env []string, bin string, args ...string) kubectlResult {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return kubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// MustKubectl runs kubectl and fails the test unless it exits 0.
func (s *server) MustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	return mustSucceed(t, "kubectl", args, s.Kubectl(t, args...))
}

// mustSucceed fails the test unless r, the outcome of running the program
// name with args, is an exit 0, and returns what it printed on stdout.
func mustSucceed(t *testing.T, name string, args []string, r kubectlResult) string {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// exitCode is the exit status in err, or 0 for nil and -1 for other errors.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
