// Package etcdtest starts real etcd servers for tests.
//
// The etcd server is not a dependency of kapi: Binary builds it from the Go
// module proxy (go.etcd.io/etcd/server/v3 is itself the etcd main package) in
// a throwaway module outside this one, so that nothing of the server reaches
// the go.mod of kapi or of its users. The binary is cached:
//
//   - $KAPI_ETCD, when set, names the etcd binary to use; it is built there
//     when the file does not exist yet;
//   - otherwise it lives in os.UserCacheDir()/kapi-etcd/<version>/etcd.
//
// The first build downloads the server's modules and compiles them (a few
// minutes on a small machine, see docs/scaling.md); later runs find the file.
// Concurrent test processes build it once: the build holds a file lock.
//
// etcd's own tools, etcdctl and etcdutl (Tool), are built the same way from
// their modules (go.etcd.io/etcd/etcdctl/v3, go.etcd.io/etcd/etcdutl/v3)
// and cached beside the server; Server.Snapshot and Options.Restore use
// them, as an operator backing up and restoring etcd would.
//
// Start runs a single-member cluster on free loopback ports in a temporary
// directory and stops it when the test ends.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultVersion is the etcd server version Binary builds: the one
// Kubernetes 1.36 pins, and the version of the etcd client kapi uses.
const DefaultVersion = "v3.6.8"

// BuildTimeout bounds one build of the etcd binary (downloads included).
const BuildTimeout = 15 * time.Minute

// Options configure a test server.
type Options struct {
	// Version of etcd to build (see Binary). Default DefaultVersion.
	Version string
	// Fsync keeps etcd's fsyncs. Default false: the server runs with
	// --unsafe-no-fsync, which loses nothing when only the process dies
	// (the tests' kills and restarts) and makes writes much cheaper.
	Fsync bool
	// TLS, when set, serves clients over TLS and requires client
	// certificates signed by TLS.CAFile.
	TLS *TLSFiles
	// Args are extra command-line flags for etcd.
	Args []string
	// Restore, when set, is a snapshot file (Server.Snapshot, etcdctl
	// snapshot save) that the data directory is restored from with
	// etcdutl snapshot restore before etcd first starts, with RestoreArgs
	// added to its flags (e.g. --bump-revision N --mark-compacted).
	Restore     string
	RestoreArgs []string
}

// TLSFiles name PEM files for a server that speaks TLS to its clients.
type TLSFiles struct {
	CertFile, KeyFile string // the server's certificate and key
	CAFile            string // CA that signs accepted client certificates
}

// Server is one running single-member etcd cluster.
type Server struct {
	t       testing.TB
	bin     string
	opts    Options
	dataDir string
	logPath string
	client  string // client URL
	peer    string // peer URL

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts an etcd server for the test and stops it when the test ends.
// It fails the test when etcd cannot be built, restored or started. Under go test
// -short, when the binary is not there yet, it skips the test rather
// than build etcd.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if testing.Short() && !Available(opts.Version) {
		t.Skip("no etcd binary built yet (see etcdtest.Binary); not building one under -short")
	}
	if testing.Short() && opts.Restore != "" && !ToolAvailable("etcdutl", opts.Version) {
		t.Skip("no etcdutl built yet (see etcdtest.Tool); not building one under -short")
	}
	bin, err := Binary(context.Background(), opts.Version)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{t: t, bin: bin, opts: opts, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "etcd.log")}
	t.Cleanup(s.Kill)
	var lastErr error
	// A port found free may be taken before etcd binds it: try again.
	for range 3 {
		scheme := "http"
		if opts.TLS != nil {
			scheme = "https"
		}
		s.client = scheme + "://" + freeAddr(t)
		s.peer = "http://" + freeAddr(t)
		if opts.Restore != "" {
			if lastErr = s.restore(context.Background()); lastErr != nil {
				continue
			}
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	t.Fatalf("etcdtest: %v", lastErr)
	return nil
}

// Endpoints are the client URLs of the server.
func (s *Server) Endpoints() []string { return []string{s.client} }

// DataDir is the server's data directory.
func (s *Server) DataDir() string { return s.dataDir }

// LogPath is the file with the server's output.
func (s *Server) LogPath() string { return s.logPath }

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := []string{
		"--name", "kapi-test",
		"--data-dir", s.dataDir,
		"--listen-client-urls", s.client,
		"--advertise-client-urls", s.client,
		"--listen-peer-urls", s.peer,
		"--initial-advertise-peer-urls", s.peer,
		"--initial-cluster", "kapi-test=" + s.peer,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	if !s.opts.Fsync {
		args = append(args, "--unsafe-no-fsync")
	}
	if tf := s.opts.TLS; tf != nil {
		args = append(args, "--cert-file", tf.CertFile, "--key-file", tf.KeyFile,
			"--trusted-ca-file", tf.CAFile, "--client-cert-auth")
	}
	args = append(args, s.opts.Args...)
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "=== %s etcd %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	if err := s.waitHealthy(done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w; etcd output:\n%s", err, s.tail())
	}
	return nil
}

// waitHealthy polls the server's /health until it answers, the process
// exits or 60 s pass.
func (s *Server) waitHealthy(exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if s.opts.TLS != nil {
		// Health is checked through the TLS port by the clients of the test;
		// here it is enough that the process stays up and the port is open.
		client = nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			return errors.New("etcd exited while starting")
		default:
		}
		if s.healthy(client) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("etcd not healthy within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) healthy(client *http.Client) bool {
	if client == nil {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.client, "https://"), time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	resp, err := client.Get(s.client + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(b.String(), `"health":"true"`)
}

func (s *Server) tail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Kill stops the server at once (SIGKILL), as a crash would, and waits for
// the process to end. It does nothing when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts it again on the same ports with the
// same data. It fails the test when etcd does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.Start(); err != nil {
		s.t.Fatalf("etcdtest: restarting: %v", err)
	}
}

// Start starts a killed server again on the same ports with the same data.
func (s *Server) Start() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("already running")
	}
	return s.start()
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
