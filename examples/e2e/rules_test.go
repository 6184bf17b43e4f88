package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gadgetType is an examples/dynamic definition of a namespaced type whose
// schema has validation rules as kubebuilder's XValidation markers write
// them: a cross-field rule on spec, a transition rule, a messageExpression,
// a reason with a fieldPath, and a rule over a list bounded by maxItems (and
// its items by maxLength), which keeps the rule's estimated cost in budget.
// Its keys are in controller-gen's order. The arguments are the plural, the
// kind, and the most replicas allowed.
const gadgetType = `group: example.dev
version: v1
plural: %[1]s
kind: %[2]s
namespaced: true
schema:
  properties:
    spec:
      properties:
        maxReplicas: {type: integer}
        mode:
          type: string
          x-kubernetes-validations:
          - {message: mode is immutable, rule: self == oldSelf}
        name:
          maxLength: 32
          type: string
          x-kubernetes-validations:
          - messageExpression: "'name ' + self + ' is reserved: it starts with kube-'"
            rule: "!self.startsWith('kube-')"
        owner: {type: string}
        replicas:
          type: integer
          x-kubernetes-validations:
          - {message: "replicas must be at most %[3]d", rule: "self <= %[3]d"}
        tags:
          items: {maxLength: 16, type: string}
          maxItems: 4
          type: array
          x-kubernetes-validations:
          - {message: every tag must start with t-, rule: "self.all(t, t.startsWith('t-'))"}
      required: [maxReplicas, mode, replicas]
      type: object
      x-kubernetes-validations:
      - message: replicas must not exceed maxReplicas
        rule: self.replicas <= self.maxReplicas
      - fieldPath: .owner
        message: root may not own a gadget
        reason: FieldValueForbidden
        rule: "!has(self.owner) || self.owner != 'root'"
  type: object
`

// putType defines or redefines a type through the admin API of
// examples/dynamic (beside the API's /kube) and returns the status code and
// the body of its answer.
func putType(t *testing.T, s *server, name, definition string) (int, string) {
	t.Helper()
	code, body := s.DoURL(t, http.MethodPut, strings.TrimSuffix(s.URL, "/kube")+"/types/"+name, []byte(definition))
	return code, string(body)
}

// invalidMessage returns the message of the answer of the admin API of
// examples/dynamic to a refused definition: a 422 Status, reason Invalid
// ("" and a failed test otherwise).
func invalidMessage(t *testing.T, code int, body string) string {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusUnprocessableEntity ||
		st.Kind != "Status" || st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid {
		t.Errorf("a refused definition: %d %s (%v), want a 422 Status with reason Invalid", code, body, err)
		return ""
	}
	return st.Message
}

// TestCELRulesKubectl defines a type with validation rules in
// examples/dynamic, as a CRD would, and writes it with the real kubectl:
// every write path enforces the rules, kubectl prints kube-apiserver's 422
// messages, a tightened rule ratchets, and a rule that does not compile
// refuses the definition.
//
// The lines are the ones kube-apiserver v1.36.3 prints for the same CRD and
// writes: the value after "Invalid value:" for a rule on a scalar, none for
// one on an object or a list, and the ratcheted writes' warnings.
func TestCELRulesKubectl(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServerWith(t, serverOptions{dynamic: true})
	if code, body := putType(t, s, "gadgets", fmt.Sprintf(gadgetType, "gadgets", "Gadget", 10)); code != http.StatusNoContent {
		t.Fatalf("PUT /types/gadgets: %d %s", code, body)
	}
	dir := t.TempDir()
	manifest := func(kind, name, spec string) string {
		path := filepath.Join(dir, name+".yaml")
		doc := fmt.Sprintf("apiVersion: example.dev/v1\nkind: %s\nmetadata: {name: %s, namespace: default}\nspec: %s\n", kind, name, spec)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// refused runs kubectl and wants it to fail with exactly want (one line
	// per failed rule) on stderr, which kubectl prints from the 422's causes.
	refused := func(t *testing.T, want string, args ...string) {
		t.Helper()
		r := s.Kubectl(t, args...)
		if exitCode(r.Err) != 1 || r.Stderr != want+"\n" {
			t.Errorf("kubectl %s: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and stderr:\n%s",
				strings.Join(args, " "), exitCode(r.Err), r.Stdout, r.Stderr, want)
		}
	}
	const crossField = `The Gadget "g2" is invalid: spec: Invalid value: replicas must not exceed maxReplicas`
	const immutable = `The Gadget "g1" is invalid: spec.mode: Invalid value: "slow": mode is immutable`

	valid := manifest("Gadget", "g1", "{replicas: 1, maxReplicas: 3, mode: fast, name: one, tags: [t-a]}")
	if out := s.MustKubectl(t, "apply", "-f", valid); out != "gadget.example.dev/g1 created\n" {
		t.Fatalf("kubectl apply of a valid Gadget: %q", out)
	}
	version := func() string {
		return s.MustKubectl(t, "get", "gadget", "g1", "-o", "jsonpath={.metadata.resourceVersion} {.spec}")
	}
	stored := version()

	t.Run("Writes", func(t *testing.T) {
		tooMany := manifest("Gadget", "g2", "{replicas: 5, maxReplicas: 3, mode: fast}")
		newMode := manifest("Gadget", "g1", "{replicas: 1, maxReplicas: 3, mode: slow, name: one, tags: [t-a]}")
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"apply create", []string{"apply", "-f", tooMany}, crossField},
			{"apply update", []string{"apply", "-f", newMode}, immutable},
			{"server-side apply create", []string{"apply", "--server-side", "-f", tooMany}, crossField},
			{"server-side apply update", []string{"apply", "--server-side", "--force-conflicts", "-f", newMode}, immutable},
			{"dry run create", []string{"apply", "--dry-run=server", "-f", tooMany}, crossField},
			{"dry run update", []string{"apply", "--dry-run=server", "-f", newMode}, immutable},
			{"dry run server-side apply", []string{"apply", "--server-side", "--dry-run=server", "-f", tooMany}, crossField},
			{"create", []string{"create", "-f", tooMany}, crossField},
			{"merge patch", []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"mode":"slow"}}`}, immutable},
			{"json patch", []string{"patch", "gadget", "g1", "--type=json", "-p", `[{"op":"replace","path":"/spec/mode","value":"slow"}]`}, immutable},
			{"messageExpression", []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"name":"kube-proxy"}}`},
				`The Gadget "g1" is invalid: spec.name: Invalid value: "kube-proxy": name kube-proxy is reserved: it starts with kube-`},
			{"reason and fieldPath", []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"owner":"root"}}`},
				`The Gadget "g1" is invalid: spec.owner: Forbidden: root may not own a gadget`},
			{"list rule", []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"tags":["t-a","b"]}}`},
				`The Gadget "g1" is invalid: spec.tags: Invalid value: every tag must start with t-`},
		} {
			t.Run(c.name, func(t *testing.T) { refused(t, c.want, c.args...) })
		}

		t.Run("replace", func(t *testing.T) {
			// What kubectl edit does: get the object, change it, put it back.
			var obj map[string]any
			if err := json.Unmarshal([]byte(s.MustKubectl(t, "get", "gadget", "g1", "-o", "json")), &obj); err != nil {
				t.Fatal(err)
			}
			spec := obj["spec"].(map[string]any)
			spec["replicas"], spec["mode"] = 9, "slow"
			b, _ := json.Marshal(obj)
			edited := filepath.Join(dir, "edited.json")
			if err := os.WriteFile(edited, b, 0o600); err != nil {
				t.Fatal(err)
			}
			refused(t, `The Gadget "g1" is invalid: 
* spec: Invalid value: replicas must not exceed maxReplicas
* spec.mode: Invalid value: "slow": mode is immutable`, "replace", "-f", edited)
		})

		if got := version(); got != stored {
			t.Errorf("refused writes changed g1: %s, was %s", got, stored)
		}
		if r := s.Kubectl(t, "get", "gadget", "g2"); exitCode(r.Err) != 1 || !strings.Contains(r.Stderr, `gadgets.example.dev "g2" not found`) {
			t.Errorf("g2 was stored: %+v", r)
		}
		if out := s.MustKubectl(t, "patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"replicas":3,"tags":["t-a","t-b"]}}`); out != "gadget.example.dev/g1 patched\n" {
			t.Errorf("a valid patch: %q", out)
		}
	})

	t.Run("Ratcheting", func(t *testing.T) {
		// Stored under "replicas <= 10", written again under "replicas <= 5".
		if code, body := putType(t, s, "sprockets", fmt.Sprintf(gadgetType, "sprockets", "Sprocket", 10)); code != http.StatusNoContent {
			t.Fatalf("PUT /types/sprockets: %d %s", code, body)
		}
		s.MustKubectl(t, "apply", "-f", manifest("Sprocket", "s1", "{replicas: 8, maxReplicas: 10, mode: fast, name: one}"))
		if code, body := putType(t, s, "sprockets", fmt.Sprintf(gadgetType, "sprockets", "Sprocket", 5)); code != http.StatusNoContent {
			t.Fatalf("tightening the rule: %d %s", code, body)
		}
		tightened := func(name string, replicas int) string {
			return fmt.Sprintf(`The Sprocket %q is invalid: spec.replicas: Invalid value: %d: replicas must be at most 5`, name, replicas)
		}
		// Updates that leave replicas alone pass, whether they change
		// metadata only or other fields of spec; the rule the object still
		// breaks comes back as a warning.
		for _, args := range [][]string{
			{"label", "sprocket", "s1", "tier=gold"},
			{"annotate", "sprocket", "s1", "note=kept"},
			{"patch", "sprocket", "s1", "--type=merge", "-p", `{"spec":{"name":"renamed"}}`},
		} {
			const warning = "Warning: spec.replicas: Invalid value: 8: replicas must be at most 5\n"
			if r := s.Kubectl(t, args...); r.Err != nil || r.Stderr != warning {
				t.Errorf("kubectl %s under the tightened rule: %v\nstderr %q, want %q", strings.Join(args, " "), r.Err, r.Stderr, warning)
			}
		}
		refused(t, tightened("s1", 7), "patch", "sprocket", "s1", "--type=merge", "-p", `{"spec":{"replicas":7}}`)
		refused(t, tightened("s1", 9), "apply", "-f", manifest("Sprocket", "s1", "{replicas: 9, maxReplicas: 10, mode: fast, name: renamed}"))
		refused(t, tightened("s2", 8), "apply", "-f", manifest("Sprocket", "s2", "{replicas: 8, maxReplicas: 10, mode: fast}"))
		if out := s.MustKubectl(t, "get", "sprocket", "s1", "-o", "jsonpath={.metadata.labels.tier} {.spec.replicas} {.spec.name}"); out != "gold 8 renamed" {
			t.Errorf("s1 after the ratcheted writes: %q", out)
		}
		s.MustKubectl(t, "patch", "sprocket", "s1", "--type=merge", "-p", `{"spec":{"replicas":5}}`)
	})

	t.Run("RegistrationErrors", func(t *testing.T) {
		// A definition whose rule does not compile is refused with the rule's
		// path, index and the compiler's message; the type stays as it was.
		broken := strings.Replace(fmt.Sprintf(gadgetType, "gadgets", "Gadget", 10), "rule: self == oldSelf}", "rule: self == oldSelf.nope()}", 1)
		code, body := putType(t, s, "gadgets", broken)
		want := `registry: gadgets.example.dev: invalid validation rules: spec.mode: x-kubernetes-validations[0]: rule: Invalid value: "self == oldSelf.nope()": compilation failed: ERROR: <input>:1:21: undeclared reference to 'nope' (in container '')
 | self == oldSelf.nope()
 | ....................^`
		if msg := invalidMessage(t, code, body); msg != want {
			t.Errorf("PUT of a rule that does not compile: %d\n%s\nwant a 422 Status with the message\n%s", code, body, want)
		}
		notBool := strings.Replace(fmt.Sprintf(gadgetType, "widgets", "Widget", 10), "rule: self.replicas <= self.maxReplicas", "rule: self.replicas", 1)
		code, body = putType(t, s, "widgets", notBool)
		want = `registry: widgets.example.dev: invalid validation rules: spec: x-kubernetes-validations[0]: rule: Invalid value: "self.replicas": cel expression must evaluate to a bool`
		if msg := invalidMessage(t, code, body); msg != want {
			t.Errorf("PUT of a rule that is not a bool: %d\n%s\nwant a 422 Status with the message\n%s", code, body, want)
		}
		refused(t, immutable, "patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"mode":"slow"}}`)
		if r := s.Kubectl(t, "get", "widgets"); exitCode(r.Err) != 1 || !strings.Contains(r.Stderr, `the server doesn't have a resource type "widgets"`) {
			t.Errorf("a refused type is served: %+v", r)
		}
	})
}
