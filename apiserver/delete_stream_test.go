package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// A deletecollection deletes as it lists and streams its answer: every
// selected object deleted once and listed as deleted, the others left, past
// the gzip threshold too, and in protobuf past its buffer.
func TestDeleteCollectionStreamed(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		api, _, ts := newStreamTestServer(t, stateless) // 1,300 configmaps in default, about 1 MB
		del := func(path, accept, enc string) (*http.Response, []byte) {
			resp, b, err := roundTrip(t, ts, "DELETE", path, accept, enc)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Header.Get("Content-Encoding") == "gzip" {
				b = gunzip(t, b)
			}
			return resp, b
		}
		names := func(items []any) map[string]bool {
			m := map[string]bool{}
			for _, it := range items {
				m[str(it.(map[string]any), "metadata", "name")] = true
			}
			return m
		}
		remaining := func() int {
			_, b, _ := get(t, ts, cmPath, "application/json", "")
			var l map[string]any
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatal(err)
			}
			return len(l["items"].([]any))
		}
		// JSON, gzip: the odd half.
		resp, b := del(cmPath+"?labelSelector=odd%3Dtrue", "application/json", "gzip")
		var l map[string]any
		if err := json.Unmarshal(b, &l); resp.StatusCode != 200 || err != nil {
			t.Fatalf("JSON: %d %v %.200s", resp.StatusCode, err, b)
		}
		if got := names(l["items"].([]any)); len(got) != 650 || !got["default-0001"] || got["default-0002"] || str(l, "kind") != "ConfigMapList" || str(l, "metadata", "resourceVersion") == "" {
			t.Fatalf("JSON: %d items deleted, kind %q", len(got), str(l, "kind"))
		}
		if n := remaining(); n != 650 {
			t.Fatalf("%d left after deleting the odd half", n)
		}
		// Pretty-printed JSON: a quarter, indented.
		resp, b = del(cmPath+"?pretty=true&fieldSelector=metadata.name%3Ddefault-0002", "application/json", "")
		if err := json.Unmarshal(b, &l); resp.StatusCode != 200 || err != nil || !bytes.HasPrefix(b, []byte("{\n  \"kind\": \"ConfigMapList\",")) || !bytes.HasSuffix(b, []byte("}\n")) {
			t.Fatalf("pretty: %d %v %.200q", resp.StatusCode, err, b)
		}
		if got := names(l["items"].([]any)); len(got) != 1 || !got["default-0002"] {
			t.Fatalf("pretty: deleted %v", got)
		}
		// YAML: the rest.
		resp, b = del(cmPath, "application/yaml", "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" {
			t.Fatalf("YAML: %d %.200s", resp.StatusCode, b)
		}
		var y map[string]any
		if err := yaml.Unmarshal(b, &y); err != nil || len(y["items"].([]any)) != 649 || y["kind"] != "ConfigMapList" {
			t.Fatalf("YAML: %v, %d items", err, len(y["items"].([]any)))
		}
		if n := remaining(); n != 0 {
			t.Fatalf("%d left after deleting everything", n)
		}
		// Protobuf past a 1 KiB buffer: the other namespace's five
		// objects, the first in the buffer, the rest through the spool
		// (a temporary file, gone afterwards), in order.
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		api.protobufListBuffer = 1 << 10
		resp, b = del("/api/v1/namespaces/other/configmaps", "application/vnd.kubernetes.protobuf", "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
			t.Fatalf("protobuf: %d %q %.100q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		items := protobufItems(t, b, registry.ConfigMaps().Protobuf, 2)
		if len(items) != 5 {
			t.Fatalf("protobuf: %d items", len(items))
		}
		for i, it := range items {
			if name, text := str(it, "metadata", "name"), str(it, "data", "text"); name != fmt.Sprintf("other-%04d", i) || !strings.HasSuffix(text, "end") {
				t.Fatalf("protobuf item %d: %q %q", i, name, text)
			}
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Fatalf("spool left behind: %v", left)
		}
		_, b, _ = get(t, ts, "/api/v1/namespaces/other/configmaps", "application/json", "")
		if !bytes.Contains(b, []byte(`"items":[]`)) {
			t.Fatalf("protobuf: left %s", fmt.Sprintf("%.200s", b))
		}
	}
}

// TestDeleteCollectionNotAcceptable: a deletecollection whose answer cannot
// be written in any representation the client accepts is refused before
// anything is deleted.
func TestDeleteCollectionNotAcceptable(t *testing.T) {
	_, ts := newTestServer(t)
	tm := `"apiVersion":"example.dev/v1","kind":"Widget",`
	if r := do(t, ts, "POST", wdPath, `{`+tm+`"metadata":{"name":"w"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	// Widgets have no protobuf message.
	if r := do(t, ts, "DELETE", wdPath, "", "Accept", "application/vnd.kubernetes.protobuf"); r.code != http.StatusNotAcceptable {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "GET", wdPath+"/w", ""); r.code != 200 {
		t.Fatalf("the widget is gone: %d %s", r.code, r.body)
	}
}
