package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// ruledSchema has x-kubernetes-validations on spec, on a field, with a
// transition rule, and under status.
const ruledSchema = `{"type":"object","properties":{
 "spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.replicas <= self.maxReplicas","message":"replicas must not exceed maxReplicas","fieldPath":".replicas"}],
  "properties":{"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"},
   "mode":{"type":"string","x-kubernetes-validations":[{"rule":"self == oldSelf","message":"mode is immutable"}]}}},
 "status":{"type":"object","properties":{"ready":{"type":"integer","x-kubernetes-validations":[{"rule":"self >= 0","reason":"FieldValueForbidden","message":"ready cannot be negative"}]}}}}}`

func ruledGadgets(t *testing.T, sch string) registry.Resource {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(sch), &s); err != nil {
		t.Fatal(err)
	}
	return registry.Resource{Group: "example.dev", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true,
		Schema: &s, Subresources: registry.Subresources{Status: true}}
}

// TestValidationRules: every write path enforces the rules with
// kube-apiserver's 422: create, dry run, update, the patch types, apply and
// the status subresource; a transition rule runs on updates only.
func TestValidationRules(t *testing.T) {
	api, ts := newTestServer(t)
	if err := api.Register(ruledGadgets(t, ruledSchema)); err != nil {
		t.Fatal(err)
	}
	const path = "/apis/example.dev/v1/namespaces/default/gadgets"
	invalid := func(r response, want string) {
		t.Helper()
		st := r.status(t, 422, "Invalid")
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q, want it to contain %q", st.Message, want)
		}
	}
	body := `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"replicas":5,"maxReplicas":3,"mode":"a"}}`
	invalid(do(t, ts, "POST", path, body), `Gadget.example.dev "g" is invalid: spec.replicas: Invalid value: replicas must not exceed maxReplicas`)
	invalid(do(t, ts, "POST", path+"?dryRun=All", body), "replicas must not exceed maxReplicas")
	ok := strings.Replace(body, `"replicas":5`, `"replicas":2`, 1)
	if r := do(t, ts, "POST", path, ok); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	invalid(do(t, ts, "PATCH", path+"/g", `{"spec":{"replicas":9}}`, "Content-Type", "application/merge-patch+json"), "replicas must not exceed maxReplicas")
	invalid(do(t, ts, "PATCH", path+"/g", `[{"op":"replace","path":"/spec/mode","value":"b"}]`, "Content-Type", "application/json-patch+json"),
		`spec.mode: Invalid value: "b": mode is immutable`)
	invalid(do(t, ts, "PATCH", path+"/g?fieldManager=me&force=true", `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"mode":"c"}}`,
		"Content-Type", "application/apply-patch+yaml"), "mode is immutable")
	cur := do(t, ts, "GET", path+"/g", "").object(t)
	cur["spec"].(map[string]any)["mode"] = "z"
	put, _ := json.Marshal(cur)
	invalid(do(t, ts, "PUT", path+"/g", string(put)), "mode is immutable")
	invalid(do(t, ts, "PATCH", path+"/g/status", `{"status":{"ready":-1}}`, "Content-Type", "application/merge-patch+json"),
		`status.ready: Forbidden: ready cannot be negative`)
	if r := do(t, ts, "PATCH", path+"/g/status", `{"status":{"ready":1}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("status: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "PATCH", path+"/g", `{"spec":{"replicas":3}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("valid patch: %d %s", r.code, r.body)
	}
}

// TestValidationRulesRatchet: a rule added after an object was stored does
// not lock it: updates that leave the failing value alone go through, with
// a warning.
func TestValidationRulesRatchet(t *testing.T) {
	api, ts := newTestServer(t)
	loose := strings.Replace(ruledSchema, `"properties":{"replicas":{"type":"integer"}`, `"properties":{"replicas":{"type":"integer","x-kubernetes-validations":[{"rule":"self < 100"}]}`, 1)
	if err := api.Register(ruledGadgets(t, loose)); err != nil {
		t.Fatal(err)
	}
	const path = "/apis/example.dev/v1/namespaces/default/gadgets"
	if r := do(t, ts, "POST", path, `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"replicas":50,"maxReplicas":60,"mode":"a"}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	strict := strings.Replace(loose, `"self < 100"`, `"self < 10"`, 1)
	if err := api.Register(ruledGadgets(t, strict)); err != nil {
		t.Fatal(err)
	}
	r := do(t, ts, "PATCH", path+"/g", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != 200 {
		t.Fatalf("an update that leaves replicas alone: %d %s", r.code, r.body)
	}
	// As kube-apiserver, the rule the object still breaks is a warning.
	if w := r.header.Get("Warning"); !strings.Contains(w, "spec.replicas: Invalid value: 50: failed rule: self < 10") {
		t.Errorf("warning %q", w)
	}
	r = do(t, ts, "PATCH", path+"/g", `{"spec":{"replicas":40}}`, "Content-Type", "application/merge-patch+json")
	if st := r.status(t, 422, "Invalid"); !strings.Contains(st.Message, "failed rule: self < 10") {
		t.Errorf("changing replicas: %s", st.Message)
	}
}

// TestValidationRulesRegistration: a rule that does not compile refuses
// the registration, naming it.
func TestValidationRulesRegistration(t *testing.T) {
	api, _ := newTestServer(t)
	bad := strings.Replace(ruledSchema, `"self == oldSelf"`, `"self == oldSelf.nope"`, 1)
	err := api.Register(ruledGadgets(t, bad))
	if err == nil || !strings.Contains(err.Error(), "spec.mode: x-kubernetes-validations[0]: rule") {
		t.Fatalf("got %v", err)
	}
}

// TestValidationRulesAfterSchemaErrors: when the schema already fails in a
// way rules cannot run on, kube-apiserver reports that instead of running
// them.
func TestValidationRulesAfterSchemaErrors(t *testing.T) {
	api, ts := newTestServer(t)
	sch := strings.Replace(ruledSchema, `"mode":{"type":"string",`, `"mode":{"type":"string","maxLength":3,`, 1)
	if err := api.Register(ruledGadgets(t, sch)); err != nil {
		t.Fatal(err)
	}
	r := do(t, ts, "POST", "/apis/example.dev/v1/namespaces/default/gadgets", `{"apiVersion":"example.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"replicas":5,"maxReplicas":3,"mode":"toolong"}}`)
	st := r.status(t, 422, "Invalid")
	want := `Gadget.example.dev "g" is invalid: [spec.mode: Too long: may not be more than 3 bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`
	if st.Message != want {
		t.Errorf("message\n got  %s\n want %s", st.Message, want)
	}
}
