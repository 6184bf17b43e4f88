package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// env is the program under test: the embedded server and a running manager.
type env struct {
	t       *testing.T
	dataDir string
	logger  *slog.Logger
	scheme  *runtime.Scheme
	srv     *server
	c       client.Client // direct (uncached) client, as a user's
	stopMgr func()
}

func TestMain(m *testing.M) {
	// controller-runtime's logger is global and set once per process: its
	// warnings and errors go to stderr.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

func newEnv(t *testing.T) *env {
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), nil))
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dataDir: t.TempDir(), logger: logger, scheme: scheme}
	e.startServer()
	e.startManager()
	t.Cleanup(func() {
		e.stopManager()
		e.stopServer()
	})
	return e
}

func (e *env) startServer() {
	srv, err := startServer(context.Background(), e.logger, e.dataDir, "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	if e.c, err = client.New(srv.RESTConfig, client.Options{Scheme: e.scheme}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) stopServer() {
	if e.srv != nil {
		if err := e.srv.Close(); err != nil {
			e.t.Errorf("closing the server: %v", err)
		}
		e.srv = nil
	}
}

func (e *env) startManager() {
	mgr, err := newManager(e.srv.RESTConfig, e.scheme, filepath.Join(e.dataDir, "published"))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.stopMgr = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Error("the manager did not stop within 30s")
		}
	}
}

func (e *env) stopManager() {
	if e.stopMgr != nil {
		e.stopMgr()
		e.stopMgr = nil
	}
}

// eventually polls check every 50ms until it returns nil, for up to 30s.
func (e *env) eventually(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) widget(name string) *Widget {
	e.t.Helper()
	var w Widget
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &w); err != nil {
		e.t.Fatalf("get widget %s: %v", name, err)
	}
	return &w
}

// waitReconciled waits until the controller's status describes the
// widget's current generation in the given phase, and returns the widget.
func (e *env) waitReconciled(name, phase string) *Widget {
	e.t.Helper()
	var w Widget
	e.eventually("widget "+name+" reconciled to "+phase, func() error {
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &w); err != nil {
			return err
		}
		if w.Status.ObservedGeneration != w.Generation || w.Status.Phase != phase {
			return fmt.Errorf("generation %d, status %+v", w.Generation, w.Status)
		}
		return nil
	})
	return &w
}

func (e *env) configMap(name string) *corev1.ConfigMap {
	e.t.Helper()
	var cm corev1.ConfigMap
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &cm); err != nil {
		e.t.Fatalf("get configmap %s: %v", name, err)
	}
	return &cm
}

func (e *env) published(name string) (publishedRecord, bool) {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dataDir, "published", "default_"+name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return publishedRecord{}, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var rec publishedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatalf("published record of %s: %v", name, err)
	}
	return rec, true
}

// checkReady asserts the status, ConfigMap and published record of a Ready
// widget with the given spec.
func (e *env) checkReady(w *Widget, size int64, color, message string) {
	e.t.Helper()
	if w.Spec.Color != color {
		e.t.Fatalf("spec.color %q, want %q (defaulted by the server's schema)", w.Spec.Color, color)
	}
	if !contains(w.Finalizers, finalizer) {
		e.t.Fatalf("finalizers %v, want %s", w.Finalizers, finalizer)
	}
	for _, typ := range []string{conditionReady, conditionConfigMap} {
		c := apimeta.FindStatusCondition(w.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != w.Generation || c.LastTransitionTime.IsZero() {
			e.t.Fatalf("condition %s: %+v (all: %+v)", typ, c, w.Status.Conditions)
		}
	}
	if c := apimeta.FindStatusCondition(w.Status.Conditions, conditionReady); c.Message != fmt.Sprintf("a %s widget of size %d", color, size) {
		e.t.Fatalf("Ready message %q", c.Message)
	}
	cmName := "widget-" + w.Name
	if w.Status.ConfigMap != cmName {
		e.t.Fatalf("status.configMap %q", w.Status.ConfigMap)
	}

	cm := e.configMap(cmName)
	want := map[string]string{"color": color, "size": fmt.Sprint(size), "message": message, "widget.txt": render(w)}
	if fmt.Sprint(cm.Data) != fmt.Sprint(want) {
		e.t.Fatalf("configmap data %v, want %v", cm.Data, want)
	}
	if cm.Labels[widgetLabel] != w.Name {
		e.t.Fatalf("configmap labels %v", cm.Labels)
	}
	owner := metav1.GetControllerOf(cm)
	if owner == nil || owner.UID != w.UID || owner.Kind != "Widget" || owner.APIVersion != "example.dev/v1" || owner.BlockOwnerDeletion == nil || !*owner.BlockOwnerDeletion {
		e.t.Fatalf("configmap controller reference %+v, want the widget %s", owner, w.UID)
	}
	applied := false
	for _, mf := range cm.ManagedFields {
		if mf.Manager == fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			applied = true
			fields := mf.FieldsV1.GetRawString()
			for _, f := range []string{`"f:data"`, `"f:widget.txt"`, `"f:ownerReferences"`, `"f:labels"`} {
				if !strings.Contains(fields, f) {
					e.t.Fatalf("the controller's managed fields lack %s: %s", f, fields)
				}
			}
		}
	}
	if !applied {
		e.t.Fatalf("no Apply entry of %s in managedFields: %+v", fieldManager, cm.ManagedFields)
	}

	rec, ok := e.published(w.Name)
	if !ok || rec.UID != string(w.UID) || rec.Generation != w.Generation || rec.Spec != w.Spec {
		e.t.Fatalf("published record %+v (exists %v), want generation %d of %s", rec, ok, w.Generation, w.UID)
	}
}

func TestWidgetController(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Create: the controller adds its finalizer, applies the ConfigMap,
	// publishes the record and reports Ready. color is defaulted by kapi.
	w1 := &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "default"}, Spec: WidgetSpec{Size: 3, Message: "hello"}}
	if err := e.c.Create(ctx, w1); err != nil {
		t.Fatal(err)
	}
	got := e.waitReconciled("w1", "Ready")
	e.checkReady(got, 3, "blue", "hello")
	if got := e.configMap("widget-w1").Data["widget.txt"]; got != "BBB hello\n" {
		t.Fatalf("widget.txt %q", got)
	}

	// The schema is enforced by the server, before the controller sees it.
	bad := &Widget{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: WidgetSpec{Size: 0, Color: "purple"}}
	if err := e.c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid widget: %v, want 422 Invalid", err)
	}

	// Update the spec: generation 2, and status and ConfigMap follow.
	got.Spec.Size, got.Spec.Color = 5, "green"
	if err := e.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = e.waitReconciled("w1", "Ready")
	if got.Generation != 2 {
		t.Fatalf("generation %d after one spec update", got.Generation)
	}
	e.checkReady(got, 5, "green", "hello")

	// Someone edits the owned ConfigMap: the watch on owned objects
	// reconciles the widget and server-side apply (forced) takes the field
	// back.
	cm := e.configMap("widget-w1")
	cm.Data["color"] = "red"
	if err := e.c.Update(ctx, cm, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	e.eventually("the controller restores the edited ConfigMap", func() error {
		if c := e.configMap("widget-w1").Data["color"]; c != "green" {
			return fmt.Errorf("color %q", c)
		}
		return nil
	})

	// Pause: Ready goes False with reason Paused, the ConfigMap stays.
	got = e.widget("w1")
	got.Spec.Paused = true
	got.Spec.Size = 9
	if err := e.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = e.waitReconciled("w1", "Paused")
	if c := apimeta.FindStatusCondition(got.Status.Conditions, conditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Paused" {
		t.Fatalf("paused Ready condition %+v", c)
	}
	if s := e.configMap("widget-w1").Data["size"]; s != "5" {
		t.Fatalf("a paused widget's ConfigMap changed: size %q", s)
	}

	// Restart: stop the manager and the server; while nothing runs, no
	// status changes. Start the server again on the same data directory (on
	// a new port), make changes while the controller is still down, then
	// start a new manager: it lists, watches and catches up.
	e.stopManager()
	got = e.widget("w1")
	got.Spec.Paused = false
	if err := e.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	e.stopServer()
	e.startServer()
	if w := e.widget("w1"); w.Spec.Paused || w.Status.Phase != "Paused" || w.Status.ObservedGeneration == w.Generation {
		t.Fatalf("after the restart, before the controller runs: spec %+v status phase %q observed %d generation %d",
			w.Spec, w.Status.Phase, w.Status.ObservedGeneration, w.Generation)
	}
	w2 := &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w2", Namespace: "default"}, Spec: WidgetSpec{Size: 2, Color: "red"}}
	if err := e.c.Create(ctx, w2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if w := e.widget("w2"); len(w.Finalizers) != 0 || w.Status.Phase != "" {
		t.Fatalf("w2 was reconciled with no controller running: %+v", w)
	}
	e.startManager()
	e.checkReady(e.waitReconciled("w1", "Ready"), 9, "green", "hello")
	e.checkReady(e.waitReconciled("w2", "Ready"), 2, "red", "")

	// Delete: the finalizer unpublishes first, then the widget goes, then
	// the server's garbage collector deletes the ConfigMap it owned.
	if err := e.c.Delete(ctx, e.widget("w1")); err != nil {
		t.Fatal(err)
	}
	e.eventually("w1 is deleted after its finalizer ran", func() error {
		var w Widget
		err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w1"}, &w)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there: deletionTimestamp %v, finalizers %v, phase %q", w.DeletionTimestamp, w.Finalizers, w.Status.Phase)
	})
	if _, ok := e.published("w1"); ok {
		t.Fatal("w1 is gone but its published record is still there")
	}
	e.eventually("the garbage collector deletes w1's ConfigMap", func() error {
		var cm corev1.ConfigMap
		err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "widget-w1"}, &cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, owners %+v", cm.OwnerReferences)
	})
	// w2 and its ConfigMap are untouched.
	e.checkReady(e.widget("w2"), 2, "red", "")

	// The kubeconfig the program writes works with client-go.
	path := filepath.Join(e.dataDir, "kubeconfig")
	if err := e.srv.writeKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cfg, client.Options{Scheme: e.scheme})
	if err != nil {
		t.Fatal(err)
	}
	var list WidgetList
	if err := kc.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "w2" {
		t.Fatalf("widgets through the kubeconfig: %+v", list.Items)
	}
}

// TestRun runs the program's run function as main does, until its context
// ends, and checks that it wrote a usable kubeconfig and reconciles.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, logger, dir, "127.0.0.1:0") }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of its context ending")
		}
	}()

	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	var c client.Client
	deadline := time.Now().Add(30 * time.Second)
	for {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
		if err == nil {
			if c, err = client.New(cfg, client.Options{Scheme: scheme}); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no usable kubeconfig: %v", err)
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("run ended early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"}, Spec: WidgetSpec{Size: 1}}
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	for {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(w), w); err != nil {
			t.Fatal(err)
		}
		if w.Status.Phase == "Ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the widget was not reconciled: %+v", w.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// testWriter sends log lines to t.Log until the test's cleanup ends it
// (a goroutine that logs later must not reach a finished test).
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func newTestWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// The finalizer patches carry the resourceVersion they were computed from
// (MergeFromWithOptimisticLock): a finalizer list changed meanwhile by
// someone else conflicts instead of being overwritten.
func TestFinalizerPatchesAreOptimisticallyLocked(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), nil))
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dataDir: t.TempDir(), logger: logger, scheme: scheme}
	e.startServer() // no manager: the test drives Reconcile
	t.Cleanup(e.stopServer)
	wc, err := client.NewWithWatch(e.srv.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var patches []string
	c := interceptor.NewClient(wc, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			mu.Lock()
			patches = append(patches, string(data))
			mu.Unlock()
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	r := &WidgetReconciler{Client: c, PublishDir: filepath.Join(e.dataDir, "published")}
	if err := os.MkdirAll(r.PublishDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "default"}, Spec: WidgetSpec{Size: 1, Message: "hi"}}
	if err := e.c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var add, remove bool
	for _, p := range patches {
		if !strings.Contains(p, finalizer) && !strings.Contains(p, `"finalizers":null`) {
			continue
		}
		if strings.Contains(p, finalizer) {
			add = true
		} else {
			remove = true
		}
		if !strings.Contains(p, `"resourceVersion"`) {
			t.Errorf("finalizer patch without resourceVersion: %s", p)
		}
	}
	if !add || !remove {
		t.Fatalf("finalizer patches not seen (add %v, remove %v): %q", add, remove, patches)
	}
}
