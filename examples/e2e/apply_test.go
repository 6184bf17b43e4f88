package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Server-side apply, the patch types, dry-run and field validation through
// kubectl, client-go and controller-runtime.

// managedEntry returns the managedFields entry of manager (with operation).
func managedEntry(u *unstructured.Unstructured, manager, operation string) *metav1.ManagedFieldsEntry {
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager && string(e.Operation) == operation {
			return &e
		}
	}
	return nil
}

func fieldsJSON(t *testing.T, e *metav1.ManagedFieldsEntry) string {
	t.Helper()
	if e == nil || e.FieldsV1 == nil {
		return "<none>"
	}
	var v any
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestKubectlServerSideApply(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	createNamespace(t, s.Dynamic(t), "ssa")
	w1 := `apiVersion: example.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: ssa
spec:
  size: 3
  color: red
  ports:
  - name: http
    port: 80
`
	out := s.MustKubectl(t, "apply", "--server-side", "-f", writeFile(t, "w1.yaml", w1))
	if !strings.Contains(out, "widget.example.dev/w1 serverside-applied") {
		t.Errorf("apply --server-side: %q", out)
	}
	w := decode(t, s.MustKubectl(t, "get", "widget", "w1", "-n", "ssa", "-o", "json", "--show-managed-fields"))
	if got := fieldsJSON(t, managedEntry(w, "kubectl", "Apply")); got != `{"f:spec":{"f:color":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}},"f:size":{}}}` {
		t.Errorf("kubectl's managed fields = %s", got)
	}
	rv := w.GetResourceVersion()

	// Re-applying the same file writes nothing.
	s.MustKubectl(t, "apply", "--server-side", "-f", writeFile(t, "w1.yaml", w1))
	if again := decode(t, s.MustKubectl(t, "get", "widget", "w1", "-n", "ssa", "-o", "json")); again.GetResourceVersion() != rv {
		t.Errorf("a no-op apply changed the resourceVersion from %s to %s", rv, again.GetResourceVersion())
	}

	// A second manager changing size conflicts, naming the field and owner.
	changed := strings.Replace(w1, "size: 3", "size: 5", 1)
	file := writeFile(t, "w1b.yaml", changed)
	r := s.Kubectl(t, "apply", "--server-side", "--field-manager=ops", "-f", file)
	if r.Err == nil || !strings.Contains(r.Stderr, `Apply failed with 1 conflict: conflict with "kubectl": .spec.size`) {
		t.Fatalf("conflicting apply: err %v stderr %q", r.Err, r.Stderr)
	}
	// --force-conflicts takes the field over.
	s.MustKubectl(t, "apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", file)
	w = decode(t, s.MustKubectl(t, "get", "widget", "w1", "-n", "ssa", "-o", "json", "--show-managed-fields"))
	if num(t, w, "spec", "size") != 5 || fieldsJSON(t, managedEntry(w, "ops", "Apply")) != `{"f:spec":{"f:color":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}},"f:size":{}}}` ||
		fieldsJSON(t, managedEntry(w, "kubectl", "Apply")) != `{"f:spec":{"f:color":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}` {
		t.Errorf("after --force-conflicts: size %d, managedFields %+v", num(t, w, "spec", "size"), w.GetManagedFields())
	}

	// The spec's ConfigMap example.
	s.MustKubectl(t, "apply", "--server-side", "-f", writeFile(t, "cm.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: test-cm
  namespace: ssa
  labels:
    test-label: test
data:
  key: some value
`))
	cm := decode(t, s.MustKubectl(t, "get", "cm", "test-cm", "-n", "ssa", "-o", "json", "--show-managed-fields"))
	mf := cm.GetManagedFields()
	if len(mf) != 1 || mf[0].Manager != "kubectl" || mf[0].Operation != "Apply" || mf[0].APIVersion != "v1" || mf[0].FieldsType != "FieldsV1" || mf[0].Time == nil ||
		fieldsJSON(t, &mf[0]) != `{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:test-label":{}}}}` {
		t.Errorf("configmap managedFields = %+v (%s)", mf, fieldsJSON(t, &mf[0]))
	}

	// Unknown fields are refused, naming the field.
	r = s.Kubectl(t, "apply", "--server-side", "-f", writeFile(t, "bad.yaml", strings.Replace(w1, "color: red", "colour: red", 1)))
	if r.Err == nil || !strings.Contains(r.Stderr, "spec.colour") {
		t.Errorf("apply with an unknown field: err %v stderr %q", r.Err, r.Stderr)
	}
}

func TestKubectlPatchTypes(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	createNamespace(t, s.Dynamic(t), "pt")
	s.MustKubectl(t, "create", "-f", writeFile(t, "c.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: pt}\ndata: {a: \"1\"}\n"))
	s.MustKubectl(t, "create", "-f", writeFile(t, "w.yaml", `apiVersion: example.dev/v1
kind: Widget
metadata: {name: w, namespace: pt}
spec: {size: 1, tags: [a], ports: [{name: http, port: 80}]}
`))
	for _, tc := range []struct{ kind, name, typ, patch, jsonpath, want string }{
		{"cm", "c", "json", `[{"op":"add","path":"/data/b","value":"2"}]`, "{.data.b}", "2"},
		{"cm", "c", "merge", `{"data":{"a":null,"c":"3"}}`, "{.data}", `{"b":"2","c":"3"}`},
		{"cm", "c", "strategic", `{"metadata":{"labels":{"tier":"gold"}}}`, "{.metadata.labels.tier}", "gold"},
		{"widget", "w", "json", `[{"op":"test","path":"/spec/size","value":1},{"op":"replace","path":"/spec/size","value":2}]`, "{.spec.size}", "2"},
		{"widgets.v1.example.dev", "w", "merge", `{"spec":{"color":"blue"}}`, "{.spec.color}", "blue"}, // v1's field
	} {
		out := s.MustKubectl(t, "patch", tc.kind, tc.name, "-n", "pt", "--type", tc.typ, "-p", tc.patch)
		if !strings.Contains(out, "patched") {
			t.Errorf("patch %s --type %s: %q", tc.kind, tc.typ, out)
		}
		if got := s.MustKubectl(t, "get", tc.kind, tc.name, "-n", "pt", "-o", "jsonpath="+tc.jsonpath); got != tc.want {
			t.Errorf("after patch %s --type %s: %s = %q, want %q", tc.kind, tc.typ, tc.jsonpath, got, tc.want)
		}
	}
	// The patch managed fields record kubectl (the User-Agent's product).
	cm := decode(t, s.MustKubectl(t, "get", "cm", "c", "-n", "pt", "-o", "json", "--show-managed-fields"))
	if e := managedEntry(cm, "kubectl-patch", "Update"); e == nil {
		if e = managedEntry(cm, "kubectl", "Update"); e == nil {
			t.Errorf("no Update entry for kubectl: %+v", cm.GetManagedFields())
		}
	}
	// A failed test changes nothing.
	r := s.Kubectl(t, "patch", "widget", "w", "-n", "pt", "--type", "json", "-p", `[{"op":"test","path":"/spec/size","value":9},{"op":"replace","path":"/spec/size","value":7}]`)
	if r.Err == nil || !strings.Contains(r.Stderr, "Invalid") {
		t.Errorf("failed test op: err %v stderr %q", r.Err, r.Stderr)
	}
	// Strategic merge on a custom type without strategic merge metadata: the
	// server's 415, as kube-apiserver (kubectl patch defaults to strategic).
	for _, args := range [][]string{{"--type", "strategic"}, {}} {
		r = s.Kubectl(t, append([]string{"patch", "widget", "w", "-n", "pt", "-p", `{"spec":{"size":8}}`}, args...)...)
		if r.Err == nil || !strings.Contains(r.Stderr, "UnsupportedMediaType") && !strings.Contains(r.Stderr, "unknown format") {
			t.Errorf("strategic patch %v on a widget: err %v stderr %q", args, r.Err, r.Stderr)
		}
	}
	if got := s.MustKubectl(t, "get", "widget", "w", "-n", "pt", "-o", "jsonpath={.spec.size}"); got != "2" {
		t.Errorf("spec.size = %s after refused patches, want 2", got)
	}
}

func TestKubectlDryRunAndDiff(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	createNamespace(t, s.Dynamic(t), "dr")
	w := `apiVersion: example.dev/v1
kind: Widget
metadata: {name: w, namespace: dr}
spec: {size: 3, color: red}
`
	file := writeFile(t, "w.yaml", w)
	out := s.MustKubectl(t, "create", "--dry-run=server", "-f", file, "-o", "json")
	dry := decode(t, out)
	if created := dry.GetCreationTimestamp(); dry.GetUID() == "" || created.IsZero() || num(t, dry, "spec", "size") != 3 {
		t.Errorf("create --dry-run=server returned %s", out)
	}
	if r := s.Kubectl(t, "get", "widget", "w", "-n", "dr"); exitCode(r.Err) == 0 {
		t.Fatal("create --dry-run=server created the widget")
	}
	// diff against nothing shows the whole object; exit 1 means differences.
	r := s.Kubectl(t, "diff", "-f", file)
	if exitCode(r.Err) != 1 || !strings.Contains(r.Stdout, "+  color: red") {
		t.Errorf("diff of a new object: exit %d stdout %q stderr %q", exitCode(r.Err), r.Stdout, r.Stderr)
	}
	s.MustKubectl(t, "apply", "--server-side", "-f", file)
	if r := s.Kubectl(t, "diff", "--server-side", "-f", file); exitCode(r.Err) != 0 || r.Stdout != "" {
		t.Errorf("diff of an unchanged object: exit %d stdout %q stderr %q", exitCode(r.Err), r.Stdout, r.Stderr)
	}
	changed := writeFile(t, "w2.yaml", strings.Replace(w, "size: 3", "size: 4", 1))
	for _, args := range [][]string{{"diff", "-f", changed}, {"diff", "--server-side", "-f", changed}} {
		r := s.Kubectl(t, args...)
		if exitCode(r.Err) != 1 || !strings.Contains(r.Stdout, "-  size: 3") || !strings.Contains(r.Stdout, "+  size: 4") {
			t.Errorf("kubectl %v: exit %d stdout %q stderr %q", args, exitCode(r.Err), r.Stdout, r.Stderr)
		}
	}
	// Dry-run apply, patch and delete leave the object alone.
	s.MustKubectl(t, "apply", "--server-side", "--dry-run=server", "-f", changed)
	s.MustKubectl(t, "patch", "widget", "w", "-n", "dr", "--type", "merge", "-p", `{"spec":{"size":9}}`, "--dry-run=server")
	s.MustKubectl(t, "delete", "widget", "w", "-n", "dr", "--dry-run=server")
	if got := s.MustKubectl(t, "get", "widget", "w", "-n", "dr", "-o", "jsonpath={.spec.size}"); got != "3" {
		t.Errorf("after dry runs spec.size = %s, want 3", got)
	}
	// --validate=strict names a typo.
	r = s.Kubectl(t, "create", "--validate=strict", "-f", writeFile(t, "typo.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: typo, namespace: dr}
dat: {a: "1"}
`))
	if r.Err == nil || !strings.Contains(r.Stderr, `unknown field "dat"`) {
		t.Errorf("create --validate=strict with a typo: err %v stderr %q", r.Err, r.Stderr)
	}
}

func TestClientGoApply(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	dc := s.Dynamic(t)
	createNamespace(t, dc, "cg")

	// The dynamic client's Apply on a custom resource.
	u := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"cg"},"spec":{"size":1,"tags":["a"]}}`)
	got, err := dc.Resource(widgetsGVR).Namespace("cg").Apply(ctx, "w", u, metav1.ApplyOptions{FieldManager: "dyn"})
	if err != nil {
		t.Fatalf("dynamic apply: %v", err)
	}
	if e := managedEntry(got, "dyn", "Apply"); e == nil || fieldsJSON(t, e) != `{"f:spec":{"f:size":{},"f:tags":{"v:\"a\"":{}}}}` {
		t.Errorf("dynamic apply managedFields: %+v", got.GetManagedFields())
	}
	// Another manager adds to the set; a conflicting change fails; force wins.
	u2 := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"cg"},"spec":{"tags":["b"]}}`)
	if got, err = dc.Resource(widgetsGVR).Namespace("cg").Apply(ctx, "w", u2, metav1.ApplyOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	if tags, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "tags"); strings.Join(tags, ",") != "a,b" {
		t.Errorf("tags = %v, want a,b", tags)
	}
	u3 := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"cg"},"spec":{"size":2}}`)
	_, err = dc.Resource(widgetsGVR).Namespace("cg").Apply(ctx, "w", u3, metav1.ApplyOptions{FieldManager: "other"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: %v, want a Conflict", err)
	}
	if causes := statusError(t, err).ErrStatus.Details.Causes; len(causes) != 1 || causes[0].Type != metav1.CauseTypeFieldManagerConflict || causes[0].Field != ".spec.size" {
		t.Errorf("conflict causes = %+v", causes)
	}
	if _, err = dc.Resource(widgetsGVR).Namespace("cg").Apply(ctx, "w", u3, metav1.ApplyOptions{FieldManager: "other", Force: true}); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	// Apply without a field manager is refused by the server.
	_, err = dc.Resource(widgetsGVR).Namespace("cg").Patch(ctx, "w", types.ApplyPatchType, []byte(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("apply without fieldManager: %v, want Invalid", err)
	}

	// Typed apply configurations on a built-in type, and extracting them
	// back from managedFields.
	cfg := s.RESTConfig(t)
	cfg.ContentType = "application/json" // protobuf request bodies are not what this test is about
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ac := corev1ac.ConfigMap("settings", "cg").WithLabels(map[string]string{"app": "x"}).WithData(map[string]string{"mode": "fast"})
	cm, err := cs.CoreV1().ConfigMaps("cg").Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "typed", Force: true})
	if err != nil {
		t.Fatalf("typed apply: %v", err)
	}
	if cm.Data["mode"] != "fast" {
		t.Errorf("typed apply data = %v", cm.Data)
	}
	extracted, err := corev1ac.ExtractConfigMap(cm, "typed")
	if err != nil {
		t.Fatalf("ExtractConfigMap: %v", err)
	}
	if extracted.Data["mode"] != "fast" || extracted.Labels["app"] != "x" || *extracted.Name != "settings" {
		t.Errorf("extracted = %+v", extracted)
	}
	// An update by another manager moves the field away from "typed".
	cm.Data["mode"] = "slow"
	if cm, err = cs.CoreV1().ConfigMaps("cg").Update(ctx, cm, metav1.UpdateOptions{FieldManager: "editor"}); err != nil {
		t.Fatal(err)
	}
	extracted, err = corev1ac.ExtractConfigMap(cm, "typed")
	if err != nil {
		t.Fatal(err)
	}
	if _, has := extracted.Data["mode"]; has {
		t.Errorf("typed still owns data.mode after the update: %+v", extracted.Data)
	}
}

func TestControllerRuntimeApply(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg := s.RESTConfig(t)
	cfg.ContentType = "application/json"
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("controller-runtime client: %v", err)
	}
	createNamespace(t, s.Dynamic(t), "cr")

	// Someone else sets the color first.
	w := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"cr"},"spec":{"size":1,"color":"red"}}`)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(w), client.FieldOwner("human")); err != nil {
		t.Fatalf("apply as human: %v", err)
	}
	// The controller applies its intent, forcing ownership as controllers should.
	want := obj(t, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"cr"},"spec":{"size":1,"color":"green","replicas":3}}`)
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(want.DeepCopy()), client.FieldOwner("widget-controller"))
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply without ForceOwnership: %v, want a Conflict", err)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(want.DeepCopy()), client.FieldOwner("widget-controller"), client.ForceOwnership); err != nil {
		t.Fatalf("apply with ForceOwnership: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(want.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Namespace: "cr", Name: "w"}, got); err != nil {
		t.Fatal(err)
	}
	if str(t, got, "spec", "color") != "green" || num(t, got, "spec", "replicas") != 3 {
		t.Errorf("after the controller's apply: %v", got.Object["spec"])
	}
	if e := managedEntry(got, "widget-controller", "Apply"); e == nil || fieldsJSON(t, e) != `{"f:spec":{"f:color":{},"f:replicas":{},"f:size":{}}}` {
		t.Errorf("controller's managed fields: %+v", got.GetManagedFields())
	}
	if e := managedEntry(got, "human", "Apply"); e == nil || fieldsJSON(t, e) != `{"f:spec":{"f:size":{}}}` {
		t.Errorf("human's managed fields after the takeover: %+v", got.GetManagedFields())
	}
	// A typed apply configuration.
	cm := corev1ac.ConfigMap("c", "cr").WithData(map[string]string{"k": "v"})
	if err := c.Apply(ctx, cm, client.FieldOwner("widget-controller"), client.ForceOwnership); err != nil {
		t.Fatalf("typed apply: %v", err)
	}
	var live corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "cr", Name: "c"}, &live); err != nil || live.Data["k"] != "v" {
		t.Fatalf("get configmap: %v %v", err, live.Data)
	}
}
