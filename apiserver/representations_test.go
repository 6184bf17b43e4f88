package apiserver

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

const (
	acceptProtobuf = "application/vnd.kubernetes.protobuf"
	acceptTableV1  = "application/json;as=Table;g=meta.k8s.io;v=v1"
	acceptPOM      = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	acceptPOML     = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

// decodeProtobuf checks the envelope of a protobuf response and decodes it
// with msg.
func decodeProtobuf(t testing.TB, r response, kind string, msg *codec.Message) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != acceptProtobuf {
		t.Fatalf("Content-Type %q, want protobuf; body %q", ct, r.body)
	}
	u, err := codec.DecodeEnvelope(r.body)
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if u.Kind != kind {
		t.Fatalf("envelope kind %q, want %q", u.Kind, kind)
	}
	obj, err := msg.Unmarshal(u.Raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	return obj
}

func protobufStatus(t testing.TB, r response, code int, reason meta.StatusReason) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %d, want %d: %q", r.code, code, r.body)
	}
	st := decodeProtobuf(t, r, "Status", codec.StatusMessage)
	if st["reason"] != string(reason) || fmt.Sprint(st["code"]) != fmt.Sprint(code) || st["status"] != "Failure" {
		t.Fatalf("protobuf Status %v, want %d %s", st, code, reason)
	}
	return st
}

func configMapProtobuf(t testing.TB, js string) string {
	t.Helper()
	raw, err := registry.ConfigMaps().Protobuf.AppendProtobuf(nil, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return string(codec.EncodeEnvelope("v1", "ConfigMap", raw))
}

func TestNegotiation(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"a"},"data":{"k":"v"}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}`)
	cmMsg := registry.ConfigMaps().Protobuf
	for _, tc := range []struct {
		path, accept string
		code         int
		ctype        string
	}{
		{cmPath + "/a", "", 200, "application/json"},
		{cmPath + "/a", "*/*", 200, "application/json"},
		{cmPath + "/a", "application/yaml", 200, "application/yaml"},
		{cmPath + "/a", "application/yaml;q=0.5, application/json", 200, "application/json"},
		{cmPath + "/a", acceptProtobuf, 200, acceptProtobuf},
		{cmPath + "/a", "application/vnd.kubernetes.protobuf, application/json", 200, acceptProtobuf},
		{cmPath, acceptProtobuf, 200, acceptProtobuf},
		{wdPath + "/w", acceptProtobuf, 406, acceptProtobuf}, // the 406 itself in protobuf
		{wdPath + "/w", "application/vnd.kubernetes.protobuf, application/json", 200, "application/json"},
		{wdPath, acceptProtobuf, 406, acceptProtobuf},
		{wdPath + "/w", "text/html", 406, "application/json"},
		{wdPath + "/nope", acceptProtobuf, 406, acceptProtobuf},
		{cmPath + "/nope", acceptProtobuf, 404, acceptProtobuf},
		{cmPath + "/nope", "application/yaml", 404, "application/yaml"},
		{cmPath + "/a", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", 406, "application/json"}, // as kube-apiserver
		{cmPath + "/a", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json", 200, "application/json"},
		{cmPath + "/a", "application/json;as=Table;g=meta.k8s.io;v=v2", 406, "application/json"},
		{"/version", acceptProtobuf, 200, "application/json"}, // /version: JSON regardless, as kube-apiserver
		{"/version", acceptTableV1, 200, "application/json"},
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", 200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"/version", "application/yaml", 200, "application/yaml"},
	} {
		r := do(t, ts, "GET", tc.path, "", "Accept", tc.accept)
		if r.code != tc.code || r.header.Get("Content-Type") != tc.ctype {
			t.Errorf("GET %s Accept %q: %d %q, want %d %q (%.200q)", tc.path, tc.accept, r.code, r.header.Get("Content-Type"), tc.code, tc.ctype, r.body)
		}
	}
	r := do(t, ts, "GET", cmPath+"/a", "", "Accept", acceptProtobuf)
	cm := decodeProtobuf(t, r, "ConfigMap", cmMsg)
	if str(cm, "metadata", "name") != "a" || str(cm, "data", "k") != "v" || str(cm, "metadata", "resourceVersion") == "" {
		t.Fatalf("protobuf ConfigMap %v", cm)
	}
	st := protobufStatus(t, do(t, ts, "GET", wdPath+"/w", "", "Accept", acceptProtobuf), 406, meta.StatusReasonNotAcceptable)
	if !strings.Contains(st["message"].(string), "application/json, application/yaml") {
		t.Fatalf("406 message %q", st["message"])
	}
	st = protobufStatus(t, do(t, ts, "GET", cmPath+"/nope", "", "Accept", acceptProtobuf), 404, meta.StatusReasonNotFound)
	if str(st, "details", "name") != "nope" || str(st, "details", "kind") != "configmaps" {
		t.Fatalf("404 details %v", st)
	}
	y := do(t, ts, "GET", cmPath+"/nope", "", "Accept", "application/yaml")
	if !bytes.Contains(y.body, []byte("reason: NotFound")) {
		t.Fatalf("YAML Status %s", y.body)
	}
}

func TestProtobufLifecycle(t *testing.T) {
	_, ts := newTestServer(t)
	cmMsg := registry.ConfigMaps().Protobuf
	pb := "application/vnd.kubernetes.protobuf"
	body := configMapProtobuf(t, `{"metadata":{"name":"p","labels":{"app":"x"}},"data":{"a":"1"},"binaryData":{"b":"AAEC"},"immutable":false}`)
	r := do(t, ts, "POST", cmPath, body, "Content-Type", pb, "Accept", pb)
	if r.code != 201 {
		t.Fatalf("create: %d %q", r.code, r.body)
	}
	cm := decodeProtobuf(t, r, "ConfigMap", cmMsg)
	if str(cm, "data", "a") != "1" || str(cm, "binaryData", "b") != "AAEC" || str(cm, "metadata", "labels", "app") != "x" || str(cm, "metadata", "uid") == "" || cm["immutable"] != false {
		t.Fatalf("created %v", cm)
	}
	// The stored object reads back the same in JSON.
	js := do(t, ts, "GET", cmPath+"/p", "").object(t)
	if str(js, "binaryData", "b") != "AAEC" || js["immutable"] != false || str(js, "metadata", "creationTimestamp") == "" {
		t.Fatalf("JSON of the protobuf create: %v", js)
	}
	// Update with protobuf, answer in JSON.
	cm["data"] = map[string]any{"a": "2"}
	raw, err := cmMsg.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	r = do(t, ts, "PUT", cmPath+"/p", string(codec.EncodeEnvelope("v1", "ConfigMap", raw)), "Content-Type", pb, "Accept", "application/json")
	if r.code != 200 || str(r.object(t), "data", "a") != "2" {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	// List as protobuf.
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"q"}}`)
	r = do(t, ts, "GET", cmPath+"?limit=1", "", "Accept", pb)
	list := decodeProtobuf(t, r, "ConfigMapList", codec.ListOf(cmMsg))
	items, _ := list["items"].([]any)
	if len(items) != 1 || str(list, "metadata", "continue") == "" || str(list, "metadata", "remainingItemCount") != "1" || str(list, "metadata", "resourceVersion") == "" {
		t.Fatalf("protobuf list %v", list)
	}
	// Namespaces too.
	r = do(t, ts, "GET", "/api/v1/namespaces/default", "", "Accept", pb)
	ns := decodeProtobuf(t, r, "Namespace", registry.Namespaces().Protobuf)
	if str(ns, "status", "phase") != "Active" || str(ns, "spec", "finalizers") != `["kubernetes"]` {
		t.Fatalf("namespace %v", ns)
	}
	// The scale subresource of a custom resource: autoscaling/v1 Scale has
	// a message, the Widget has none.
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"replicas":2}}`)
	r = do(t, ts, "GET", wdPath+"/w/scale", "", "Accept", pb)
	sc := decodeProtobuf(t, r, "Scale", codec.ScaleMessage)
	if str(sc, "spec", "replicas") != "2" || str(sc, "metadata", "name") != "w" {
		t.Fatalf("scale %v", sc)
	}
	sc["spec"] = map[string]any{"replicas": 5}
	raw, _ = codec.ScaleMessage.Marshal(sc)
	r = do(t, ts, "PUT", wdPath+"/w/scale", string(codec.EncodeEnvelope("autoscaling/v1", "Scale", raw)), "Content-Type", pb, "Accept", "application/json")
	if r.code != 200 || str(r.object(t), "spec", "replicas") != "5" {
		t.Fatalf("scale update: %d %s", r.code, r.body)
	}
	protobufStatus(t, do(t, ts, "GET", wdPath+"/w", "", "Accept", pb), 406, meta.StatusReasonNotAcceptable)
	// Delete with protobuf DeleteOptions (preconditions that fail: 409).
	opts, _ := codec.DeleteOptionsMessage.Marshal(map[string]any{"preconditions": map[string]any{"uid": "wrong"}})
	r = do(t, ts, "DELETE", cmPath+"/p", string(codec.EncodeEnvelope("meta.k8s.io/v1", "DeleteOptions", opts)), "Content-Type", pb, "Accept", pb)
	protobufStatus(t, r, 409, meta.StatusReasonConflict)
	opts, _ = codec.DeleteOptionsMessage.Marshal(map[string]any{"propagationPolicy": "Background"})
	r = do(t, ts, "DELETE", cmPath+"/p", string(codec.EncodeEnvelope("v1", "DeleteOptions", opts)), "Content-Type", pb, "Accept", pb)
	st := decodeProtobuf(t, r, "Status", codec.StatusMessage)
	if r.code != 200 || st["status"] != "Success" || str(st, "details", "name") != "p" {
		t.Fatalf("delete: %d %v", r.code, st)
	}
}

// Bad bodies are a clear 400 or 415, and nothing is written.
func TestBadBodies(t *testing.T) {
	_, ts := newTestServer(t)
	pb := "application/vnd.kubernetes.protobuf"
	valid := configMapProtobuf(t, `{"metadata":{"name":"ok"},"data":{"a":"b"}}`)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct {
		name, path, ctype, body string
		code                    int
		contains                string
	}{
		{"JSON as protobuf", cmPath, pb, `{"metadata":{"name":"x"}}`, 400, "expected prefix [107 56 115 0]"},
		{"garbage protobuf", cmPath, pb, "k8s\x00\xff\xff\xff", 400, "protobuf"},
		{"truncated protobuf", cmPath, pb, valid[:len(valid)-5], 400, "protobuf"},
		{"wrong envelope type", cmPath, pb, string(codec.EncodeEnvelope("v1", "Secret", []byte{})), 400, "Secret in version \"v1\" cannot be handled as a ConfigMap"},
		{"wrong envelope version", cmPath, pb, string(codec.EncodeEnvelope("v2", "ConfigMap", []byte{})), 400, "cannot be handled as a ConfigMap"},
		{"envelope with an encoding", cmPath, pb, string(append(codec.AppendEnvelopeHeader(nil, "v1", "ConfigMap", 0), 0x1a, 4, 'g', 'z', 'i', 'p')), 400, "content encoding"},
		{"field of the wrong wire type", cmPath, pb, string(codec.EncodeEnvelope("v1", "ConfigMap", []byte{0x08, 0x01})), 400, "field metadata"},
		{"protobuf for a custom resource", wdPath, pb, valid, 415, "application/json, application/yaml"},
		{"text/plain", cmPath, "text/plain", "x", 415, "application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{"unparsable content type", cmPath, "application/json; =", "{}", 415, "unknown format"},
		{"protobuf as JSON", cmPath, "application/json", valid, 400, "invalid character"},
		{"YAML bomb", cmPath, "application/yaml", "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\nmetadata: {name: bomb}\n", 400, "aliases"},
		{"YAML documents", cmPath, "application/yaml", "metadata: {name: a}\n---\nmetadata: {name: b}\n", 400, "more than one document"},
		{"deep JSON", cmPath, "application/json", deep, 400, "max depth"},
		{"deep YAML", cmPath, "application/yaml", deep, 400, "depth"},
		{"YAML scalar", cmPath, "application/yaml", "just a string", 400, "must be an object"},
		{"protobuf scale of a configmap", cmPath + "/ok/scale", pb, valid, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, ts, "POST", tc.path, tc.body, "Content-Type", tc.ctype)
			if r.code != tc.code {
				t.Fatalf("code %d, want %d: %s", r.code, tc.code, r.body)
			}
			var st meta.Status
			if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
				t.Fatalf("not a Status: %s", r.body)
			}
			if !strings.Contains(st.Message, tc.contains) {
				t.Fatalf("message %q does not contain %q", st.Message, tc.contains)
			}
		})
	}
	if n := len(do(t, ts, "GET", cmPath, "").object(t)["items"].([]any)); n != 0 {
		t.Fatalf("%d configmaps written by bad bodies", n)
	}
	// YAML with duplicate keys is written with a warning (Strict: 400).
	r := do(t, ts, "POST", cmPath, "metadata:\n  name: dup\ndata:\n  a: \"1\"\n  a: \"2\"\n", "Content-Type", "application/yaml", "Accept", "application/yaml")
	if r.code != 201 || !strings.Contains(r.header.Get("Warning"), `duplicate field \"data.a\"`) || !bytes.Contains(r.body, []byte("a: \"2\"")) {
		t.Fatalf("YAML with duplicates: %d %q %s", r.code, r.header.Get("Warning"), r.body)
	}
	do(t, ts, "POST", cmPath+"?fieldValidation=Strict", "metadata:\n  name: dup2\n  name: dup3\n", "Content-Type", "application/yaml").status(t, 400, meta.StatusReasonBadRequest)
}

func TestTableRepresentation(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3,"color":"red"}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":5}}`)
	r := do(t, ts, "GET", wdPath, "", "Accept", acceptTableV1+", application/json")
	if r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
	}
	var tbl struct {
		Kind, APIVersion string
		Metadata         meta.ListMeta
		Columns          []tableColumn `json:"columnDefinitions"`
		Rows             []struct {
			Cells  []any
			Object map[string]any
		}
	}
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tbl.Columns {
		names = append(names, c.Name+":"+c.Type)
	}
	if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || strings.Join(names, ",") != "Name:string,Size:integer,Color:string,Age:date" || len(tbl.Rows) != 2 {
		t.Fatalf("table %s", r.body)
	}
	if fmt.Sprint(tbl.Rows[0].Cells) != "[w1 3 red 0s]" && fmt.Sprint(tbl.Rows[0].Cells) != "[w1 3 red 1s]" {
		t.Fatalf("row %v", tbl.Rows[0].Cells)
	}
	if tbl.Rows[1].Cells[2] != nil {
		t.Fatalf("missing color should be null: %v", tbl.Rows[1].Cells)
	}
	if tbl.Rows[0].Object["kind"] != "PartialObjectMetadata" || tbl.Metadata.ResourceVersion == "" {
		t.Fatalf("row object %v", tbl.Rows[0].Object)
	}
	// includeObject, v1beta1, paging metadata, single object.
	r = do(t, ts, "GET", wdPath+"?limit=1&includeObject=Object", "", "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1beta1")
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		t.Fatal(err)
	}
	if tbl.APIVersion != "meta.k8s.io/v1beta1" || tbl.Metadata.Continue == "" || tbl.Metadata.RemainingItemCount == nil || *tbl.Metadata.RemainingItemCount != 1 ||
		tbl.Rows[0].Object["kind"] != "Widget" || str(tbl.Rows[0].Object, "spec", "color") != "red" {
		t.Fatalf("paged table %s", r.body)
	}
	r = do(t, ts, "GET", wdPath+"/w2?includeObject=None", "", "Accept", acceptTableV1)
	if !bytes.Contains(r.body, []byte(`"object":null`)) || !bytes.Contains(r.body, []byte(`"resourceVersion":"`)) {
		t.Fatalf("single table %s", r.body)
	}
	do(t, ts, "GET", wdPath+"?includeObject=All", "", "Accept", acceptTableV1).status(t, 400, meta.StatusReasonBadRequest)
	// Built-in columns; default columns of a type without printer columns.
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c"},"data":{"a":"1","b":"2"}}`)
	r = do(t, ts, "GET", cmPath+"?includeObject=Object", "", "Accept", acceptTableV1)
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tbl.Rows[0].Cells[:2]) != "[c 2]" || tbl.Rows[0].Object["kind"] != "ConfigMap" || tbl.Rows[0].Object["apiVersion"] != "v1" {
		t.Fatalf("configmap table %s", r.body)
	}
	// YAML Table.
	r = do(t, ts, "GET", cmPath, "", "Accept", "application/yaml;as=Table;g=meta.k8s.io;v=v1")
	if r.header.Get("Content-Type") != "application/yaml" || !bytes.Contains(r.body, []byte("kind: Table")) {
		t.Fatalf("YAML table %s", r.body)
	}
	// Tables of writes: a create answered as a Table.
	r = do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":1}}`, "Accept", acceptTableV1)
	if r.code != 201 || !bytes.Contains(r.body, []byte(`"kind":"Table"`)) {
		t.Fatalf("create as Table: %d %s", r.code, r.body)
	}
	// A delete's Status is not converted.
	r = do(t, ts, "DELETE", wdPath+"/w3", "", "Accept", acceptTableV1)
	if r.code != 200 || !bytes.Contains(r.body, []byte(`"kind":"Status"`)) {
		t.Fatalf("delete as Table: %d %s", r.code, r.body)
	}
}

func TestPartialObjectMetadata(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1","labels":{"a":"b"}},"spec":{"size":3}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":4}}`)
	r := do(t, ts, "GET", wdPath+"/w1", "", "Accept", acceptPOM)
	obj := r.object(t)
	if obj["kind"] != "PartialObjectMetadata" || obj["apiVersion"] != "meta.k8s.io/v1" || str(obj, "metadata", "labels", "a") != "b" || obj["spec"] != nil {
		t.Fatalf("POM %s", r.body)
	}
	r = do(t, ts, "GET", wdPath+"?limit=1", "", "Accept", acceptPOML)
	obj = r.object(t)
	items := obj["items"].([]any)
	if obj["kind"] != "PartialObjectMetadataList" || len(items) != 1 || str(obj, "metadata", "continue") == "" || items[0].(map[string]any)["kind"] != "PartialObjectMetadata" {
		t.Fatalf("POML %s", r.body)
	}
	// Protobuf, for a custom resource too (the meta types have messages).
	metaAccept := "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	r = do(t, ts, "GET", wdPath+"/w1", "", "Accept", metaAccept)
	pom := decodeProtobuf(t, r, "PartialObjectMetadata", codec.PartialObjectMetadataMessage)
	if str(pom, "metadata", "name") != "w1" || str(pom, "metadata", "generation") != "1" {
		t.Fatalf("protobuf POM %v", pom)
	}
	r = do(t, ts, "GET", wdPath, "", "Accept", strings.ReplaceAll(metaAccept, "PartialObjectMetadata;", "PartialObjectMetadataList;"))
	pl := decodeProtobuf(t, r, "PartialObjectMetadataList", codec.PartialObjectMetadataListMessage)
	if len(pl["items"].([]any)) != 2 || str(pl, "metadata", "resourceVersion") == "" {
		t.Fatalf("protobuf POML %v", pl)
	}
	r = do(t, ts, "GET", wdPath, "", "Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1")
	pl = decodeProtobuf(t, r, "PartialObjectMetadataList", codec.PartialObjectMetadataListV1beta1Message)
	if len(pl["items"].([]any)) != 2 || str(pl, "metadata", "resourceVersion") == "" {
		t.Fatalf("protobuf v1beta1 POML %v", pl)
	}
	// A list as PartialObjectMetadata and an object as a list: 406.
	st := do(t, ts, "GET", wdPath, "", "Accept", acceptPOM).status(t, 406, meta.StatusReasonNotAcceptable)
	if !strings.Contains(st.Message, "you requested PartialObjectMetadata, but the requested object is a list") {
		t.Fatalf("message %q", st.Message)
	}
	do(t, ts, "GET", wdPath+"/w1", "", "Accept", acceptPOML).status(t, 406, meta.StatusReasonNotAcceptable)
	// Patches answered as metadata (the metadata client patches this way).
	r = do(t, ts, "PATCH", wdPath+"/w1", `{"metadata":{"labels":{"c":"d"}}}`, "Content-Type", "application/merge-patch+json", "Accept", metaAccept)
	pom = decodeProtobuf(t, r, "PartialObjectMetadata", codec.PartialObjectMetadataMessage)
	if str(pom, "metadata", "labels", "c") != "d" {
		t.Fatalf("patched POM %v", pom)
	}
}

func TestCompressionAndPretty(t *testing.T) {
	_, ts := newTestServer(t)
	big := strings.Repeat("x", 100<<10)
	for _, n := range []string{"b1", "b2"} {
		if r := do(t, ts, "POST", cmPath, `{"metadata":{"name":"`+n+`"},"data":{"k":"`+big+`"}}`); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	get := func(path string, header ...string) *http.Response {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		// A transport that leaves compression to us.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := get(cmPath, "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("large list: headers %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !json.Valid(b) || len(b) < 200<<10 {
		t.Fatalf("decompressed %d bytes, %v", len(b), err)
	}
	for _, tc := range []struct{ path, ae string }{
		{cmPath + "/b1", "gzip"},                       // below 128 KiB
		{cmPath, "gzip;q=0"},                           // refused
		{cmPath, "identity"},                           // not offered
		{cmPath + "?watch=1&timeoutSeconds=1", "gzip"}, // never for watches
	} {
		resp := get(tc.path, "Accept-Encoding", tc.ae)
		if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s with %q: compressed", tc.path, tc.ae)
		}
	}
	resp = get(cmPath, "Accept-Encoding", "br, gzip;q=0.5", "Accept", acceptProtobuf)
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != acceptProtobuf {
		t.Fatalf("protobuf list headers %v", resp.Header)
	}
	// A stock client decompresses transparently.
	r := do(t, ts, "GET", cmPath, "")
	if len(r.object(t)["items"].([]any)) != 2 {
		t.Fatal("transparent decompression failed")
	}

	for _, tc := range []struct {
		path   string
		header []string
		pretty bool
	}{
		{"/api/v1/namespaces/default?pretty=true", nil, true},
		{"/api/v1/namespaces/default?pretty=false", []string{"User-Agent", "curl/8.0"}, false},
		{"/api/v1/namespaces/default", []string{"User-Agent", "curl/8.0"}, true},
		{"/api/v1/namespaces/default", []string{"Accept", "application/json;pretty=1"}, true},
		{"/api/v1/namespaces/default", nil, false},
		{"/api/v1/namespaces/nope?pretty=1", nil, true},
	} {
		r := do(t, ts, "GET", tc.path, "", tc.header...)
		if got := bytes.Contains(r.body, []byte("\n  \"")); got != tc.pretty || !json.Valid(r.body) {
			t.Errorf("%s %v: pretty %v, want %v: %s", tc.path, tc.header, got, tc.pretty, r.body)
		}
	}
}

// openStream starts a watch request and returns its response.
func openStream(t *testing.T, ts interface{ Client() *http.Client }, url, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Accept", accept)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestWatchRepresentations(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"a"},"data":{"k":"v"}}`)
	cmMsg := registry.ConfigMaps().Protobuf

	// Protobuf: length-prefixed WatchEvent frames around enveloped objects.
	resp := openStream(t, ts, ts.URL+cmPath+"?watch=1", acceptProtobuf)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Fatalf("protobuf watch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	next := func(r io.Reader) (string, codec.Unknown) {
		t.Helper()
		frame, err := codec.ReadFrame(r, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		typ, obj, err := codec.DecodeWatchEvent(frame)
		if err != nil {
			t.Fatal(err)
		}
		u, err := codec.DecodeEnvelope(obj)
		if err != nil {
			t.Fatal(err)
		}
		return typ, u
	}
	typ, u := next(resp.Body)
	cm, err := cmMsg.Unmarshal(u.Raw)
	if typ != "ADDED" || u.Kind != "ConfigMap" || err != nil || str(cm, "metadata", "name") != "a" {
		t.Fatalf("first event %s %+v %v", typ, cm, err)
	}
	do(t, ts, "DELETE", cmPath+"/a", "")
	if typ, u = next(resp.Body); typ != "DELETED" || u.Kind != "ConfigMap" {
		t.Fatalf("second event %s %s", typ, u.Kind)
	}

	// PartialObjectMetadata in protobuf (metadata informers) and JSON.
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{"x":"y"}},"spec":{"size":1}}`)
	metaAccept := "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	resp = openStream(t, ts, ts.URL+wdPath+"?watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", metaAccept)
	typ, u = next(resp.Body)
	pom, err := codec.PartialObjectMetadataMessage.Unmarshal(u.Raw)
	if typ != "ADDED" || u.Kind != "PartialObjectMetadata" || err != nil || str(pom, "metadata", "labels", "x") != "y" {
		t.Fatalf("metadata event %s %s %v %v", typ, u.Kind, pom, err)
	}
	typ, u = next(resp.Body)
	pom, _ = codec.PartialObjectMetadataMessage.Unmarshal(u.Raw)
	if typ != "BOOKMARK" || str(pom, "metadata", "annotations", "k8s.io/initial-events-end") != "true" {
		t.Fatalf("bookmark %s %v", typ, pom)
	}
	resp = openStream(t, ts, ts.URL+wdPath+"?watch=1", acceptPOM)
	ev := readJSONEvent(t, resp.Body)
	if ev["type"] != "ADDED" || str(ev, "object", "kind") != "PartialObjectMetadata" || str(ev, "object", "spec") != "" {
		t.Fatalf("JSON metadata event %v", ev)
	}

	// Table: headers in the first event only.
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":2,"color":"blue"}}`)
	resp = openStream(t, ts, ts.URL+wdPath+"?watch=1&includeObject=None", acceptTableV1)
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("table watch Content-Type %q", resp.Header.Get("Content-Type"))
	}
	br := newLineReader(resp.Body)
	first, second := readJSONEvent(t, br), readJSONEvent(t, br)
	if str(first, "object", "kind") != "Table" || str(first, "object", "columnDefinitions") == "" || str(second, "object", "columnDefinitions") != "" {
		t.Fatalf("table events %v / %v", first, second)
	}
	rows := second["object"].(map[string]any)["rows"].([]any)
	if cells := rows[0].(map[string]any)["cells"].([]any); fmt.Sprint(cells[:3]) != "[w2 2 blue]" {
		t.Fatalf("table cells %v", cells)
	}

	// Refusals: YAML (no YAML stream), protobuf of a custom resource,
	// PartialObjectMetadataList.
	r := do(t, ts, "GET", cmPath+"?watch=1", "", "Accept", "application/yaml")
	if r.code != 406 || r.header.Get("Content-Type") != "application/yaml" || !bytes.Contains(r.body, []byte("stream=watch")) {
		t.Fatalf("YAML watch: %d %s", r.code, r.body)
	}
	protobufStatus(t, do(t, ts, "GET", wdPath+"?watch=1", "", "Accept", acceptProtobuf), 406, meta.StatusReasonNotAcceptable)
	do(t, ts, "GET", wdPath+"?watch=1", "", "Accept", acceptPOML).status(t, 406, meta.StatusReasonNotAcceptable)
	do(t, ts, "GET", wdPath+"?watch=1&includeObject=Some", "", "Accept", acceptTableV1).status(t, 400, meta.StatusReasonBadRequest)
}

func newLineReader(r io.Reader) *bytesLineReader { return &bytesLineReader{r: r} }

// bytesLineReader reads newline-delimited JSON events one at a time.
type bytesLineReader struct {
	r   io.Reader
	buf []byte
}

func (b *bytesLineReader) Read(p []byte) (int, error) { return b.r.Read(p) }

func readJSONEvent(t *testing.T, r io.Reader) map[string]any {
	t.Helper()
	lr, ok := r.(*bytesLineReader)
	if !ok {
		lr = &bytesLineReader{r: r}
	}
	for {
		if i := bytes.IndexByte(lr.buf, '\n'); i >= 0 {
			line := lr.buf[:i]
			lr.buf = lr.buf[i+1:]
			var ev map[string]any
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("bad event %q: %v", line, err)
			}
			return ev
		}
		chunk := make([]byte, 32<<10)
		n, err := lr.r.Read(chunk)
		lr.buf = append(lr.buf, chunk[:n]...)
		if err != nil && n == 0 {
			t.Fatalf("reading events: %v", err)
		}
	}
}

func TestJSONPath(t *testing.T) {
	obj := `{"metadata":{"name":"a","labels":{"x.y/z":"1"}},"spec":{"size":3,"ratio":1.5,"on":true,"tags":["p","q"],"m":{"k":"v"}},
"status":{"conditions":[{"type":"Ready","status":"False","n":1},{"type":"Synced","status":"True","n":2}]}}`
	v, _, err := codec.DecodeJSON([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want any
	}{
		{".spec.size", "3"},
		{"{.spec.size}", "3"},
		{"$.spec.size", "3"},
		{"spec.size", "3"},
		{".spec.tags[1]", "q"},
		{".spec.tags[-1]", "q"},
		{".spec.tags[*]", "p"},
		{".spec.tags[5]", nil},
		{".metadata.labels['x.y/z']", "1"},
		{`.metadata.labels["x.y/z"]`, "1"},
		{".spec.m.*", "v"},
		{`.status.conditions[?(@.type=="Synced")].status`, "True"},
		{`.status.conditions[?(@.type == 'Ready')].status`, "False"},
		{`.status.conditions[?(@.type!="Ready")].type`, "Synced"},
		{`.status.conditions[?(@.n>1)].type`, "Synced"},
		{`.status.conditions[?(@.n<=1)].type`, "Ready"},
		{`.status.conditions[?(@.missing)].type`, nil},
		{`.status.conditions[?(@.type)].type`, "Ready"},
		{".nope.deeper", nil},
		{".spec.size.deeper", nil},
	} {
		p, err := compileJSONPath(tc.path)
		if err != nil {
			t.Errorf("compile %q: %v", tc.path, err)
			continue
		}
		got := fmt.Sprint(p.first(v))
		raw, err := p.firstRaw([]byte(obj))
		if err != nil {
			t.Errorf("%q raw: %v", tc.path, err)
		}
		want := fmt.Sprint(tc.want)
		if tc.want == nil {
			want = "<nil>"
		}
		if got != want || fmt.Sprint(raw) != want {
			t.Errorf("%q = %s (raw %v), want %s", tc.path, got, raw, want)
		}
	}
	for _, bad := range []string{".a[", ".a['b", ".a[?(@.b==)]", ".a[?(b)]", ".a[x]", "..", ".a[?(@.b=='c'"} {
		if _, err := compileJSONPath(bad); err == nil {
			t.Errorf("compile %q accepted", bad)
		}
	}
}

func TestCellValues(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    any
		typ  string
		want any
	}{
		{json.Number("3"), "integer", int64(3)},
		{json.Number("3.7"), "integer", int64(3)},
		{"3", "integer", nil},
		{json.Number("1.5"), "number", 1.5},
		{true, "boolean", true},
		{"yes", "boolean", nil},
		{json.Number("3"), "string", "3"},
		{map[string]any{"a": "b"}, "string", `{"a":"b"}`},
		{[]any{"a"}, "string", `["a"]`},
		{"2026-01-09T23:59:30Z", "date", "30s"},
		{"2026-01-02T00:00:00Z", "date", "8d"},
		{"yesterday", "date", "<invalid>"},
		{"0001-01-01T00:00:00Z", "date", "<unknown>"},
		{nil, "string", nil},
	} {
		if got := cellValue(tc.v, tc.typ, now); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("cellValue(%v, %s) = %v, want %v", tc.v, tc.typ, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{
		-3 * time.Second: "<invalid>", -1500 * time.Millisecond: "0s", 119 * time.Second: "119s", 3*time.Minute + 20*time.Second: "3m20s",
		5 * time.Minute: "5m", 2 * time.Hour: "120m", 5*time.Hour + 3*time.Minute: "5h3m", 30 * time.Hour: "30h",
		3*24*time.Hour + 4*time.Hour: "3d4h", 20 * 24 * time.Hour: "20d", 3 * 365 * 24 * time.Hour: "3y", 10 * 365 * 24 * time.Hour: "10y",
	} {
		if got := HumanDuration(d); got != want {
			t.Errorf("HumanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// Table watches encode their own first frame (with the column definitions)
// and share the rows after it: a watch that starts after another still gets
// the definitions first, both see the same rows, and the watch cache holds
// each row's frame once (for a Table with the whole object, about the
// object's size again).
func TestTableWatchesShareRows(t *testing.T) {
	api, ts := newTestServer(t)
	rv := collectionRV(t, ts)
	path := ts.URL + cmPath + "?watch=1&includeObject=Object&resourceVersion=" + rv
	a := newLineReader(openStream(t, ts, path, acceptTableV1).Body)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c1"}}`)
	if ev := readJSONEvent(t, a); str(ev, "object", "columnDefinitions") == "" {
		t.Fatalf("first event of the first watch: %v", ev)
	}
	b := newLineReader(openStream(t, ts, path, acceptTableV1).Body)
	if ev := readJSONEvent(t, b); str(ev, "object", "columnDefinitions") == "" || firstCell(ev) != "c1" {
		t.Fatalf("first event of the second watch: %v", ev)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	value := strings.Repeat("v", 8<<10)
	for _, name := range []string{"c2", "c3"} {
		before, _ := st.WatchCacheStats()
		do(t, ts, "POST", cmPath, `{"metadata":{"name":"`+name+`"},"data":{"v":"`+value+`"}}`)
		ea, eb := readJSONEvent(t, a), readJSONEvent(t, b)
		if str(ea, "object", "columnDefinitions") != "" || firstCell(ea) != name ||
			fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Fatalf("%s: the watches got %v and %v", name, ea, eb)
		}
		// The window holds the new object and, when shared, its row's frame.
		after, _ := st.WatchCacheStats()
		if grew := after.WindowBytes - before.WindowBytes; grew < 3*int64(len(value))/2 {
			t.Fatalf("%s: the window grew by %d bytes with an %d-byte value: no shared frame", name, grew, len(value))
		}
	}
}

// firstCell is the first cell of a Table watch event's row.
func firstCell(ev map[string]any) any {
	rows, _ := ev["object"].(map[string]any)["rows"].([]any)
	if len(rows) == 0 {
		return nil
	}
	cells, _ := rows[0].(map[string]any)["cells"].([]any)
	if len(cells) == 0 {
		return nil
	}
	return cells[0]
}
