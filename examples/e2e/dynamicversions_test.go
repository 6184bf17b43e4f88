package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Gizmos of examples/dynamic in two versions: v1 has spec.color, v2 has it
// as spec.paint.color, which the definition's field move converts.
const (
	gizmoSchemaV1 = `{"type":"object","properties":{"spec":{"type":"object","properties":{
		"name":{"type":"string"},"color":{"type":"string"}}}}}`
	gizmoSchemaV2 = `{"type":"object","properties":{"spec":{"type":"object","properties":{
		"name":{"type":"string"},"paint":{"type":"object","properties":{"color":{"type":"string"}}}}}}}`
	gizmoHead  = `"group":"toys.example.com","plural":"gizmos","kind":"Gizmo","namespaced":true`
	gizmoMoves = `{"strategy":"FieldMoves","hub":"v1","fieldMoves":[{"version":"v2","path":"spec.paint.color","hubPath":"spec.color"}]}`
)

// gizmoTypes is the definition of gizmos in v1 and v2; v1Extra and v2Extra
// are the versions' served, storage and deprecated fields.
func gizmoTypes(v1Extra, v2Extra string) string {
	return fmt.Sprintf(`{%s,"versions":[{"name":"v1","schema":%s,%s},{"name":"v2","schema":%s,%s}],"conversion":%s}`,
		gizmoHead, gizmoSchemaV1, v1Extra, gizmoSchemaV2, v2Extra, gizmoMoves)
}

// TestDynamicVersionsKubectl takes a type of examples/dynamic from one
// version to two while kubectl uses it: objects applied in either version
// read in both with the moved field in place, the storage version moves to
// v2, v1 is deprecated (kubectl prints the warning) and then unserved
// (kubectl no longer finds it), and leaving v1 out is refused.
func TestDynamicVersionsKubectl(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServerWith(t, serverOptions{dynamic: true})
	put := func(def string) {
		t.Helper()
		if code, body := putType(t, s, "gizmos", def); code != http.StatusNoContent {
			t.Fatalf("PUT /types/gizmos: %d %s", code, body)
		}
		// kubectl keeps discovery in its cache for hours, and refreshes it
		// only for a resource it does not know: a changed preferred
		// version would go unseen, as after a CRD's change.
		if err := os.RemoveAll(filepath.Join(s.kubectlHome, "cache")); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	manifest := func(name, doc string) string {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	get := func(resource, name, jsonpath, want string) {
		t.Helper()
		if got := s.MustKubectl(t, "get", resource, name, "-o", "jsonpath="+jsonpath); got != want {
			t.Errorf("kubectl get %s %s -o jsonpath=%s: %q, want %q", resource, name, jsonpath, got, want)
		}
	}

	put(`{` + gizmoHead + `,"version":"v1","schema":` + gizmoSchemaV1 + `}`)
	g1 := manifest("g1", "apiVersion: toys.example.com/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: default}\nspec: {name: first, color: red}\n")
	if out := s.MustKubectl(t, "apply", "-f", g1); out != "gizmo.toys.example.com/g1 created\n" {
		t.Fatalf("kubectl apply g1: %q", out)
	}

	put(gizmoTypes(`"served":true,"storage":true`, `"served":true,"storage":false`))
	// The preferred version, which kubectl reads a bare "gizmo" in, is v2.
	get("gizmo", "g1", "{.apiVersion} {.spec.paint.color}", "toys.example.com/v2 red")
	get("gizmos.v1.toys.example.com", "g1", "{.apiVersion} {.spec.color}", "toys.example.com/v1 red")
	g2 := manifest("g2", "apiVersion: toys.example.com/v2\nkind: Gizmo\nmetadata: {name: g2, namespace: default}\nspec: {name: second, paint: {color: blue}}\n")
	if out := s.MustKubectl(t, "apply", "-f", g2); out != "gizmo.toys.example.com/g2 created\n" {
		t.Fatalf("kubectl apply g2: %q", out)
	}
	get("gizmos.v1.toys.example.com", "g2", "{.spec.color}", "blue")

	// Leaving v1 out is refused: g1 and g2 are stored in it.
	code, body := putType(t, s, "gizmos", `{`+gizmoHead+`,"versions":[{"name":"v2","served":true,"storage":true,"schema":`+gizmoSchemaV2+`}],"conversion":`+gizmoMoves+`}`)
	const want = "registry: gizmos.toys.example.com: objects may still be stored in version v1: keep it among the versions (Unserved if it is no longer served) until a migration to v2 has finished"
	if msg := invalidMessage(t, code, body); msg != want {
		t.Errorf("PUT without v1: %d %s\nwant the message %s", code, body, want)
	}

	// v2 becomes the storage version, v1 is deprecated: kubectl prints the
	// warning, and writes through v1 (client-side and server-side apply)
	// read back through v2.
	put(gizmoTypes(`"served":true,"storage":false,"deprecated":true`, `"served":true,"storage":true`))
	const warning = "Warning: toys.example.com/v1 Gizmo is deprecated; use toys.example.com/v2 Gizmo\n"
	r := s.Kubectl(t, "get", "gizmos.v1.toys.example.com", "g1", "-o", "jsonpath={.spec.color}")
	if r.Err != nil || r.Stdout != "red" || r.Stderr != warning {
		t.Errorf("kubectl get through the deprecated v1: %v, stdout %q, stderr %q; want red and %q", r.Err, r.Stdout, r.Stderr, warning)
	}
	s.MustKubectl(t, "apply", "-f", manifest("g1", strings.Replace(readFile(t, g1), "red", "green", 1)))
	get("gizmo", "g1", "{.spec.paint.color}", "green")
	g3 := manifest("g3", "apiVersion: toys.example.com/v1\nkind: Gizmo\nmetadata: {name: g3, namespace: default}\nspec: {name: third, color: yellow}\n")
	s.MustKubectl(t, "apply", "--server-side", "-f", g3)
	get("gizmo", "g3", "{.spec.paint.color}", "yellow")

	// v1 is no longer served: kubectl cannot find it, every object lists
	// through v2.
	put(gizmoTypes(`"served":false,"storage":false`, `"served":true,"storage":true`))
	if r := s.Kubectl(t, "get", "gizmos.v1.toys.example.com", "g1"); r.Err == nil {
		t.Errorf("kubectl get through the unserved v1 succeeded: %q", r.Stdout)
	}
	if out := s.MustKubectl(t, "get", "gizmos", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.paint.color} {end}"); out != "g1=green g2=blue g3=yellow " {
		t.Errorf("kubectl get gizmos through v2: %q", out)
	}

	// Once the migration has moved every object to v2, v1 can go.
	crd := "customresourcedefinitions.apiextensions.k8s.io"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := s.MustKubectl(t, "get", crd, "gizmos.toys.example.com", "-o", "jsonpath={.status.storedVersions}")
		if got == `["v2"]` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the migration did not complete: storedVersions %s", got)
		}
	}
	put(`{` + gizmoHead + `,"versions":[{"name":"v2","served":true,"storage":true,"schema":` + gizmoSchemaV2 + `}],"conversion":{"strategy":"None"}}`)
	if out := s.MustKubectl(t, "get", "gizmos", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.paint.color} {end}"); out != "g1=green g2=blue g3=yellow " {
		t.Errorf("kubectl get gizmos with v2 alone: %q", out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
