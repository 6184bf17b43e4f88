package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// kubectlCreateWidget creates widget ns/name with kubectl create -f and
// returns its uid.
func kubectlCreateWidget(t *testing.T, s *server, ns, name, extraMeta string) string {
	t.Helper()
	y := fmt.Sprintf(`apiVersion: example.dev/v1
kind: Widget
metadata:
  name: %s
  namespace: %s
%sspec:
  size: 1
  replicas: 1
`, name, ns, extraMeta)
	uid := s.MustKubectl(t, "create", "-f", writeFile(t, name+".yaml", y), "-o", "jsonpath={.metadata.uid}")
	if uid == "" {
		t.Fatalf("kubectl create widget %s printed no uid", name)
	}
	return uid
}

// kubectlApplyDependents applies configmaps ns/<names> owned by widget
// owner (with that uid).
func kubectlApplyDependents(t *testing.T, s *server, ns, owner, uid string, block bool, names ...string) {
	t.Helper()
	var docs []string
	for _, n := range names {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: %s
  ownerReferences:
  - apiVersion: example.dev/v1
    kind: Widget
    name: %s
    uid: %s
    blockOwnerDeletion: %v
data:
  k: v
`, n, ns, owner, uid, block))
	}
	s.MustKubectl(t, "apply", "-f", writeFile(t, owner+"-deps.yaml", strings.Join(docs, "---\n")))
}

// pollUntil polls cond every 50ms until it holds or timeout passes.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKubectlDeleteCascade(t *testing.T) {
	needKubectl(t)
	s := startServer(t)
	dc := s.Dynamic(t)
	cms := dc.Resource(configmapsGVR).Namespace("default")
	missing := func(name string) bool {
		_, err := cms.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get configmap %s: %v", name, err)
		}
		return apierrors.IsNotFound(err)
	}
	widgetGone := func(name string) {
		t.Helper()
		_, err := dc.Resource(widgetsGVR).Namespace("default").Get(t.Context(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("widget %s after kubectl delete returned: err %v, want NotFound", name, err)
		}
	}

	t.Run("foreground", func(t *testing.T) {
		uid := kubectlCreateWidget(t, s, "default", "fg", "")
		kubectlApplyDependents(t, s, "default", "fg", uid, true, "fg-a", "fg-b")
		s.MustKubectl(t, "delete", "widget/fg", "--cascade=foreground", "--timeout=60s")
		// kubectl waited for the owner, which goes only after its blocking
		// dependents: they are gone already.
		widgetGone("fg")
		for _, n := range []string{"fg-a", "fg-b"} {
			if !missing(n) {
				t.Errorf("dependent %s still exists after a foreground delete of its owner returned", n)
			}
		}
	})

	t.Run("background", func(t *testing.T) {
		uid := kubectlCreateWidget(t, s, "default", "bg", "")
		kubectlApplyDependents(t, s, "default", "bg", uid, false, "bg-a", "bg-b")
		s.MustKubectl(t, "delete", "widget/bg", "--cascade=background", "--timeout=60s")
		widgetGone("bg")
		pollUntil(t, 30*time.Second, "the background dependents to be collected", func() bool {
			return missing("bg-a") && missing("bg-b")
		})
	})

	t.Run("orphan", func(t *testing.T) {
		uid := kubectlCreateWidget(t, s, "default", "or", "")
		kubectlApplyDependents(t, s, "default", "or", uid, true, "or-a", "or-b")
		s.MustKubectl(t, "delete", "widget/or", "--cascade=orphan", "--timeout=60s")
		widgetGone("or")
		// The owner goes only once its uid is out of every dependent.
		for _, n := range []string{"or-a", "or-b"} {
			cm, err := cms.Get(t.Context(), n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("orphaned dependent %s: %v", n, err)
			}
			if refs := cm.GetOwnerReferences(); len(refs) != 0 {
				t.Errorf("orphaned dependent %s still has ownerReferences %v", n, refs)
			}
		}
		// And nothing collects them later.
		time.Sleep(2 * time.Second) // > the collector's retry interval; absence of action cannot be polled
		for _, n := range []string{"or-a", "or-b"} {
			if missing(n) {
				t.Errorf("orphaned dependent %s was collected", n)
			}
		}
	})
}

func TestKubectlDeleteWaitsForFinalizers(t *testing.T) {
	needKubectl(t)
	s := startServer(t)
	dc := s.Dynamic(t)
	widgets := dc.Resource(widgetsGVR).Namespace("default")
	kubectlCreateWidget(t, s, "default", "held", "  finalizers:\n  - example.dev/hold\n")

	// A goroutine plays the controller owning the finalizer: once the widget
	// is marked for deletion it waits a moment, then removes the finalizer.
	releasing := make(chan struct{}) // closed just before the finalizer's removal is sent
	removed := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		if err := releaseWhenDeleting(t, widgets, "held", releasing); err != nil {
			failed <- err
			return
		}
		close(removed)
	}()

	start := time.Now()
	r := s.Kubectl(t, "delete", "widget/held", "--wait=true", "--timeout=60s")
	if r.Err != nil {
		t.Fatalf("kubectl delete --wait: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	// kubectl may see the deletion before the goroutine sees its patch's
	// answer, but never before the patch was sent.
	select {
	case <-releasing:
	case err := <-failed:
		t.Fatalf("finalizer goroutine: %v", err)
	default:
		t.Fatalf("kubectl delete --wait returned after %s, before the finalizer was removed", time.Since(start))
	}
	select {
	case <-removed:
	case err := <-failed:
		t.Fatalf("finalizer goroutine: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the finalizer's removal did not complete")
	}
	if _, err := widgets.Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("widget after kubectl delete --wait: %v, want NotFound", err)
	}
	if !strings.Contains(r.Stdout, `widget.example.dev "held" deleted`) {
		t.Errorf("kubectl output %q", r.Stdout)
	}
}

// releaseWhenDeleting waits (up to 60s) for widget name to get a
// deletionTimestamp, waits a moment more, then closes releasing and removes
// its finalizers.
func releaseWhenDeleting(t *testing.T, widgets dynamic.ResourceInterface, name string, releasing chan<- struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		w, err := widgets.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if w.GetDeletionTimestamp() != nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the widget was never marked for deletion")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The "moment": kubectl is waiting by now, and must go on waiting.
	time.Sleep(time.Second)
	close(releasing)
	_, err := widgets.Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

func TestKubectlScaleWidget(t *testing.T) {
	needKubectl(t)
	s := startServer(t)
	kubectlCreateWidget(t, s, "default", "sc", "")
	out := s.MustKubectl(t, "scale", "widget/sc", "--replicas=3")
	if !strings.Contains(out, "widget.example.dev/sc scaled") {
		t.Errorf("kubectl scale output %q", out)
	}
	if got := s.MustKubectl(t, "get", "widget/sc", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Fatalf("spec.replicas after scale = %q, want 3", got)
	}
	w, err := s.Dynamic(t).Resource(widgetsGVR).Namespace("default").Get(t.Context(), "sc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := num(t, w, "spec", "replicas"); n != 3 {
		t.Fatalf("spec.replicas = %d, want 3", n)
	}
	// A precondition on the current count that does not hold fails.
	if r := s.Kubectl(t, "scale", "widget/sc", "--current-replicas=1", "--replicas=5"); r.Err == nil {
		t.Fatalf("kubectl scale --current-replicas=1 succeeded at 3 replicas: %s", r.Stdout)
	}
	if got := s.MustKubectl(t, "get", "widget/sc", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Fatalf("spec.replicas after a failed scale = %q, want 3", got)
	}
	s.MustKubectl(t, "scale", "widget/sc", "--current-replicas=3", "--replicas=0")
	if got := s.MustKubectl(t, "get", "widget/sc", "-o", "jsonpath={.spec.replicas}"); got != "0" {
		t.Fatalf("spec.replicas after scale to 0 = %q, want 0", got)
	}
}

func TestKubectlDeleteNamespace(t *testing.T) {
	needKubectl(t)
	s := startServer(t)
	s.MustKubectl(t, "create", "-f", writeFile(t, "manifest.yaml", manifest))
	uid := kubectlCreateWidget(t, s, "kc", "owner", "")
	kubectlApplyDependents(t, s, "kc", "owner", uid, true, "dep")

	out := s.MustKubectl(t, "delete", "ns", "kc", "--timeout=60s")
	if !strings.Contains(out, `namespace "kc" deleted`) {
		t.Errorf("kubectl delete ns output %q", out)
	}
	// kubectl waited: the namespace is gone, and so is everything in it.
	dc := s.Dynamic(t)
	if _, err := dc.Resource(namespacesGVR).Get(t.Context(), "kc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after kubectl delete ns returned: %v, want NotFound", err)
	}
	for _, gvr := range []struct {
		name string
		ri   dynamic.ResourceInterface
	}{{"configmaps", dc.Resource(configmapsGVR).Namespace("kc")}, {"widgets", dc.Resource(widgetsGVR).Namespace("kc")}} {
		l, err := gvr.ri.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.name, err)
		}
		if len(l.Items) != 0 {
			t.Errorf("%d %s left in the deleted namespace: %v", len(l.Items), gvr.name, names(l))
		}
	}
	if r := s.Kubectl(t, "get", "ns", "kc"); r.Err == nil || !strings.Contains(r.Stderr, "NotFound") {
		t.Errorf("kubectl get ns kc after deletion: err %v, stderr %q", r.Err, r.Stderr)
	}
}
