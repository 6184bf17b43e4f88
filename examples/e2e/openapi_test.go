package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/discovery"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
	"github.com/kapi-dev/kapi/storage/badger"
)

// The media types of the protobuf OpenAPI v2 document: client-go's
// discovery OpenAPISchema() asks for the first, kube-apiserver answers with
// the second.
const (
	acceptOpenAPIV2Protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	openAPIV2ProtobufType   = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// TestOpenAPIV2Protobuf: /openapi/v2 in protobuf is the gnostic Document
// that kube-apiserver would serve for kapi's JSON document (kube-openapi
// encodes openapi_v2.ParseDocument(json)): equal as messages, and byte for
// byte as proto.Marshal writes it. A wrong field number, a wrong oneof
// branch or a different Any.yaml fails here.
func TestOpenAPIV2Protobuf(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	get := func(accept string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", s.URL+"/openapi/v2", nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	read := func(resp *http.Response) []byte {
		t.Helper()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}

	jr := get("application/json")
	jsonDoc := read(jr)
	if jr.StatusCode != 200 || jr.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON: %d %q", jr.StatusCode, jr.Header.Get("Content-Type"))
	}
	pr := get(acceptOpenAPIV2Protobuf)
	pbDoc := read(pr)
	if pr.StatusCode != 200 || pr.Header.Get("Content-Type") != openAPIV2ProtobufType {
		t.Fatalf("protobuf: %d %q %.200q", pr.StatusCode, pr.Header.Get("Content-Type"), pbDoc)
	}
	etag := pr.Header.Get("Etag")
	if etag == "" || etag != jr.Header.Get("Etag") {
		t.Errorf("ETags: protobuf %q, JSON %q; want the same, set", etag, jr.Header.Get("Etag"))
	}
	if r := get(acceptOpenAPIV2Protobuf, "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", r.StatusCode)
	}
	// The newer media type, and protobuf preferred over JSON by q-value.
	for _, accept := range []string{openAPIV2ProtobufType, "application/json;q=0.5, " + acceptOpenAPIV2Protobuf} {
		if r := get(accept); r.StatusCode != 200 || r.Header.Get("Content-Type") != openAPIV2ProtobufType {
			t.Errorf("Accept %q: %d %q", accept, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}

	got, want := compareOpenAPIV2(t, jsonDoc, pbDoc)

	// The parts kubectl reads, checked by hand as well.
	if got.Swagger != "2.0" || got.Info.GetTitle() != "Kubernetes" {
		t.Errorf("swagger %q, info %v", got.Swagger, got.Info)
	}
	// The definition of a kind is found by its GVK extension, as kubectl
	// does.
	var ssar *openapi_v2.Schema
	var ssarName string
	for _, d := range got.GetDefinitions().GetAdditionalProperties() {
		if vendorExtension(d.Value.VendorExtension, "x-kubernetes-group-version-kind") ==
			"- group: authorization.k8s.io\n  kind: SelfSubjectAccessReview\n  version: v1\n" {
			ssar, ssarName = d.Value, d.Name
		}
	}
	if ssar == nil {
		t.Fatalf("no definition with the GVK of SelfSubjectAccessReview among %d", len(got.GetDefinitions().GetAdditionalProperties()))
	}
	if props := ssar.GetProperties().GetAdditionalProperties(); len(props) == 0 {
		t.Errorf("SelfSubjectAccessReview has no properties")
	}
	var post *openapi_v2.Operation
	for _, p := range got.GetPaths().GetPath() {
		if p.Name == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" {
			post = p.Value.GetPost()
		}
	}
	if post == nil {
		t.Fatal("no POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
	}
	if a := vendorExtension(post.VendorExtension, "x-kubernetes-action"); a != "post\n" {
		t.Errorf("x-kubernetes-action %q", a)
	}
	var body *openapi_v2.BodyParameter
	for _, p := range post.Parameters {
		if b := p.GetParameter().GetBodyParameter(); b != nil {
			body = b
		}
	}
	if body == nil || body.GetSchema().GetXRef() != "#/definitions/"+ssarName {
		t.Errorf("POST body parameter %v", body)
	}

	// client-go's own download and parse.
	dc, err := discovery.NewDiscoveryClientForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	if !proto.Equal(doc, want) {
		t.Errorf("OpenAPISchema() differs from the JSON document")
	}
}

// compareOpenAPIV2 decodes the protobuf document and checks it against
// gnostic's parse of the JSON document: equal messages, and the same bytes
// as proto.Marshal writes.
func compareOpenAPIV2(t *testing.T, jsonDoc, pbDoc []byte) (got, want *openapi_v2.Document) {
	t.Helper()
	got = &openapi_v2.Document{}
	if err := proto.Unmarshal(pbDoc, got); err != nil {
		t.Fatalf("proto.Unmarshal: %v", err)
	}
	want, err := openapi_v2.ParseDocument(jsonDoc)
	if err != nil {
		t.Fatalf("gnostic cannot parse the JSON document: %v", err)
	}
	if !proto.Equal(got, want) {
		for _, d := range documentDiffs(got, want) {
			t.Error(d)
		}
		t.Fatal("the protobuf document differs from gnostic's parse of the JSON document")
	}
	wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pbDoc, wantBytes) {
		t.Errorf("equal messages, but the bytes differ from proto.Marshal's (%d and %d bytes)", len(pbDoc), len(wantBytes))
	}
	return got, want
}

// richSchema uses every schema keyword Swagger 2.0 shares with kapi's
// structural schemas, the x-kubernetes extensions, and values whose YAML
// needs quoting.
const richSchema = `{"type":"object","description":"A gadget.","required":["spec"],"properties":{
 "spec":{"type":"object","title":"Spec","required":["mode"],"properties":{
  "mode":{"type":"string","enum":["fast","slow","true","1",""],"default":"fast","pattern":"^[a-z]+$","maxLength":10,"minLength":1},
  "ratio":{"type":"number","format":"double","minimum":0.5,"maximum":1e3,"exclusiveMaximum":true,"exclusiveMinimum":true,"multipleOf":0.25,"default":1.5},
  "count":{"type":"integer","format":"int32","default":0,"enum":[1,2,3],"minimum":-5},
  "labels":{"type":"object","additionalProperties":{"type":"string"},"maxProperties":5,"minProperties":1,"x-kubernetes-map-type":"granular"},
  "free":{"type":"object","additionalProperties":true},
  "any":{"x-kubernetes-preserve-unknown-fields":true},
  "port":{"x-kubernetes-int-or-string":true},
  "list":{"type":"array","items":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}},"maxItems":3,"minItems":1,
   "x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["a"],"example":[{"a":"b"}],"x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"a"},
  "embedded":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true},
  "note":{"type":"string","description":"multi\nline: \"quoted\" <html> & \u00fcn\u00efcode: - [x] {y} #z"},
  "when":{"type":"string","format":"date-time","default":"2020-01-01T00:00:00Z"},
  "obj":{"type":"object","default":{"b":[1,"x",true,null,2.5,"null","yes"],"a":{}},"x-kubernetes-map-type":"atomic","x-kubernetes-preserve-unknown-fields":true},
  "validated":{"type":"string","x-kubernetes-validations":[{"rule":"self.size() > 0","message":"must not be empty"}]}}},
 "status":{"type":"object","properties":{"phase":{"type":"string"}}}}}`

// TestOpenAPIV2ProtobufSchemas: a kapi server in this process with a type
// whose schema uses every keyword; its protobuf document must be gnostic's
// parse of its JSON document.
func TestOpenAPIV2ProtobufSchemas(t *testing.T) {
	t.Parallel()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api, err := apiserver.New(t.Context(), apiserver.Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	var sch schema.Schema
	if err := json.Unmarshal([]byte(richSchema), &sch); err != nil {
		t.Fatal(err)
	}
	for _, res := range []registry.Resource{registry.ConfigMaps(), {
		Group: "gadgets.example.dev", Version: "v1alpha1", Resource: "gadgets", Kind: "Gadget", Namespaced: true, Schema: &sch,
		Subresources: registry.Subresources{Status: true},
	}} {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	get := func(accept string) []byte {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/openapi/v2", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /openapi/v2 %s: %d %v %.300s", accept, resp.StatusCode, err, b)
		}
		return b
	}
	got, _ := compareOpenAPIV2(t, get("application/json"), get(acceptOpenAPIV2Protobuf))
	var gadget *openapi_v2.Schema
	for _, d := range got.GetDefinitions().GetAdditionalProperties() {
		if d.Name == "dev.example.gadgets.v1alpha1.Gadget" {
			gadget = d.Value
		}
	}
	spec := namedSchema(namedSchema(gadget, "spec"), "ratio")
	if spec.GetMaximum() != 1000 || !spec.GetExclusiveMaximum() || spec.GetMultipleOf() != 0.25 || spec.GetDefault().GetYaml() != "1.5\n" {
		t.Errorf("ratio: %v", spec)
	}
}

// TestOpenAPIV2KubectlValidation: kubectl validates a create-only kind (no
// PATCH operation, so no way to tell whether the server validates fields)
// on the client with the protobuf OpenAPI v2 document, as against
// kube-apiserver, once it has checked in the server's
// customresourcedefinitions (kapi's read-only view of its custom types,
// empty here) that the kind is no CRD.
func TestOpenAPIV2KubectlValidation(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	api, err := apiserver.New(t.Context(), apiserver.Config{Storage: store, AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: kapi
  cluster:
    server: `+ts.URL+`
contexts:
- name: kapi
  context:
    cluster: kapi
    user: anonymous
current-context: kapi
users:
- name: anonymous
  user: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) kubectlResult {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "HOME="+dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return kubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
	}
	good := filepath.Join(dir, "ssar.yaml")
	bad := filepath.Join(dir, "bad-ssar.yaml")
	for name, body := range map[string]string{
		good: "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    namespace: default\n    verb: get\n    resource: configmaps\n",
		bad:  "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    verb: get\n    resource: widgets\n    colour: red\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, validate := range []string{"--validate=true", "--validate=strict"} {
		r := kubectl("create", "-f", good, validate, "-o", "yaml")
		if r.Err != nil || !strings.Contains(r.Stdout, "allowed: true") {
			t.Errorf("kubectl create -f ssar.yaml %s: %v\n%s%s", validate, r.Err, r.Stdout, r.Stderr)
		}
	}
	// kube-apiserver's answer, word for word: the nested type is a named
	// definition.
	r := kubectl("create", "-f", bad, "-o", "yaml")
	if r.Err == nil || !strings.Contains(r.Stderr, `error validating data: ValidationError(SelfSubjectAccessReview.spec.resourceAttributes): unknown field "colour" in io.k8s.api.authorization.v1.ResourceAttributes`) {
		t.Errorf("kubectl create -f bad-ssar.yaml: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	// --validate=warn: skipped on the client, the server warns.
	r = kubectl("create", "-f", bad, "--validate=warn", "-o", "yaml")
	if r.Err != nil || !strings.Contains(r.Stderr, `Warning: unknown field "spec.resourceAttributes.colour"`) {
		t.Errorf("kubectl create -f bad-ssar.yaml --validate=warn: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
}

// namedSchema returns the schema of property name of s.
func namedSchema(s *openapi_v2.Schema, name string) *openapi_v2.Schema {
	for _, p := range s.GetProperties().GetAdditionalProperties() {
		if p.Name == name {
			return p.Value
		}
	}
	return nil
}

func vendorExtension(exts []*openapi_v2.NamedAny, name string) string {
	for _, e := range exts {
		if e.Name == name {
			return e.GetValue().GetYaml()
		}
	}
	return ""
}

// documentDiffs names the paths and definitions that differ (at most 20).
func documentDiffs(got, want *openapi_v2.Document) []string {
	var out []string
	paths := func(d *openapi_v2.Document) map[string]proto.Message {
		m := map[string]proto.Message{}
		for _, p := range d.GetPaths().GetPath() {
			m["path "+p.Name] = p.Value
		}
		for _, p := range d.GetDefinitions().GetAdditionalProperties() {
			m["definition "+p.Name] = p.Value
		}
		return m
	}
	g, w := paths(got), paths(want)
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	for n := range g {
		if _, ok := w[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if !proto.Equal(g[n], w[n]) {
			out = append(out, fmt.Sprintf("%s:\n got %v\nwant %v", n, g[n], w[n]))
		}
		if len(out) == 20 {
			break
		}
	}
	rest := func(d *openapi_v2.Document) *openapi_v2.Document {
		c := proto.Clone(d).(*openapi_v2.Document)
		c.Paths, c.Definitions = nil, nil
		return c
	}
	if !proto.Equal(rest(got), rest(want)) {
		out = append(out, fmt.Sprintf("document without paths and definitions:\n got %v\nwant %v", rest(got), rest(want)))
	}
	return out
}
