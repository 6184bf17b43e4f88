package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The extension mechanisms (docs/extension.md) through real clients: the
// virtual type selfsubjectaccessreviews and the quickstart's custom
// subresources widgets/restart (an action), widgets/log (a stream) and
// widgets/health (a computed view).

// widgetRESTClient is a REST client for example.dev/v1.
func widgetRESTClient(t *testing.T, s *server) *rest.RESTClient {
	t.Helper()
	cfg := s.RESTConfig(t)
	cfg.GroupVersion = &schema.GroupVersion{Group: "example.dev", Version: "v1"}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func createTestWidget(t *testing.T, s *server, name string) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"size": int64(1), "color": "red"},
	}}
	out, err := s.Dynamic(t).Resource(widgetsGVR).Namespace("default").Create(t.Context(), w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating widget %s: %v", name, err)
	}
	return out
}

// TestExtensionClientGoSubresources: SubResource(...) calls of client-go's
// REST client: restart (a watcher sees the MODIFIED event), log with follow
// (a line per change, the end at the delete), health, and the errors.
func TestExtensionClientGoSubresources(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w := createTestWidget(t, s, "w1")
	rc := widgetRESTClient(t, s)
	widgets := s.Dynamic(t).Resource(widgetsGVR).Namespace("default")

	wi, err := widgets.Watch(ctx, metav1.ListOptions{ResourceVersion: w.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()

	// restart: POST, the updated widget back.
	raw, err := rc.Post().Namespace("default").Resource("widgets").Name("w1").SubResource("restart").
		SetHeader("Content-Type", "application/json").Body([]byte(`{"reason":"e2e"}`)).Do(ctx).Raw()
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	var restarted unstructured.Unstructured
	if err := json.Unmarshal(raw, &restarted.Object); err != nil {
		t.Fatal(err)
	}
	at := restarted.GetAnnotations()["example.dev/restartedAt"]
	if restarted.GetKind() != "Widget" || at == "" || restarted.GetAnnotations()["example.dev/restartReason"] != "e2e" {
		t.Fatalf("restart answered %s", raw)
	}
	select {
	case ev := <-wi.ResultChan():
		u, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Modified || u == nil || u.GetAnnotations()["example.dev/restartedAt"] != at {
			t.Fatalf("watch event %s %v", ev.Type, ev.Object)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no MODIFIED event after the restart")
	}
	// A dry run changes nothing.
	if err := rc.Post().Namespace("default").Resource("widgets").Name("w1").SubResource("restart").Param("dryRun", "All").
		SetHeader("Content-Type", "application/json").Body([]byte(`{}`)).Do(ctx).Error(); err != nil {
		t.Fatalf("dry-run restart: %v", err)
	}
	cur, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil || cur.GetAnnotations()["example.dev/restartedAt"] != at {
		t.Fatalf("after a dry-run restart: %v %v", err, cur.GetAnnotations())
	}

	// health: a computed view.
	raw, err = rc.Get().Namespace("default").Resource("widgets").Name("w1").SubResource("health").Do(ctx).Raw()
	if err != nil || !strings.Contains(string(raw), `"kind":"WidgetHealth"`) || !strings.Contains(string(raw), `"message":"0 of 1 replicas ready"`) {
		t.Fatalf("health: %v %s", err, raw)
	}

	// Bad input answers as kube-apiserver does.
	err = rc.Get().Namespace("default").Resource("widgets").Name("w1").SubResource("restart").Do(ctx).Error()
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("GET restart: %v, want 405", err)
	}
	err = rc.Get().Namespace("default").Resource("widgets").Name("w1").SubResource("bogus").Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		t.Errorf("GET bogus: %v, want 404", err)
	}
	err = rc.Post().Namespace("default").Resource("widgets").Name("w1").SubResource("restart").
		SetHeader("Content-Type", "application/json").Body([]byte(`{"kind":"ConfigMap","apiVersion":"v1"}`)).Do(ctx).Error()
	if !apierrors.IsBadRequest(err) {
		t.Errorf("POST restart with a ConfigMap: %v, want 400", err)
	}
	err = rc.Get().Namespace("default").Resource("widgets").Name("nope").SubResource("log").Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		t.Errorf("log of a missing widget: %v, want 404", err)
	}

	// log: plain text; with follow, a line per change until the delete.
	raw, err = rc.Get().Namespace("default").Resource("widgets").Name("w1").SubResource("log").Do(ctx).Raw()
	if err != nil || !strings.Contains(string(raw), "created widget w1") || !strings.Contains(string(raw), "restartedAt="+at) {
		t.Fatalf("log: %v %s", err, raw)
	}
	stream, err := rc.Get().Namespace("default").Resource("widgets").Name("w1").SubResource("log").Param("follow", "true").Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() (string, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(15 * time.Second):
			t.Fatal("no log line within 15s")
		}
		return "", false
	}
	for range 2 { // the current state
		if _, ok := next(); !ok {
			t.Fatal("the follow stream ended early")
		}
	}
	if _, err := widgets.Patch(ctx, "w1", "application/merge-patch+json", []byte(`{"spec":{"size":7}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, _ := next(); !strings.Contains(l, "size=7") {
		t.Fatalf("line after the patch: %q", l)
	}
	if err := widgets.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, _ := next(); !strings.Contains(l, "widget w1 deleted") {
		t.Fatalf("line after the delete: %q", l)
	}
	if l, ok := next(); ok {
		t.Fatalf("the stream goes on after the delete: %q", l)
	}
}

// TestExtensionClientGoVirtual: discovery lists the virtual type and the
// subresources with their verbs; the typed SelfSubjectAccessReview client
// works in JSON and protobuf.
func TestExtensionClientGoVirtual(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := t.Context()
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		cfg := s.RESTConfig(t)
		cfg.ContentType = contentType
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "default", Verb: "create", Group: "example.dev", Resource: "widgets", Subresource: "restart"}},
		}, metav1.CreateOptions{})
		if err != nil || !review.Status.Allowed {
			t.Fatalf("%s: self subject access review: %v %+v", contentType, err, review)
		}
		if contentType != "application/json" {
			continue
		}
		list, err := cs.Discovery().ServerResourcesForGroupVersion("authorization.k8s.io/v1")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name == "selfsubjectaccessreviews" {
				found = r.Kind == "SelfSubjectAccessReview" && !r.Namespaced && strings.Join(r.Verbs, ",") == "create"
			}
		}
		if !found {
			t.Errorf("discovery of authorization.k8s.io/v1: %+v", list.APIResources)
		}
		list, err = cs.Discovery().ServerResourcesForGroupVersion("example.dev/v1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"widgets/restart": "WidgetRestart create", "widgets/log": "Widget get", "widgets/health": "WidgetHealth get"}
		for _, r := range list.APIResources {
			if w, ok := want[r.Name]; ok {
				if got := r.Kind + " " + strings.Join(r.Verbs, ","); got != w {
					t.Errorf("%s: %s, want %s", r.Name, got, w)
				}
				delete(want, r.Name)
			}
		}
		if len(want) > 0 {
			t.Errorf("not in discovery: %v", want)
		}
	}
}

// extensionPolicy lets group ops read widgets and their log, nothing else.
const extensionPolicy = `roles:
- name: widget-log-reader
  rules:
  - apiGroups: [example.dev]
    resources: [widgets, widgets/log]
    verbs: [get, list]
  - nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*", "/openapi/*"]
    verbs: [get]
bindings:
- name: ops-read-widget-logs
  role: widget-log-reader
  groups: [ops]
`

// TestExtensionKubectl: kubectl create -f of a review object, auth can-i
// on subresources for a restricted user, get --raw of the log, create --raw
// of a restart, and api-resources.
func TestExtensionKubectl(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(extensionPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, serverOptions{args: []string{"--authorization-policy", policy}})
	createTestWidget(t, s, "w1")

	// api-resources lists the virtual type with exactly its verbs.
	out := s.MustKubectl(t, "api-resources", "-o", "wide", "--api-group=authorization.k8s.io")
	var row map[string]string
	for _, r := range parseTable(t, out) {
		if r["NAME"] == "selfsubjectaccessreviews" {
			row = r
		}
	}
	if row == nil || row["VERBS"] != "create" || row["KIND"] != "SelfSubjectAccessReview" || row["NAMESPACED"] != "false" {
		t.Errorf("api-resources: %v\n%s", row, out)
	}

	// kubectl create -f of a review, validated on the client. A
	// create-only kind has no PATCH operation in OpenAPI v3 or v2, so
	// kubectl cannot tell whether the server validates fields: it lists
	// apiextensions.k8s.io/v1 customresourcedefinitions (kapi's read-only
	// view of its custom types) to see that the kind is no CRD, then
	// validates the object against the protobuf OpenAPI v2 document, as
	// against kube-apiserver.
	ssar := filepath.Join(dir, "ssar.yaml")
	if err := os.WriteFile(ssar, []byte(`apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes:
    namespace: default
    verb: get
    group: example.dev
    resource: widgets
    subresource: log
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, validate := range [][]string{nil, {"--validate=strict"}} {
		out = s.MustKubectl(t, append([]string{"create", "-f", ssar, "-o", "yaml"}, validate...)...)
		if !strings.Contains(out, "allowed: true") || !strings.Contains(out, "kind: SelfSubjectAccessReview") || !strings.Contains(out, "subresource: log") {
			t.Errorf("kubectl create -f ssar.yaml %v:\n%s", validate, out)
		}
	}
	// An unknown field fails on the client with kube's message (the
	// nested type has no definition of its own in kapi's document: the
	// message names its place in SelfSubjectAccessReview).
	bad := filepath.Join(dir, "bad-ssar.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    verb: get\n    resource: widgets\n    colour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, validate := range [][]string{nil, {"--validate=strict"}} {
		r := s.Kubectl(t, append([]string{"create", "-f", bad, "-o", "yaml"}, validate...)...)
		if r.Err == nil || !strings.Contains(r.Stderr, `error validating data: ValidationError(SelfSubjectAccessReview.spec.resourceAttributes): unknown field "colour" in `) {
			t.Errorf("kubectl create -f bad-ssar.yaml %v: %v\n%s%s", validate, r.Err, r.Stdout, r.Stderr)
		}
	}

	// The CRDs: the custom types (widgets), read-only, as kubectl shows
	// kube-apiserver's.
	out = s.MustKubectl(t, "api-resources", "-o", "wide", "--api-group=apiextensions.k8s.io")
	row = nil
	for _, r := range parseTable(t, out) {
		if r["NAME"] == "customresourcedefinitions" {
			row = r
		}
	}
	if row == nil || row["SHORTNAMES"] != "crd,crds" || row["APIVERSION"] != "apiextensions.k8s.io/v1" || row["NAMESPACED"] != "false" ||
		row["KIND"] != "CustomResourceDefinition" || row["VERBS"] != "get,list" {
		t.Errorf("api-resources: %v\n%s", row, out)
	}
	out = s.MustKubectl(t, "get", "crd")
	if !regexp.MustCompile(`^NAME\s+CREATED AT\nwidgets\.example\.dev\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(out) {
		t.Errorf("kubectl get crd:\n%s", out)
	}
	out = s.MustKubectl(t, "get", "crd", "widgets.example.dev", "-o", "yaml")
	for _, want := range []string{"kind: CustomResourceDefinition", "name: widgets.example.dev", "group: example.dev", "plural: widgets",
		"kind: Widget", "scope: Namespaced", "storage: true", "openAPIV3Schema:", "specReplicasPath: .spec.replicas", "jsonPath: .spec.size",
		"type: Established", "storedVersions:"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get crd widgets.example.dev -o yaml lacks %q:\n%s", want, out)
		}
	}
	if r := s.Kubectl(t, "delete", "crd", "widgets.example.dev"); r.Err == nil || !strings.Contains(r.Stderr, "MethodNotAllowed") && !strings.Contains(r.Stderr, "does not allow this method") {
		t.Errorf("kubectl delete crd: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}

	// The log as text; a restart through kubectl create --raw.
	out = s.MustKubectl(t, "get", "--raw", "/apis/example.dev/v1/namespaces/default/widgets/w1/log")
	if !strings.Contains(out, "created widget w1") || !strings.Contains(out, `color="red"`) {
		t.Errorf("kubectl get --raw .../log:\n%s", out)
	}
	restart := filepath.Join(dir, "restart.json")
	if err := os.WriteFile(restart, []byte(`{"apiVersion":"example.dev/v1","kind":"WidgetRestart","reason":"kubectl"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = s.MustKubectl(t, "create", "--raw", "/apis/example.dev/v1/namespaces/default/widgets/w1/restart", "-f", restart)
	if !strings.Contains(out, `"example.dev/restartReason":"kubectl"`) {
		t.Errorf("kubectl create --raw .../restart:\n%s", out)
	}
	out = s.MustKubectl(t, "get", "widget", "w1", "-o", "jsonpath={.metadata.annotations.example\\.dev/restartReason}")
	if out != "kubectl" {
		t.Errorf("annotation after the restart: %q", out)
	}

	// A restricted user: widgets/log yes, widgets/restart no.
	alice := clientCertKubeconfig(t, s, "alice", "ops")
	as := func(args ...string) kubectlResult {
		return s.Kubectl(t, append([]string{"--kubeconfig", alice}, args...)...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "widgets", "--subresource=log"}, "yes"},
		{[]string{"get", "widgets/log"}, "yes"},
		{[]string{"create", "widgets", "--subresource=restart"}, "no"},
		{[]string{"get", "widgets", "--subresource=health"}, "no"},
		{[]string{"create", "selfsubjectaccessreviews.authorization.k8s.io"}, "yes"},
	} {
		r := as(append([]string{"auth", "can-i"}, c.args...)...)
		if got := strings.TrimSpace(r.Stdout); got != c.want {
			t.Errorf("alice: kubectl auth can-i %s = %q, want %q\nstderr:\n%s", strings.Join(c.args, " "), got, c.want, r.Stderr)
		}
	}
	if r := as("get", "--raw", "/apis/example.dev/v1/namespaces/default/widgets/w1/log"); r.Err != nil || !strings.Contains(r.Stdout, "created widget w1") {
		t.Errorf("alice: get --raw log: %v\n%s\n%s", r.Err, r.Stdout, r.Stderr)
	}
	r := as("create", "--raw", "/apis/example.dev/v1/namespaces/default/widgets/w1/restart", "-f", restart)
	if r.Err == nil || !strings.Contains(r.Stderr, "Forbidden") {
		t.Errorf("alice: create --raw restart: want Forbidden, got %v\n%s\n%s", r.Err, r.Stdout, r.Stderr)
	}
}
