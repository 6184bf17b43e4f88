package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kapi-dev/kapi/storage/etcd/etcdtest"
)

// TestQuickstartOnEtcd runs two quickstart servers over one etcd, as
// docs/scaling.md describes (the second gets the first's CA and admin token,
// so clients work with either, e.g. behind a load balancer), and drives them
// with client-go: a watch on one sees a write through the other, and a list
// on one right after a write on the other includes it.
func TestQuickstartOnEtcd(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, etcdtest.Options{})
	endpoints := strings.Join(etcd.Endpoints(), ",")
	a := startEtcdServer(t, t.TempDir(), endpoints)
	dirB := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dirB, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "admin.token"} {
		b, err := os.ReadFile(filepath.Join(a.DataDir, "pki", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirB, "pki", f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := startEtcdServer(t, dirB, endpoints)
	ctx := t.Context()

	onA, onB := a.Dynamic(t).Resource(widgetsGVR).Namespace("default"), b.Dynamic(t).Resource(widgetsGVR).Namespace("default")
	list, err := onB.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := onB.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := onA.Create(ctx, widget(t, "default", "shared", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("watch on b: %v %v", ev.Type, ev.Object)
		}
		if rv := ev.Object.(metav1.Object).GetResourceVersion(); rv != created.GetResourceVersion() {
			t.Fatalf("watch on b: resourceVersion %s, created at %s on a", rv, created.GetResourceVersion())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch on b: no event for the create on a")
	}
	got, err := onB.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || got.GetUID() != created.GetUID() {
		t.Fatalf("get on b: %v, %v", got, err)
	}
	// The namespace controller runs on one of them (the elected leader)
	// and finishes a deletion started on either.
	nsA := a.Dynamic(t).Resource(namespacesGVR)
	if _, err := nsA.Create(ctx, obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gone"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dynamic(t).Resource(widgetsGVR).Namespace("gone").Create(ctx, widget(t, "gone", "w", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Dynamic(t).Resource(namespacesGVR).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := nsA.Get(ctx, "gone", metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("namespace not removed within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startEtcdServer starts a quickstart server on etcd with its data (PKI,
// kubeconfig) in dataDir, and stops it when the test ends.
func startEtcdServer(t *testing.T, dataDir, endpoints string) *server {
	t.Helper()
	var lastErr error
	for range 3 {
		addr := freeAddr(t)
		s := &server{
			Addr:        addr,
			DataDir:     dataDir,
			Kubeconfig:  filepath.Join(dataDir, "kubeconfig"),
			LogPath:     filepath.Join(t.TempDir(), "server.log"),
			kubectlHome: t.TempDir(),
			exited:      make(chan struct{}),
		}
		logFile, err := os.Create(s.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(quickstartBin, "--data-dir", dataDir, "--listen", addr,
			"--etcd-endpoints", endpoints, "--etcd-prefix", "/e2e/")
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
			lastErr = fmt.Errorf("%v\nserver log:\n%s", err, tail(s.Log(), 60))
			if strings.Contains(s.Log(), "address already in use") {
				continue
			}
			break
		}
		return s
	}
	t.Fatalf("starting the quickstart server on etcd: %v", lastErr)
	return nil
}
