package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// teamPolicy is opsPolicy plus a role in namespace team: ops may update
// and patch the configmap "settings" there.
var teamPolicy = strings.Replace(opsPolicy, "bindings:\n", `- name: settings-editor
  namespace: team
  rules:
  - apiGroups: [""]
    resources: [configmaps]
    resourceNames: [settings]
    verbs: [update, patch]
bindings:
- name: ops-edit-settings
  namespace: team
  role: settings-editor
  groups: [ops]
`, 1)

// The rows every authenticated user has: the basic-user reviews first,
// the paths anyone may read last.
const (
	selfReviewRows = `selfsubjectreviews.authentication.k8s.io        []                  []               [create]
selfsubjectaccessreviews.authorization.k8s.io   []                  []               [create]
selfsubjectrulesreviews.authorization.k8s.io    []                  []               [create]
`
	publicPathRows = `                                                [/healthz/*]        []               [get]
                                                [/healthz]          []               [get]
                                                [/livez/*]          []               [get]
                                                [/livez]            []               [get]
`
	probeRows = `                                                [/readyz/*]         []               [get]
                                                [/readyz]           []               [get]
                                                [/version]          []               [get]
`
	rulesHeader = "Resources                                       Non-Resource URLs   Resource Names   Verbs\n"
)

// TestKubectlAuthWhoamiAndList: kubectl auth whoami (table, JSON, YAML) and
// kubectl auth can-i --list print what they print against kube-apiserver,
// for the admin (system:masters) and for a user held to an
// --authorization-policy, whose rules in a namespace merge the cluster-wide
// bindings with the namespace's.
func TestKubectlAuthWhoamiAndList(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(teamPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, serverOptions{args: []string{"--authorization-policy", policy}})
	alice := clientCertKubeconfig(t, s, "alice", "ops")
	as := func(args ...string) string {
		return s.MustKubectl(t, append([]string{"--kubeconfig", alice}, args...)...)
	}
	stamp := regexp.MustCompile(`creationTimestamp: "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"`)
	for _, c := range []struct{ name, got, want string }{
		{"admin: auth whoami", s.MustKubectl(t, "auth", "whoami"),
			"ATTRIBUTE   VALUE\nUsername    admin\nUID         admin\nGroups      [system:masters system:authenticated]\n"},
		{"admin: auth whoami -o yaml", stamp.ReplaceAllString(s.MustKubectl(t, "auth", "whoami", "-o", "yaml"), "creationTimestamp: T"),
			"apiVersion: authentication.k8s.io/v1\nkind: SelfSubjectReview\nmetadata:\n  creationTimestamp: T\nstatus:\n  userInfo:\n" +
				"    groups:\n    - system:masters\n    - system:authenticated\n    uid: admin\n    username: admin\n"},
		{"alice: auth whoami", as("auth", "whoami"), "ATTRIBUTE   VALUE\nUsername    alice\nGroups      [ops system:authenticated]\n"},
		{"admin: auth can-i --list", s.MustKubectl(t, "auth", "can-i", "--list"), rulesHeader +
			"*.*                                             []                  []               [*]\n" +
			"                                                [*]                 []               [*]\n" +
			selfReviewRows + publicPathRows + probeRows},
		{"alice: auth can-i --list -n team", as("auth", "can-i", "--list", "-n", "team"), rulesHeader + selfReviewRows +
			"configmaps                                      []                  []               [get list]\n" +
			"                                                [/api/*]            []               [get]\n" +
			"                                                [/api]              []               [get]\n" +
			"                                                [/apis/*]           []               [get]\n" +
			"                                                [/apis]             []               [get]\n" +
			publicPathRows +
			"                                                [/openapi/*]        []               [get]\n" +
			probeRows +
			"configmaps                                      []                  [settings]       [update patch]\n"},
	} {
		if c.got != c.want {
			t.Errorf("kubectl %s:\n%s\nwant\n%s", c.name, c.got, c.want)
		}
	}
	// In another namespace the role in team does not apply.
	if out := as("auth", "can-i", "--list", "-n", "default"); strings.Contains(out, "settings") || !strings.Contains(out, "[get list]") {
		t.Errorf("alice: auth can-i --list -n default:\n%s", out)
	}
	if out := s.MustKubectl(t, "auth", "whoami", "-o", "json"); !strings.Contains(out, `"kind": "SelfSubjectReview"`) ||
		!strings.Contains(out, `"username": "admin"`) {
		t.Errorf("admin: auth whoami -o json:\n%s", out)
	}
}
