package e2e

import (
	"strings"
	"testing"
)

// Server-side apply through two versions with kubectl: v1's spec.color and
// v2's spec.appearance.color are one field, so a second manager applying it
// through v2 conflicts with the first one's v1 apply, and takes it with
// --force-conflicts; each managedFields entry keeps its own apiVersion.
func TestWidgetVersionsServerSideApply(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	createNamespace(t, s.Dynamic(t), "vssa")

	v1 := writeFile(t, "v1.yaml", "apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: vssa}\nspec: {size: 1, color: red}\n")
	s.MustKubectl(t, "apply", "--server-side", "--field-manager", "team-a", "-f", v1)

	v2 := writeFile(t, "v2.yaml", "apiVersion: example.dev/v2\nkind: Widget\nmetadata: {name: w, namespace: vssa}\nspec: {size: 1, appearance: {color: blue}}\n")
	r := s.Kubectl(t, "apply", "--server-side", "--field-manager", "team-b", "-f", v2)
	if r.Err == nil || !strings.Contains(r.Stderr, "conflict") || !strings.Contains(r.Stderr, `"team-a"`) || !strings.Contains(r.Stderr, ".spec.color") {
		t.Fatalf("apply through v2 of the field team-a applied through v1: err %v stderr %q, want a conflict with team-a over .spec.color", r.Err, r.Stderr)
	}
	if got := s.MustKubectl(t, "get", "widgets.v1.example.dev", "w", "-n", "vssa", "-o", "jsonpath={.spec.color}"); got != "red" {
		t.Errorf("after the refused apply, spec.color = %q, want red", got)
	}

	s.MustKubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "team-b", "-f", v2)
	if got := s.MustKubectl(t, "get", "widgets.v1.example.dev", "w", "-n", "vssa", "-o", "jsonpath={.spec.color}"); got != "blue" {
		t.Errorf("after the forced apply through v2, v1's spec.color = %q, want blue", got)
	}
	entries := s.MustKubectl(t, "get", "widgets.v2.example.dev", "w", "-n", "vssa", "--show-managed-fields",
		"-o", `jsonpath={range .metadata.managedFields[*]}{.manager}={.apiVersion}{"\n"}{end}`)
	if !strings.Contains(entries, "team-a=example.dev/v1\n") || !strings.Contains(entries, "team-b=example.dev/v2\n") {
		t.Errorf("managedFields entries (manager=apiVersion):\n%s", entries)
	}
	// team-a no longer owns the color: its next apply through v1 without it
	// does not remove it.
	s.MustKubectl(t, "apply", "--server-side", "--field-manager", "team-a", "-f",
		writeFile(t, "v1b.yaml", "apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: vssa}\nspec: {size: 1}\n"))
	if got := s.MustKubectl(t, "get", "widgets.v2.example.dev", "w", "-n", "vssa", "-o", "jsonpath={.spec.appearance.color}"); got != "blue" {
		t.Errorf("after team-a's apply without the color, v2's spec.appearance.color = %q, want blue (team-b's)", got)
	}
}
