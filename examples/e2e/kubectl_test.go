package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// manifest is what a user would kubectl create -f: a namespace, a configmap
// and a widget.
const manifest = `apiVersion: v1
kind: Namespace
metadata:
  name: kc
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: kc
data:
  mode: fast
---
apiVersion: example.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: kc
  labels:
    app: demo
spec:
  size: 3
  color: red
  replicas: 1
  tags: [a, b]
  ports:
  - name: http
    port: 80
    protocol: TCP
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseTable splits kubectl's column output into rows keyed by header; the
// columns start where the header names start.
func parseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in output %q", out)
	}
	header := lines[0]
	var starts []int
	var names []string
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(header, -1) {
		starts = append(starts, m[0])
		names = append(names, header[m[0]:m[1]])
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for i, st := range starts {
			end := len(l)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			if st < len(l) {
				row[names[i]] = strings.TrimSpace(l[st:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func TestKubectlAPIResources(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)

	out := s.MustKubectl(t, "api-resources")
	rows := parseTable(t, out)
	byName := map[string]map[string]string{}
	for _, r := range rows {
		byName[r["NAME"]] = r
	}
	want := map[string]map[string]string{
		"namespaces": {"SHORTNAMES": "ns", "APIVERSION": "v1", "NAMESPACED": "false", "KIND": "Namespace"},
		"configmaps": {"SHORTNAMES": "cm", "APIVERSION": "v1", "NAMESPACED": "true", "KIND": "ConfigMap"},
		// The preferred version: the higher one, as for a CRD.
		"widgets": {"SHORTNAMES": "wd", "APIVERSION": "example.dev/v2", "NAMESPACED": "true", "KIND": "Widget"},
	}
	for name, cols := range want {
		r, ok := byName[name]
		if !ok {
			t.Errorf("api-resources does not list %s:\n%s", name, out)
			continue
		}
		for col, v := range cols {
			if r[col] != v {
				t.Errorf("api-resources %s: %s = %q, want %q\n%s", name, col, r[col], v, out)
			}
		}
	}

	out = s.MustKubectl(t, "api-resources", "--api-group=example.dev", "-o", "name")
	if strings.TrimSpace(out) != "widgets.example.dev" {
		t.Errorf("api-resources --api-group=example.dev -o name = %q, want widgets.example.dev", out)
	}
	out = s.MustKubectl(t, "api-resources", "--categories=all", "-o", "name")
	if strings.TrimSpace(out) != "widgets.example.dev" {
		t.Errorf("api-resources --categories=all -o name = %q, want widgets.example.dev", out)
	}
}

func TestKubectlLifecycle(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	file := writeFile(t, "all.yaml", manifest)

	// create -f
	out := s.MustKubectl(t, "create", "-f", file)
	for _, want := range []string{"namespace/kc created", "configmap/settings created", "widget.example.dev/w1 created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl create -f: output %q lacks %q", out, want)
		}
	}

	// get -o json, in v1 (plain "widgets" is the preferred version, v2)
	out = s.MustKubectl(t, "get", "widgets.v1.example.dev", "w1", "-n", "kc", "-o", "json")
	w := decode(t, out)
	checkWidget(t, "get -o json", w, "red", 3)

	// get -o yaml
	out = s.MustKubectl(t, "get", "widget.v1.example.dev", "w1", "-n", "kc", "-o", "yaml")
	js, err := yaml.YAMLToJSON([]byte(out))
	if err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, out)
	}
	wy := decode(t, string(js))
	checkWidget(t, "get -o yaml", wy, "red", 3)
	if wy.GetResourceVersion() != w.GetResourceVersion() || wy.GetUID() != w.GetUID() {
		t.Errorf("-o yaml and -o json disagree: rv %s/%s uid %s/%s", wy.GetResourceVersion(), w.GetResourceVersion(), wy.GetUID(), w.GetUID())
	}

	// a list as json: kind List with the widget in it
	out = s.MustKubectl(t, "get", "wd", "-n", "kc", "-o", "json")
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "List" || len(list.Items) != 1 {
		t.Errorf("get wd -o json: %v, kind %q, %d items; want List with 1 item\n%s", err, list.Kind, len(list.Items), out)
	}

	// configmap
	out = s.MustKubectl(t, "get", "configmap", "settings", "-n", "kc", "-o", "jsonpath={.data.mode}")
	if out != "fast" {
		t.Errorf("get configmap -o jsonpath={.data.mode} = %q, want fast", out)
	}

	// default table output: v1's printer columns
	out = s.MustKubectl(t, "get", "widgets.v1.example.dev", "-n", "kc")
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME SIZE COLOR PHASE AGE" {
		t.Errorf("get wd: header %q, want NAME SIZE COLOR PHASE AGE\n%s", header, out)
	}
	rows := parseTable(t, out)
	if len(rows) != 1 || rows[0]["NAME"] != "w1" || rows[0]["SIZE"] != "3" || rows[0]["COLOR"] != "red" ||
		rows[0]["PHASE"] != "" || !regexp.MustCompile(`^\d+s$`).MatchString(rows[0]["AGE"]) {
		t.Errorf("get wd: rows %v, want w1 3 red, no phase (no status yet), an age in seconds\n%s", rows, out)
	}
	// -o wide and --show-labels still work on a Table
	out = s.MustKubectl(t, "get", "wd", "-n", "kc", "--show-labels")
	if !strings.Contains(out, "app=demo") {
		t.Errorf("get wd --show-labels lacks app=demo:\n%s", out)
	}
	// the category "all" expands to widgets
	out = s.MustKubectl(t, "get", "all", "-n", "kc", "-o", "name")
	if strings.TrimSpace(out) != "widget.example.dev/w1" {
		t.Errorf("get all -o name = %q, want widget.example.dev/w1", out)
	}

	// replace -f with a changed field
	changed := strings.Replace(manifest, "color: red", "color: blue", 1)
	changed = strings.Replace(changed, "size: 3", "size: 9", 1)
	widgetOnly := changed[strings.Index(changed, "apiVersion: example.dev/v1"):]
	out = s.MustKubectl(t, "replace", "-f", writeFile(t, "w1.yaml", widgetOnly))
	if !strings.Contains(out, "widget.example.dev/w1 replaced") {
		t.Errorf("replace -f: output %q, want widget.example.dev/w1 replaced", out)
	}
	out = s.MustKubectl(t, "get", "widgets.v1.example.dev", "w1", "-n", "kc", "-o", "json")
	replaced := decode(t, out)
	checkWidget(t, "get after replace", replaced, "blue", 9)
	if replaced.GetResourceVersion() == w.GetResourceVersion() || replaced.GetUID() != w.GetUID() || replaced.GetGeneration() != 2 {
		t.Errorf("after replace: rv %s (was %s) uid %s (was %s) generation %d; want a new rv, same uid, generation 2",
			replaced.GetResourceVersion(), w.GetResourceVersion(), replaced.GetUID(), w.GetUID(), replaced.GetGeneration())
	}

	// scale through the scale subresource
	if r := s.Kubectl(t, "scale", "widget", "w1", "-n", "kc", "--replicas=4"); r.Err != nil || !strings.Contains(r.Stdout, "widget.example.dev/w1 scaled") {
		t.Errorf("kubectl scale widget w1 --replicas=4: %v, stdout %q stderr %q; want widget.example.dev/w1 scaled", r.Err, r.Stdout, r.Stderr)
	} else if out := s.MustKubectl(t, "get", "wd", "w1", "-n", "kc", "-o", "jsonpath={.spec.replicas}"); out != "4" {
		t.Errorf("after kubectl scale --replicas=4: spec.replicas = %q", out)
	}

	// delete widget x, then get → NotFound
	out = s.MustKubectl(t, "delete", "widget", "w1", "-n", "kc")
	if !strings.Contains(out, `widget.example.dev "w1" deleted`) {
		t.Errorf("delete widget w1: output %q", out)
	}
	r := s.Kubectl(t, "get", "widget", "w1", "-n", "kc")
	if r.Err == nil || exitCode(r.Err) == 0 || !strings.Contains(r.Stderr, "NotFound") || !strings.Contains(r.Stderr, `widgets.example.dev "w1" not found`) {
		t.Errorf("get after delete: err %v stderr %q; want a non-zero exit and Error from server (NotFound): widgets.example.dev \"w1\" not found", r.Err, r.Stderr)
	}

	// create -f again (the widget only), then delete -f the widget and configmap
	objects := changed[strings.Index(changed, "apiVersion: v1\nkind: ConfigMap"):]
	objFile := writeFile(t, "objects.yaml", objects)
	s.MustKubectl(t, "create", "-f", writeFile(t, "w1b.yaml", widgetOnly))
	out = s.MustKubectl(t, "delete", "-f", objFile)
	for _, want := range []string{`configmap "settings" deleted`, `widget.example.dev "w1" deleted`} {
		if !strings.Contains(out, want) {
			t.Errorf("delete -f: output %q lacks %q", out, want)
		}
	}
	for _, res := range []string{"configmap/settings", "widget/w1"} {
		r := s.Kubectl(t, "get", res, "-n", "kc")
		if exitCode(r.Err) == 0 || !strings.Contains(r.Stderr, "NotFound") {
			t.Errorf("get %s after delete -f: exit %d stderr %q; want non-zero and NotFound", res, exitCode(r.Err), r.Stderr)
		}
	}
	r = s.Kubectl(t, "get", "wd", "-n", "kc")
	if r.Err != nil || !strings.Contains(r.Stderr, "No resources found in kc namespace.") {
		t.Errorf("get wd in an empty namespace: err %v stdout %q stderr %q; want exit 0 and \"No resources found in kc namespace.\"", r.Err, r.Stdout, r.Stderr)
	}
}

func checkWidget(t *testing.T, what string, w *unstructured.Unstructured, color string, size int64) {
	t.Helper()
	if w.GetAPIVersion() != "example.dev/v1" || w.GetKind() != "Widget" || w.GetName() != "w1" || w.GetNamespace() != "kc" {
		t.Errorf("%s: %s %s %s/%s, want example.dev/v1 Widget kc/w1", what, w.GetAPIVersion(), w.GetKind(), w.GetNamespace(), w.GetName())
	}
	if created := w.GetCreationTimestamp(); w.GetUID() == "" || w.GetResourceVersion() == "" || created.IsZero() {
		t.Errorf("%s: uid %q resourceVersion %q creationTimestamp %v; want all set", what, w.GetUID(), w.GetResourceVersion(), created)
	}
	if w.GetLabels()["app"] != "demo" {
		t.Errorf("%s: labels %v, want app=demo", what, w.GetLabels())
	}
	if got := num(t, w, "spec", "size"); got != size {
		t.Errorf("%s: spec.size = %d, want %d", what, got, size)
	}
	if got := str(t, w, "spec", "color"); got != color {
		t.Errorf("%s: spec.color = %q, want %q", what, got, color)
	}
	tags, _, _ := unstructured.NestedStringSlice(w.Object, "spec", "tags")
	ports, _, _ := unstructured.NestedSlice(w.Object, "spec", "ports")
	if strings.Join(tags, ",") != "a,b" || len(ports) != 1 {
		t.Errorf("%s: spec.tags %v spec.ports %v; want [a b] and one port", what, tags, ports)
	} else if p, _ := ports[0].(map[string]any); p["name"] != "http" || p["protocol"] != "TCP" || p["port"] != int64(80) {
		t.Errorf("%s: spec.ports[0] = %v, want {name: http, port: 80, protocol: TCP}", what, p)
	}
}

// decode parses one object as client-go does (integers as int64).
func decode(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatalf("decoding %q: %v", js, err)
	}
	return u
}

func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)

	// v1's schema (plain "widgets" is the preferred version, v2:
	// TestWidgetsV2Kubectl).
	out := s.MustKubectl(t, "explain", "widgets", "--api-version=example.dev/v1")
	for _, re := range []string{
		`(?m)^GROUP:\s+example\.dev$`, `(?m)^KIND:\s+Widget$`, `(?m)^VERSION:\s+v1$`, `(?m)^FIELDS:$`,
		`(?m)^\s+apiVersion\s+<string>`, `(?m)^\s+kind\s+<string>`, `(?m)^\s+metadata\s+<ObjectMeta>`,
		`(?m)^\s+spec\s+<Object> -required-`, `(?m)^\s+status\s+<Object>`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain widgets: no match for %s in:\n%s", re, out)
		}
	}

	out = s.MustKubectl(t, "explain", "widgets.spec", "--api-version=example.dev/v1")
	for _, re := range []string{
		`(?m)^FIELD:\s+spec <Object>$`,
		`(?m)^\s+size\s+<integer> -required-$`, `(?m)^\s+color\s+<string>$`, `(?m)^\s+replicas\s+<integer>$`,
		`(?m)^\s+tags\s+<\[\]string>$`, `(?m)^\s+ports\s+<\[\]Object>$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain widgets.spec: no match for %s in:\n%s", re, out)
		}
	}

	out = s.MustKubectl(t, "explain", "wd.spec.ports")
	for _, re := range []string{`(?m)^\s+name\s+<string> -required-$`, `(?m)^\s+port\s+<integer> -required-$`, `(?m)^\s+protocol\s+<string>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain wd.spec.ports: no match for %s in:\n%s", re, out)
		}
	}

	out = s.MustKubectl(t, "explain", "configmaps")
	for _, re := range []string{`(?m)^KIND:\s+ConfigMap$`, `(?m)^\s+data\s+<map\[string\]string>$`, `(?m)^\s+binaryData\s+<map\[string\]string>$`, `(?m)^\s+immutable\s+<boolean>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain configmaps: no match for %s in:\n%s", re, out)
		}
	}

	// A built-in type's nested structs are named, as kube-apiserver's are.
	out = s.MustKubectl(t, "explain", "namespaces.status")
	for _, re := range []string{`(?m)^FIELD:\s+status <NamespaceStatus>$`, `(?m)^\s+conditions\s+<\[\]NamespaceCondition>$`, `(?m)^\s+phase\s+<string>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain namespaces.status: no match for %s in:\n%s", re, out)
		}
	}
}

func TestKubectlFieldValidation(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	s.MustKubectl(t, "create", "-f", writeFile(t, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: fv}\n"))

	bogus := writeFile(t, "bogus.yaml", `apiVersion: example.dev/v1
kind: Widget
metadata:
  name: b
  namespace: fv
spec:
  size: 1
  bogus: true
`)
	// default --validate=strict: refused, naming the field
	r := s.Kubectl(t, "create", "-f", bogus)
	if r.Err == nil || !strings.Contains(r.Stderr, `unknown field "spec.bogus"`) {
		t.Errorf("create with an unknown field (strict): err %v stdout %q stderr %q; want failure mentioning unknown field \"spec.bogus\"", r.Err, r.Stdout, r.Stderr)
	}
	if r := s.Kubectl(t, "get", "widget", "b", "-n", "fv"); exitCode(r.Err) == 0 {
		t.Errorf("the refused widget was created: %s", r.Stdout)
	}

	// --validate=warn: created, with a warning naming the field
	r = s.Kubectl(t, "create", "--validate=warn", "-f", bogus)
	if r.Err != nil || !strings.Contains(r.Stderr, `unknown field "spec.bogus"`) {
		t.Errorf("create --validate=warn: err %v stderr %q; want success with a warning about unknown field \"spec.bogus\"", r.Err, r.Stderr)
	}
	s.MustKubectl(t, "delete", "widget", "b", "-n", "fv")

	// --validate=false: created, and the unknown field pruned
	out := s.MustKubectl(t, "create", "--validate=false", "-f", bogus)
	if !strings.Contains(out, "widget.example.dev/b created") {
		t.Errorf("create --validate=false: output %q", out)
	}
	out = s.MustKubectl(t, "get", "widget", "b", "-n", "fv", "-o", "json")
	w := decode(t, out)
	if _, found := w.Object["spec"].(map[string]any)["bogus"]; found || num(t, w, "spec", "size") != 1 {
		t.Errorf("stored widget spec = %v, want size 1 and the unknown field pruned", w.Object["spec"])
	}

	// a schema violation is refused whatever the validation level
	r = s.Kubectl(t, "create", "--validate=false", "-f", writeFile(t, "neg.yaml", `apiVersion: example.dev/v1
kind: Widget
metadata: {name: neg, namespace: fv}
spec: {size: -1}
`))
	if r.Err == nil || !strings.Contains(r.Stderr, "Invalid") || !strings.Contains(r.Stderr, "spec.size") {
		t.Errorf("create with spec.size -1: err %v stderr %q; want an Invalid error on spec.size", r.Err, r.Stderr)
	}
}

// Imperative commands send built-in types as protobuf (kubectl's typed
// clients prefer it), unlike create -f, which sends JSON.
func TestKubectlImperative(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)

	out := s.MustKubectl(t, "create", "namespace", "imp")
	if !strings.Contains(out, "namespace/imp created") {
		t.Errorf("create namespace imp: output %q", out)
	}
	out = s.MustKubectl(t, "create", "configmap", "c", "-n", "imp", "--from-literal=k=v")
	if !strings.Contains(out, "configmap/c created") {
		t.Errorf("create configmap: output %q", out)
	}
	if out := s.MustKubectl(t, "get", "cm", "c", "-n", "imp", "-o", "jsonpath={.data.k}"); out != "v" {
		t.Errorf("get cm c -o jsonpath={.data.k} = %q, want v", out)
	}
	out = s.MustKubectl(t, "label", "cm", "c", "-n", "imp", "tier=gold")
	if !strings.Contains(out, "configmap/c labeled") {
		t.Errorf("label cm: output %q", out)
	}
	if out := s.MustKubectl(t, "get", "cm", "-n", "imp", "-l", "tier=gold", "-o", "name"); strings.TrimSpace(out) != "configmap/c" {
		t.Errorf("get cm -l tier=gold -o name = %q, want configmap/c", out)
	}
	out = s.MustKubectl(t, "get", "ns")
	rows := parseTable(t, out)
	status := map[string]string{}
	for _, r := range rows {
		status[r["NAME"]] = r["STATUS"]
	}
	if status["default"] != "Active" || status["imp"] != "Active" {
		t.Errorf("get ns: %v, want default and imp Active\n%s", status, out)
	}
}
