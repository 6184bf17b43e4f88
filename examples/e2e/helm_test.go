package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// helmVersion is the Helm release the tests build: helm.sh/helm/v3's
// cmd/helm at this version, with the dependencies of its own go.mod (it
// requires newer k8s.io modules than this module's kubectl, so it is not a
// requirement of this module but built on its own, as `go install` does).
const helmVersion = "v3.22.0"

var (
	helmOnce sync.Once
	helmBin  string // path of helm, built or from $KAPI_HELM
	helmErr  error
)

// needHelm returns the helm binary, building it the first time a test asks
// (into the directory TestMain builds kubectl in; later runs take it from the
// Go build cache). It skips the test under -short unless KAPI_HELM names one.
func needHelm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("KAPI_HELM"); h != "" {
		return h
	}
	if testing.Short() {
		t.Skip("-short: helm is not built; set KAPI_HELM to run the helm tests")
	}
	helmOnce.Do(func() {
		name := "helm"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		// go install with a version ignores this module and its workspace:
		// helm's own go.mod decides its dependencies. The version stamp is
		// what a release build sets, so helm reports and sends v3.x.y.
		helmErr = goCommand([]string{"GOBIN=" + binDir, "GOWORK=off"},
			"install", "-ldflags", "-X helm.sh/helm/v3/internal/version.version="+helmVersion,
			"helm.sh/helm/v3/cmd/helm@"+helmVersion)
		helmBin = filepath.Join(binDir, name)
	})
	if helmErr != nil {
		t.Fatalf("building helm: %v", helmErr)
	}
	return helmBin
}

// helmClient runs helm against one server, as a user with nothing but its
// kubeconfig: Helm's cache, config and data directories are the test's own,
// and no HELM_* variable of the environment reaches it, so the storage
// driver is Helm's default, Secrets.
type helmClient struct {
	bin, kubeconfig string
	env             []string
}

func newHelm(t *testing.T, bin string, s *server) *helmClient {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HELM_") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	return &helmClient{bin: bin, kubeconfig: s.Kubeconfig, env: env}
}

// run runs helm with args and the server's kubeconfig.
func (h *helmClient) run(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	return runClient(t, h.env, h.bin, append([]string{"--kubeconfig", h.kubeconfig}, args...)...)
}

// must runs helm and fails the test unless it exits 0.
func (h *helmClient) must(t *testing.T, args ...string) string {
	t.Helper()
	return mustSucceed(t, "helm", args, h.run(t, args...))
}

// mustJSON runs helm (with -o json among args) and decodes its output into v.
func (h *helmClient) mustJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := h.must(t, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("helm %s: decoding %q: %v", strings.Join(args, " "), out, err)
	}
}

// helmChart is a chart as `helm create` would start one, cut down to what
// the quickstart serves: a ConfigMap and a Secret from the values, a Widget
// that a value turns off, and a hook. The Secret's token is generated once
// and then kept: the template looks up the live Secret (Helm's `lookup`, a
// GET through the dynamic client) and reuses its value.
var helmChart = map[string]string{
	"Chart.yaml": `apiVersion: v2
name: demo
description: Helm against the kapi quickstart
type: application
version: 0.1.0
appVersion: "1.0"
`,
	"values.yaml": `color: red
size: 3
password: s3cret
widget:
  enabled: true
`,
	"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  labels:
    app.kubernetes.io/instance: {{ .Release.Name }}
data:
  color: {{ .Values.color | quote }}
  size: {{ .Values.size | quote }}
  revision: {{ .Release.Revision | quote }}
`,
	"templates/secret.yaml": `{{- $live := lookup "v1" "Secret" .Release.Namespace (printf "%s-creds" .Release.Name) }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-creds
type: Opaque
data:
  password: {{ .Values.password | b64enc | quote }}
  {{- if $live }}
  token: {{ index $live.data "token" | quote }}
  {{- else }}
  token: {{ randAlphaNum 16 | b64enc | quote }}
  {{- end }}
`,
	"templates/widget.yaml": `{{- if .Values.widget.enabled }}
apiVersion: example.dev/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}-widget
spec:
  size: {{ .Values.size }}
  color: {{ .Values.color | quote }}
  tags: [helm]
{{- end }}
`,
	"templates/hook.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook
  annotations:
    helm.sh/hook: post-install,post-upgrade,post-rollback
    helm.sh/hook-delete-policy: before-hook-creation
data:
  revision: {{ .Release.Revision | quote }}
`,
}

// helmRelease is the part of a Helm release (as `helm install -o json` prints
// it and the Secrets driver stores it) that the test checks.
type helmRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Manifest  string `json:"manifest"`
	Info      struct {
		Status      string `json:"status"`
		Description string `json:"description"`
	} `json:"info"`
	Config map[string]any `json:"config"`
}

// helmListEntry is one row of `helm list -o json`.
type helmListEntry struct {
	Name, Namespace, Revision, Status, Chart string
	AppVersion                               string `json:"app_version"`
}

// helmHistoryEntry is one row of `helm history -o json`.
type helmHistoryEntry struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Description string `json:"description"`
}

// TestHelm drives the real helm CLI through a release's life against the
// quickstart, with Helm's default storage driver (release records in Secrets
// of type helm.sh/release.v1): install, status, list, upgrade (objects
// patched, then one removed), history, rollback (the removed object created
// again), an --atomic upgrade the server refuses (rolled back), uninstall. It
// checks the objects and the release Secrets with client-go at each step.
func TestHelm(t *testing.T) {
	t.Parallel()
	bin := needHelm(t)
	s := startServer(t)
	h := newHelm(t, bin, s)
	cs, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "apps"
	chart := t.TempDir()
	for name, content := range helmChart {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	widgets := s.Dynamic(t).Resource(schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}).Namespace(ns)
	getConfigMap := func(name string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap %s: %v", name, err)
		}
		return cm
	}
	getSecret := func(name string) *corev1.Secret {
		t.Helper()
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get secret %s: %v", name, err)
		}
		return sec
	}
	getWidget := func() *unstructured.Unstructured {
		t.Helper()
		w, err := widgets.Get(ctx, "demo-widget", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get widget demo-widget: %v", err)
		}
		return w
	}
	// checkObjects checks what the chart rendered at revision rendered with
	// these values.
	checkObjects := func(step, color string, size int64, password string, rendered int) {
		t.Helper()
		cm := getConfigMap("demo-settings")
		want := map[string]string{"color": color, "size": strconv.FormatInt(size, 10), "revision": strconv.Itoa(rendered)}
		if !maps.Equal(cm.Data, want) {
			t.Errorf("%s: configmap demo-settings data %v, want %v", step, cm.Data, want)
		}
		// What Helm marks every object it manages with.
		if cm.Labels["app.kubernetes.io/managed-by"] != "Helm" || cm.Labels["app.kubernetes.io/instance"] != "demo" ||
			cm.Annotations["meta.helm.sh/release-name"] != "demo" || cm.Annotations["meta.helm.sh/release-namespace"] != ns {
			t.Errorf("%s: configmap demo-settings labels %v annotations %v; want Helm's managed-by label and release annotations", step, cm.Labels, cm.Annotations)
		}
		if sec := getSecret("demo-creds"); sec.Type != corev1.SecretTypeOpaque || string(sec.Data["password"]) != password || len(sec.Data["token"]) != 16 {
			t.Errorf("%s: secret demo-creds type %q password %q token %q; want Opaque, %q, 16 characters", step, sec.Type, sec.Data["password"], sec.Data["token"], password)
		}
		w := getWidget()
		if got, want := num(t, w, "spec", "size"), size; got != want {
			t.Errorf("%s: widget spec.size = %d, want %d", step, got, want)
		}
		if got := str(t, w, "spec", "color"); got != color {
			t.Errorf("%s: widget spec.color = %q, want %q", step, got, color)
		}
		if w.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s: widget labels %v, want app.kubernetes.io/managed-by=Helm", step, w.GetLabels())
		}
	}
	// checkRecords checks the release Secrets: one per revision, with the
	// status each should have, and the release each holds.
	checkRecords := func(step string, statuses ...string) {
		t.Helper()
		list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=demo"})
		if err != nil {
			t.Fatalf("%s: list secrets owner=helm,name=demo: %v", step, err)
		}
		var names []string
		for _, sec := range list.Items {
			names = append(names, sec.Name)
		}
		slices.Sort(names)
		var want []string
		for i := range statuses {
			want = append(want, "sh.helm.release.v1.demo.v"+strconv.Itoa(i+1))
		}
		if !slices.Equal(names, want) {
			t.Fatalf("%s: release secrets %v, want %v", step, names, want)
		}
		for _, sec := range list.Items {
			v := strings.TrimPrefix(sec.Name, "sh.helm.release.v1.demo.v")
			n, _ := strconv.Atoi(v) // 1..len(statuses): the names are checked above
			status := statuses[n-1]
			if sec.Type != "helm.sh/release.v1" || sec.Labels["owner"] != "helm" || sec.Labels["name"] != "demo" ||
				sec.Labels["version"] != v || sec.Labels["status"] != status {
				t.Errorf("%s: secret %s type %q labels %v; want type helm.sh/release.v1, owner=helm name=demo version=%s status=%s",
					step, sec.Name, sec.Type, sec.Labels, v, status)
			}
			rel := decodeHelmRelease(t, sec)
			if rel.Name != "demo" || rel.Namespace != ns || strconv.Itoa(rel.Version) != v || rel.Info.Status != status ||
				!strings.Contains(rel.Manifest, "name: demo-settings") {
				t.Errorf("%s: secret %s holds release %s/%s v%d %s with manifest %q; want %s/demo v%s %s with demo-settings in it",
					step, sec.Name, rel.Namespace, rel.Name, rel.Version, rel.Info.Status, rel.Manifest, ns, v, status)
			}
		}
	}
	checkHistory := func(step string, want []helmHistoryEntry) {
		t.Helper()
		var got []helmHistoryEntry
		h.mustJSON(t, &got, "history", "demo", "-n", ns, "-o", "json")
		if !slices.Equal(got, want) {
			t.Errorf("%s: helm history %+v, want %+v", step, got, want)
		}
	}

	// install: revision 1, deployed, into a namespace helm creates.
	var rel helmRelease
	h.mustJSON(t, &rel, "install", "demo", chart, "-n", ns, "--create-namespace", "--wait", "-o", "json")
	if rel.Name != "demo" || rel.Namespace != ns || rel.Version != 1 || rel.Info.Status != "deployed" || rel.Info.Description != "Install complete" {
		t.Errorf("helm install: release %s/%s v%d %s %q, want apps/demo v1 deployed \"Install complete\"", rel.Namespace, rel.Name, rel.Version, rel.Info.Status, rel.Info.Description)
	}
	checkObjects("install", "red", 3, "s3cret", 1)
	token := string(getSecret("demo-creds").Data["token"])
	origCM, origWidget := getConfigMap("demo-settings"), getWidget()
	hook := getConfigMap("demo-hook")
	if hook.Data["revision"] != "1" {
		t.Errorf("install: hook demo-hook data %v, want revision 1", hook.Data)
	}
	checkRecords("install", "deployed")

	// status --show-resources: each object of the release as a Table (the
	// columns kubectl get shows), grouped by version and kind.
	out := h.must(t, "status", "demo", "-n", ns, "--show-resources")
	for _, re := range []string{
		`(?m)^==> v1/ConfigMap\nNAME\s+DATA\s+AGE\ndemo-settings\s+3\s+\d+s$`,
		`(?m)^==> v1/Secret\nNAME\s+TYPE\s+DATA\s+AGE\ndemo-creds\s+Opaque\s+2\s+\d+s$`,
		`(?m)^==> v1/Widget\nNAME\s+SIZE\s+COLOR\s+PHASE\s+AGE\ndemo-widget\s+3\s+red\s+\d+s$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("helm status --show-resources: no match for %s in:\n%s", re, out)
		}
	}

	// list: in the namespace and across all of them (a cluster-wide list of
	// Secrets by label).
	for _, args := range [][]string{{"-n", ns}, {"-A"}} {
		var list []helmListEntry
		h.mustJSON(t, &list, append([]string{"list", "-o", "json"}, args...)...)
		want := []helmListEntry{{Name: "demo", Namespace: ns, Revision: "1", Status: "deployed", Chart: "demo-0.1.0", AppVersion: "1.0"}}
		if !slices.Equal(list, want) {
			t.Errorf("helm list %v: %+v, want %+v", args, list, want)
		}
	}

	// A second install of the same name is refused: Helm finds the release
	// by its Secrets' labels.
	if r := h.run(t, "install", "demo", chart, "-n", ns); r.Err == nil || !strings.Contains(r.Stderr, "cannot re-use a name that is still in use") {
		t.Errorf("helm install of a name in use: err %v stderr %q; want failure: cannot re-use a name that is still in use", r.Err, r.Stderr)
	}

	// upgrade with other values: the objects are patched in place (same
	// uid, new resourceVersion), the token kept through lookup, the hook
	// created anew.
	h.mustJSON(t, &rel, "upgrade", "demo", chart, "-n", ns, "--set", "color=blue,size=5,password=other", "--wait", "-o", "json")
	if rel.Version != 2 || rel.Info.Status != "deployed" || rel.Info.Description != "Upgrade complete" {
		t.Errorf("helm upgrade: release v%d %s %q, want v2 deployed \"Upgrade complete\"", rel.Version, rel.Info.Status, rel.Info.Description)
	}
	checkObjects("upgrade", "blue", 5, "other", 2)
	if got := string(getSecret("demo-creds").Data["token"]); got != token {
		t.Errorf("upgrade: token %q, want %q kept from the live secret by lookup", got, token)
	}
	for _, o := range []struct {
		what string
		was  metav1.Object
		now  metav1.Object
	}{{"configmap demo-settings", origCM, getConfigMap("demo-settings")}, {"widget demo-widget", origWidget, getWidget()}} {
		if o.now.GetUID() != o.was.GetUID() || o.now.GetResourceVersion() == o.was.GetResourceVersion() {
			t.Errorf("upgrade: %s uid %s rv %s (were %s, %s); want it patched in place", o.what, o.now.GetUID(), o.now.GetResourceVersion(), o.was.GetUID(), o.was.GetResourceVersion())
		}
	}
	if w := getWidget(); w.GetGeneration() != 2 {
		t.Errorf("upgrade: widget generation %d, want 2", w.GetGeneration())
	}
	if now := getConfigMap("demo-hook"); now.Data["revision"] != "2" || now.UID == hook.UID {
		t.Errorf("upgrade: hook demo-hook data %v uid %s (was %s); want revision 2, created anew", now.Data, now.UID, hook.UID)
	}
	checkRecords("upgrade", "superseded", "deployed")

	// upgrade that turns the widget off, keeping the other values: Helm
	// deletes the object the chart no longer renders.
	h.mustJSON(t, &rel, "upgrade", "demo", chart, "-n", ns, "--reuse-values", "--set", "widget.enabled=false", "-o", "json")
	if rel.Version != 3 || rel.Info.Status != "deployed" {
		t.Errorf("helm upgrade --reuse-values: release v%d %s, want v3 deployed", rel.Version, rel.Info.Status)
	}
	if _, err := widgets.Get(ctx, "demo-widget", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upgrade with widget.enabled=false: get widget: %v, want NotFound", err)
	}
	if cm := getConfigMap("demo-settings"); cm.Data["color"] != "blue" || cm.Data["revision"] != "3" {
		t.Errorf("upgrade --reuse-values: configmap data %v, want color blue (reused) and revision 3", cm.Data)
	}
	checkRecords("second upgrade", "superseded", "superseded", "deployed")
	checkHistory("before rollback", []helmHistoryEntry{
		{1, "superseded", "Install complete"},
		{2, "superseded", "Upgrade complete"},
		{3, "deployed", "Upgrade complete"},
	})
	// The values of a revision come from its release Secret.
	var values map[string]any
	h.mustJSON(t, &values, "get", "values", "demo", "-n", ns, "--revision", "3", "-o", "json")
	if want := map[string]any{"color": "blue", "size": float64(5), "password": "other", "widget": map[string]any{"enabled": false}}; !reflect.DeepEqual(values, want) {
		t.Errorf("helm get values --revision 3: %v, want %v", values, want)
	}

	// rollback to revision 1: revision 4 with revision 1's manifest, so the
	// objects are as rendered at revision 1 and the widget exists again (a
	// new object).
	if out := h.must(t, "rollback", "demo", "1", "-n", ns, "--wait"); !strings.Contains(out, "Rollback was a success") {
		t.Errorf("helm rollback: output %q, want Rollback was a success", out)
	}
	checkObjects("rollback", "red", 3, "s3cret", 1)
	if w := getWidget(); w.GetUID() == origWidget.GetUID() {
		t.Errorf("rollback: widget uid %s is the one deleted at revision 3", w.GetUID())
	}
	if got := string(getSecret("demo-creds").Data["token"]); got != token {
		t.Errorf("rollback: token %q, want %q (revision 1's)", got, token)
	}
	if now := getConfigMap("demo-hook"); now.Data["revision"] != "1" {
		t.Errorf("rollback: hook demo-hook data %v, want revision 1's (the post-rollback hook of revision 1)", now.Data)
	}
	checkRecords("rollback", "superseded", "superseded", "superseded", "deployed")
	checkHistory("after rollback", []helmHistoryEntry{
		{1, "superseded", "Install complete"},
		{2, "superseded", "Upgrade complete"},
		{3, "superseded", "Upgrade complete"},
		{4, "deployed", "Rollback to 1"},
	})

	// An upgrade the server refuses (spec.size must be >= 0 in the Widget's
	// schema) with --atomic: revision 5 fails with the server's message and
	// Helm rolls back to revision 4 at once (revision 6).
	r := h.run(t, "upgrade", "demo", chart, "-n", ns, "--set", "size=-1", "--atomic", "--timeout", "1m")
	if r.Err == nil || !strings.Contains(r.Stderr, "has been rolled back due to atomic being set") ||
		!strings.Contains(r.Stderr, `Widget.example.dev "demo-widget" is invalid: spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0`) {
		t.Errorf("helm upgrade --atomic with size=-1: err %v stderr %q; want it refused with the server's Invalid message and rolled back", r.Err, r.Stderr)
	}
	var history []helmHistoryEntry
	h.mustJSON(t, &history, "history", "demo", "-n", ns, "-o", "json")
	if len(history) != 6 || history[4].Revision != 5 || history[4].Status != "failed" || !strings.Contains(history[4].Description, "spec.size") ||
		history[5] != (helmHistoryEntry{6, "deployed", "Rollback to 4"}) {
		t.Errorf("helm history after the failed upgrade: %+v; want revision 5 failed on spec.size and 6 deployed, Rollback to 4", history)
	}
	checkObjects("atomic rollback", "red", 3, "s3cret", 1)
	var list []helmListEntry
	h.mustJSON(t, &list, "list", "-n", ns, "-o", "json")
	if len(list) != 1 || list[0].Revision != "6" || list[0].Status != "deployed" {
		t.Errorf("helm list after the rollback: %+v, want demo at revision 6, deployed", list)
	}

	// uninstall: the release's objects and its Secrets are gone. Helm leaves
	// hook objects, which are not part of the release, and the namespace.
	if out := h.must(t, "uninstall", "demo", "-n", ns, "--wait"); !strings.Contains(out, `release "demo" uninstalled`) {
		t.Errorf("helm uninstall: output %q", out)
	}
	_, errConfigMap := cs.CoreV1().ConfigMaps(ns).Get(ctx, "demo-settings", metav1.GetOptions{})
	_, errSecret := cs.CoreV1().Secrets(ns).Get(ctx, "demo-creds", metav1.GetOptions{})
	_, errWidget := widgets.Get(ctx, "demo-widget", metav1.GetOptions{})
	for what, err := range map[string]error{"configmap demo-settings": errConfigMap, "secret demo-creds": errSecret, "widget demo-widget": errWidget} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("after uninstall: get %s: %v, want NotFound", what, err)
		}
	}
	if records, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"}); err != nil || len(records.Items) != 0 {
		t.Errorf("after uninstall: release secrets: %v, %v; want none", err, records)
	}
	getConfigMap("demo-hook")
	h.mustJSON(t, &list, "list", "-A", "-o", "json")
	if len(list) != 0 {
		t.Errorf("helm list -A after uninstall: %+v, want none", list)
	}
	if r := h.run(t, "history", "demo", "-n", ns); r.Err == nil || !strings.Contains(r.Stderr, "release: not found") {
		t.Errorf("helm history after uninstall: err %v stderr %q; want failure: release: not found", r.Err, r.Stderr)
	}
}

// decodeHelmRelease decodes the release a Helm Secret holds: data.release is
// base64 of gzipped JSON (on top of the API's own base64 of data).
func decodeHelmRelease(t *testing.T, sec corev1.Secret) helmRelease {
	t.Helper()
	var rel helmRelease
	gz, err := base64.StdEncoding.DecodeString(string(sec.Data["release"]))
	if err != nil {
		t.Fatalf("secret %s: data.release: %v", sec.Name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("secret %s: data.release: %v", sec.Name, err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("secret %s: data.release: %v", sec.Name, err)
	}
	if err := json.Unmarshal(js, &rel); err != nil {
		t.Fatalf("secret %s: data.release: %v", sec.Name, err)
	}
	return rel
}
