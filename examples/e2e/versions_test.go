package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"
)

// The quickstart serves widgets in example.dev/v1 (stored) and
// example.dev/v2 (examples/quickstart/widget_v2.go): v2's
// spec.appearance.color is v1's spec.color, and v2's
// spec.appearance.finish is the annotation example.dev/finish in v1.

var widgetsV2GVR = schema.GroupVersionResource{Group: "example.dev", Version: "v2", Resource: "widgets"}

const finishAnnotation = "example.dev/finish"

// kubectl: plain "widgets" is v2 (the higher version, as kubectl orders a
// CRD's), a v2 manifest applied is read in v1, explain describes v2, and
// each version has its columns, field selectors and subresources.
func TestWidgetVersionsKubectl(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	createNamespace(t, s.Dynamic(t), "vk")

	v2 := `apiVersion: example.dev/v2
kind: Widget
metadata: {name: a, namespace: vk}
spec:
  size: 2
  appearance: {color: green, finish: matte}
`
	if out := s.MustKubectl(t, "apply", "-f", writeFile(t, "a.yaml", v2)); !strings.Contains(out, "widget.example.dev/a created") {
		t.Errorf("kubectl apply -f (v2): %q", out)
	}
	got := decode(t, s.MustKubectl(t, "get", "widgets.v2.example.dev", "a", "-n", "vk", "-o", "json"))
	if got.GetAPIVersion() != "example.dev/v2" || str(t, got, "spec", "appearance", "color") != "green" ||
		str(t, got, "spec", "appearance", "finish") != "matte" || got.GetAnnotations()[finishAnnotation] != "" {
		t.Errorf("get widgets.v2.example.dev a: %s %v annotations %v", got.GetAPIVersion(), got.Object["spec"], got.GetAnnotations())
	}
	out := s.MustKubectl(t, "get", "widgets.v1.example.dev", "a", "-n", "vk", "-o", "yaml")
	js, err := yaml.YAMLToJSON([]byte(out))
	if err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, out)
	}
	v1 := decode(t, string(js))
	if v1.GetAPIVersion() != "example.dev/v1" || str(t, v1, "spec", "color") != "green" || str(t, v1, "spec", "appearance", "color") != "<absent>" ||
		v1.GetAnnotations()[finishAnnotation] != "matte" || v1.GetUID() != got.GetUID() || v1.GetResourceVersion() != got.GetResourceVersion() {
		t.Errorf("get widgets.v1.example.dev a -o yaml: want the same widget in v1 (spec.color green, annotation %s matte):\n%s", finishAnnotation, out)
	}

	// A second apply of the v2 manifest changes the finish: v1 sees it in
	// the annotation.
	s.MustKubectl(t, "apply", "-f", writeFile(t, "a2.yaml", strings.Replace(v2, "finish: matte", "finish: gloss", 1)))
	if got := s.MustKubectl(t, "get", "widgets.v1.example.dev", "a", "-n", "vk", "-o", `jsonpath={.metadata.annotations.example\.dev/finish}`); got != "gloss" {
		t.Errorf("after applying finish gloss in v2, v1's annotation = %q", got)
	}
	// v2 refuses the annotation that stands for its field in v1.
	bad := strings.Replace(v2, "metadata: {name: a, namespace: vk}", "metadata: {name: b, namespace: vk, annotations: {example.dev/finish: matte}}", 1)
	if r := s.Kubectl(t, "apply", "-f", writeFile(t, "b.yaml", bad)); r.Err == nil || !strings.Contains(r.Stderr, "metadata.annotations[example.dev/finish]") {
		t.Errorf("apply a v2 widget with the annotation %s: err %v stderr %q, want it refused", finishAnnotation, r.Err, r.Stderr)
	}

	// A widget written in v1 is listed by plain "widgets" in v2's columns.
	s.MustKubectl(t, "create", "-f", writeFile(t, "c.yaml", "apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: c, namespace: vk}\nspec: {size: 5, color: red}\n"))
	out = s.MustKubectl(t, "get", "widgets", "-n", "vk")
	if !regexp.MustCompile(`^NAME\s+SIZE\s+COLOR\s+FINISH\s+PHASE\s+AGE\n`).MatchString(out) {
		t.Fatalf("kubectl get widgets: want v2's columns NAME SIZE COLOR FINISH PHASE AGE:\n%s", out)
	}
	rows := parseTable(t, out)
	if len(rows) != 2 || rows[0]["NAME"] != "a" || rows[0]["COLOR"] != "green" || rows[0]["FINISH"] != "gloss" ||
		rows[1]["NAME"] != "c" || rows[1]["SIZE"] != "5" || rows[1]["COLOR"] != "red" || rows[1]["FINISH"] != "" {
		t.Errorf("kubectl get widgets:\n%s", out)
	}
	out = s.MustKubectl(t, "get", "widgets.v1.example.dev", "-n", "vk")
	if !regexp.MustCompile(`^NAME\s+SIZE\s+COLOR\s+PHASE\s+AGE\n`).MatchString(out) {
		t.Errorf("kubectl get widgets.v1.example.dev: want v1's columns:\n%s", out)
	}

	// Field selectors: each version's own.
	for _, c := range []struct{ resource, selector, want string }{
		{"widgets.v2.example.dev", "spec.appearance.color=red", "widget.example.dev/c"},
		{"widgets", "spec.appearance.finish=gloss", "widget.example.dev/a"},
		{"widgets.v1.example.dev", "spec.color=green", "widget.example.dev/a"},
	} {
		if out := s.MustKubectl(t, "get", c.resource, "-n", "vk", "--field-selector", c.selector, "-o", "name"); strings.TrimSpace(out) != c.want {
			t.Errorf("get %s --field-selector %s = %q, want %s", c.resource, c.selector, out, c.want)
		}
	}
	if r := s.Kubectl(t, "get", "widgets.v2.example.dev", "-n", "vk", "--field-selector", "spec.color=red"); r.Err == nil || !strings.Contains(r.Stderr, "spec.color") {
		t.Errorf("v2 with v1's field selector spec.color: err %v stderr %q, want it refused", r.Err, r.Stderr)
	}

	// explain: v2's schema.
	out = s.MustKubectl(t, "explain", "widgets", "--api-version=example.dev/v2")
	if !regexp.MustCompile(`(?m)^VERSION:\s+v2$`).MatchString(out) {
		t.Errorf("explain widgets --api-version=example.dev/v2:\n%s", out)
	}
	out = s.MustKubectl(t, "explain", "widgets.spec", "--api-version=example.dev/v2")
	for _, re := range []string{`(?m)^\s+appearance\s+<Object>$`, `(?m)^\s+size\s+<integer> -required-$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain widgets.spec (v2): no match for %s in:\n%s", re, out)
		}
	}
	if regexp.MustCompile(`(?m)^\s+color\s+<string>$`).MatchString(out) {
		t.Errorf("explain widgets.spec (v2) shows v1's color:\n%s", out)
	}
	out = s.MustKubectl(t, "explain", "widgets.spec.appearance", "--api-version=example.dev/v2")
	for _, re := range []string{`(?m)^\s+color\s+<string>$`, `(?m)^\s+finish\s+<string>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain widgets.spec.appearance (v2): no match for %s in:\n%s", re, out)
		}
	}

	// The custom subresources in v2, with v2's kinds; scale through the
	// preferred version.
	out = s.MustKubectl(t, "get", "--raw", "/apis/example.dev/v2/namespaces/vk/widgets/a/health")
	if !strings.Contains(out, `"apiVersion":"example.dev/v2"`) || !strings.Contains(out, `"kind":"WidgetHealth"`) {
		t.Errorf("v2 widgets/health: %s", out)
	}
	restart := writeFile(t, "restart.json", `{"apiVersion":"example.dev/v2","kind":"WidgetRestart","reason":"v2"}`)
	out = s.MustKubectl(t, "create", "--raw", "/apis/example.dev/v2/namespaces/vk/widgets/a/restart", "-f", restart)
	if !strings.Contains(out, `"apiVersion":"example.dev/v2"`) || !strings.Contains(out, `"example.dev/restartReason":"v2"`) || strings.Contains(out, finishAnnotation) {
		t.Errorf("v2 widgets/restart answered %s; want the v2 widget, restarted, without %s", out, finishAnnotation)
	}
	if got := s.MustKubectl(t, "get", "widgets.v1.example.dev", "a", "-n", "vk", "-o", `jsonpath={.metadata.annotations.example\.dev/finish}`); got != "gloss" {
		t.Errorf("after a restart through v2, v1's annotation %s = %q, want gloss (kept)", finishAnnotation, got)
	}
	if out := s.MustKubectl(t, "get", "--raw", "/apis/example.dev/v2/namespaces/vk/widgets/a/log"); !strings.Contains(out, `color="green"`) {
		t.Errorf("v2 widgets/log: %q, want the color", out)
	}
	if r := s.Kubectl(t, "scale", "widget", "a", "-n", "vk", "--replicas=3"); r.Err != nil {
		t.Errorf("kubectl scale widget a: %v %s", r.Err, r.Stderr)
	} else if got := s.MustKubectl(t, "get", "widgets.v1.example.dev", "a", "-n", "vk", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("after scaling: v1 spec.replicas = %q", got)
	}
}

// client-go's dynamic client on both versions: created through v2, read and
// updated through v1, read through v2 again; one object, one
// resourceVersion.
func TestWidgetVersionsDynamic(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	dc := s.Dynamic(t)
	createNamespace(t, dc, "vd")
	w1, w2 := dc.Resource(widgetsGVR).Namespace("vd"), dc.Resource(widgetsV2GVR).Namespace("vd")

	created, err := w2.Create(ctx, obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"a","labels":{"app":"x"}},
		"spec":{"size":1,"appearance":{"color":"red","finish":"matte"},"tags":["t"]}}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through v2: %v", err)
	}
	if created.GetAPIVersion() != "example.dev/v2" || str(t, created, "spec", "appearance", "finish") != "matte" {
		t.Errorf("create through v2 answered %v", created.Object)
	}
	old, err := w1.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through v1: %v", err)
	}
	if old.GetAPIVersion() != "example.dev/v1" || str(t, old, "spec", "color") != "red" || old.GetAnnotations()[finishAnnotation] != "matte" ||
		old.GetLabels()["app"] != "x" || old.GetResourceVersion() != created.GetResourceVersion() || old.GetUID() != created.GetUID() {
		t.Errorf("get through v1: %v", old.Object)
	}

	// An update through v1 that keeps the annotation keeps the finish.
	_ = unstructured.SetNestedField(old.Object, "blue", "spec", "color")
	_ = unstructured.SetNestedField(old.Object, int64(7), "spec", "size")
	updated, err := w1.Update(ctx, old, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update through v1: %v", err)
	}
	got, err := w2.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if str(t, got, "spec", "appearance", "color") != "blue" || str(t, got, "spec", "appearance", "finish") != "matte" || num(t, got, "spec", "size") != 7 ||
		got.GetAnnotations()[finishAnnotation] != "" || got.GetResourceVersion() != updated.GetResourceVersion() || got.GetGeneration() != 2 {
		t.Errorf("get through v2 after the v1 update: %v (annotations %v, generation %d)", got.Object["spec"], got.GetAnnotations(), got.GetGeneration())
	}
	// A v1 client that drops the annotation drops the finish; a v2 patch
	// puts it back, into the annotation.
	updated.SetAnnotations(nil)
	if _, err := w1.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w2.Get(ctx, "a", metav1.GetOptions{}); str(t, got, "spec", "appearance", "finish") != "<absent>" {
		t.Errorf("v2 after v1 dropped the annotation: %v", got.Object["spec"])
	}
	if _, err := w2.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"appearance":{"finish":"satin"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("merge patch through v2: %v", err)
	}
	if got, _ := w1.Get(ctx, "a", metav1.GetOptions{}); got.GetAnnotations()[finishAnnotation] != "satin" || str(t, got, "spec", "color") != "blue" {
		t.Errorf("v1 after the v2 patch: %v annotations %v", got.Object["spec"], got.GetAnnotations())
	}
	// Conflicts are version-blind: an update through v2 with v1's stale
	// resourceVersion fails.
	stale, _ := w2.Get(ctx, "a", metav1.GetOptions{})
	stale.SetResourceVersion(created.GetResourceVersion())
	if _, err := w2.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update through v2 with an old resourceVersion: %v, want a Conflict", err)
	}
	// Lists: each version lists every widget, in its form.
	if _, err := w1.Create(ctx, widget(t, "vd", "b", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l2, err := w2.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l2.Items) != 2 || l2.GetAPIVersion() != "example.dev/v2" || str(t, &l2.Items[1], "spec", "appearance", "color") != "red" || l2.Items[1].GetAPIVersion() != "example.dev/v2" {
		t.Errorf("list through v2: %s %v", l2.GetAPIVersion(), names(l2))
	}
}

// widgetEvent is what two watchers must agree on.
type widgetEvent struct {
	Type, Name, ResourceVersion string
}

// Two watchers, one on each version, from the same resourceVersion, see
// the same events in the same order, each in its version's form, whichever
// version the writes go through.
func TestWidgetVersionsWatchOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	dc := s.Dynamic(t)
	createNamespace(t, dc, "vw")
	w1, w2 := dc.Resource(widgetsGVR).Namespace("vw"), dc.Resource(widgetsV2GVR).Namespace("vw")
	list, err := w1.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}
	watch1, err := w1.Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer watch1.Stop()
	watch2, err := w2.Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer watch2.Stop()

	must := func(_ *unstructured.Unstructured, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w2.Create(ctx, obj(t, `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1,"appearance":{"color":"red","finish":"matte"}}}`), metav1.CreateOptions{}))
	must(w1.Create(ctx, widget(t, "vw", "b", 2), metav1.CreateOptions{}))
	must(w1.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"color":"blue"}}`), metav1.PatchOptions{}))
	must(w2.Patch(ctx, "b", types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`), metav1.PatchOptions{}, "status"))
	must(w2.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"appearance":{"finish":"gloss"}}}`), metav1.PatchOptions{}))
	if err := w1.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 7
	ev1, obj1 := collectWidgetEvents(t, watch1, n)
	ev2, obj2 := collectWidgetEvents(t, watch2, n)
	want := []string{"ADDED a", "ADDED b", "MODIFIED a", "MODIFIED b", "MODIFIED a", "DELETED b", "DELETED a"}
	for i := range n {
		if ev1[i] != ev2[i] || ev1[i].Type+" "+ev1[i].Name != want[i] {
			t.Errorf("event %d: v1 watcher %+v, v2 watcher %+v; want both %s", i, ev1[i], ev2[i], want[i])
		}
	}
	// Each in its version: the color after the v1 patch, the finish after
	// the v2 patch.
	if obj1[2].GetAPIVersion() != "example.dev/v1" || str(t, obj1[2], "spec", "color") != "blue" ||
		obj2[2].GetAPIVersion() != "example.dev/v2" || str(t, obj2[2], "spec", "appearance", "color") != "blue" {
		t.Errorf("MODIFIED a (color): v1 %v, v2 %v", obj1[2].Object["spec"], obj2[2].Object["spec"])
	}
	if obj1[4].GetAnnotations()[finishAnnotation] != "gloss" || str(t, obj2[4], "spec", "appearance", "finish") != "gloss" || obj2[4].GetAnnotations()[finishAnnotation] != "" {
		t.Errorf("MODIFIED a (finish): v1 annotations %v, v2 %v annotations %v", obj1[4].GetAnnotations(), obj2[4].Object["spec"], obj2[4].GetAnnotations())
	}
	if str(t, obj2[3], "status", "phase") != "Ready" || str(t, obj1[3], "status", "phase") != "Ready" {
		t.Errorf("MODIFIED b (status): v1 %v, v2 %v", obj1[3].Object["status"], obj2[3].Object["status"])
	}
}

// collectWidgetEvents reads n events (bookmarks aside) from w, within 30s.
func collectWidgetEvents(t *testing.T, w watch.Interface, n int) ([]widgetEvent, []*unstructured.Unstructured) {
	t.Helper()
	var evs []widgetEvent
	var objs []*unstructured.Unstructured
	timeout := time.After(30 * time.Second)
	for len(evs) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %d events: %+v", len(evs), evs)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			u, isU := ev.Object.(*unstructured.Unstructured)
			if !isU || ev.Type == watch.Error {
				t.Fatalf("watch event %s %#v", ev.Type, ev.Object)
			}
			evs = append(evs, widgetEvent{string(ev.Type), u.GetName(), u.GetResourceVersion()})
			objs = append(objs, u)
		case <-timeout:
			t.Fatalf("after 30s, %d of %d events: %+v", len(evs), n, evs)
		}
	}
	return evs, objs
}
