package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
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
// be written (no representation the client accepts, PartialObjectMetadata
// of a list, a Table option that does not read) is refused before anything
// is deleted.
func TestDeleteCollectionNotAcceptable(t *testing.T) {
	_, ts := newTestServer(t)
	tm := `"apiVersion":"example.dev/v1","kind":"Widget",`
	if r := do(t, ts, "POST", wdPath, `{`+tm+`"metadata":{"name":"w"},"spec":{"size":1}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	for _, c := range []struct {
		query, accept string
		code          int
	}{
		{"", "application/vnd.kubernetes.protobuf", http.StatusNotAcceptable}, // widgets have no protobuf message
		{"", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", http.StatusNotAcceptable},
		{"?includeObject=Bogus", "application/json;as=Table;g=meta.k8s.io;v=v1", http.StatusBadRequest},
	} {
		if r := do(t, ts, "DELETE", wdPath+c.query, "", "Accept", c.accept); r.code != c.code {
			t.Fatalf("deletecollection %s as %s: %d %s, want %d", c.query, c.accept, r.code, r.body, c.code)
		}
		if r := do(t, ts, "GET", wdPath+"/w", ""); r.code != 200 {
			t.Fatalf("deletecollection %s as %s deleted the widget: %d %s", c.query, c.accept, r.code, r.body)
		}
	}
}

// TestDeleteCollectionProtobufSpoolEdges: the first deleted object already
// past the protobuf buffer, with a temporary directory and without one
// (the spool then holds the objects in memory).
func TestDeleteCollectionProtobufSpoolEdges(t *testing.T) {
	for _, noTmp := range []bool{false, true} {
		t.Run(fmt.Sprint("noTmp=", noTmp), func(t *testing.T) {
			api, ts := newTestServer(t)
			tmp := t.TempDir()
			if noTmp {
				tmp = filepath.Join(tmp, "missing")
			}
			t.Setenv("TMPDIR", tmp)
			for i := range 20 {
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%02d"},"data":{"x":%q}}`, i, strings.Repeat("y", 100+i))
				if r := do(t, ts, "POST", cmPath, body); r.code != 201 {
					t.Fatalf("create: %d %s", r.code, r.body)
				}
			}
			api.protobufListBuffer = 64
			resp, b, _ := roundTrip(t, ts, "DELETE", cmPath, "application/vnd.kubernetes.protobuf", "")
			if resp.StatusCode != 200 {
				t.Fatalf("%d %.300q", resp.StatusCode, b)
			}
			items := protobufItems(t, b, registry.ConfigMaps().Protobuf, 2)
			if len(items) != 20 {
				t.Fatalf("%d items", len(items))
			}
			for i, it := range items {
				if name := str(it, "metadata", "name"); name != fmt.Sprintf("cm-%02d", i) {
					t.Fatalf("item %d: %q", i, name)
				}
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("spool left behind: %v", left)
			}
		})
	}
}

// A deletecollection is negotiated as a list is, before anything is
// deleted, and streams its Tables and PartialObjectMetadataLists in JSON
// and YAML too.
func TestDeleteCollectionConverted(t *testing.T) {
	api, _, ts := newStreamTestServer(t, false) // 1,300 configmaps in default
	// The other namespace as a protobuf PartialObjectMetadataList past a
	// 1 KiB buffer: the spool's second pass transcodes metadata too.
	api.protobufListBuffer = 1 << 10
	resp, b, _ := roundTrip(t, ts, "DELETE", "/api/v1/namespaces/other/configmaps", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "")
	if resp.StatusCode != 200 {
		t.Fatalf("protobuf PartialObjectMetadataList: %d %.200q", resp.StatusCode, b)
	}
	pitems := protobufItems(t, b, codec.PartialObjectMetadataMessage, 2)
	if len(pitems) != 5 || str(pitems[4], "metadata", "name") != "other-0004" || str(pitems[0], "metadata", "name") != "other-0000" {
		t.Fatalf("protobuf PartialObjectMetadataList: %d items", len(pitems))
	}
	left := func() int {
		_, b, _ := get(t, ts, cmPath, "application/json", "")
		var l map[string]any
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return len(l["items"].([]any))
	}
	// Nothing it can answer: a 406, and nothing deleted.
	resp, b, _ = roundTrip(t, ts, "DELETE", cmPath, "text/html", "")
	if resp.StatusCode != 406 || left() != 1300 {
		t.Fatalf("text/html: %d, %d left: %.200s", resp.StatusCode, left(), b)
	}
	// A Table in YAML, past the held-back bytes: streamed (no
	// Content-Length), each row the deleted object.
	resp, b, _ = roundTrip(t, ts, "DELETE", cmPath+"?labelSelector=odd%3Dtrue&includeObject=Object", "application/yaml;as=Table;v=v1;g=meta.k8s.io", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" || resp.Header.Get("Content-Length") != "" || len(b) < gzipThreshold {
		t.Fatalf("YAML Table: %d %q Content-Length %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"), len(b))
	}
	tab := yamlDoc(t, b)
	rows, _ := tab["rows"].([]any)
	if str(tab, "kind") != "Table" || len(rows) != 650 {
		t.Fatalf("YAML Table: kind %q, %d rows", str(tab, "kind"), len(rows))
	}
	for _, r := range rows {
		row, _ := r.(map[string]any)
		obj, _ := row["object"].(map[string]any)
		if str(obj, "kind") != "ConfigMap" || str(obj, "metadata", "labels", "odd") != "true" {
			t.Fatalf("YAML Table: row %v", row)
		}
	}
	if n := left(); n != 650 {
		t.Fatalf("%d left after deleting the odd half", n)
	}
	// A Table preferred to plain JSON: a Table, as a list would answer.
	resp, b, _ = roundTrip(t, ts, "DELETE", cmPath+"?fieldSelector=metadata.name%3Ddefault-0000", "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "")
	var jt map[string]any
	if err := json.Unmarshal(b, &jt); err != nil || resp.StatusCode != 200 || str(jt, "kind") != "Table" || str(jt, "apiVersion") != "meta.k8s.io/v1beta1" || len(jt["rows"].([]any)) != 1 {
		t.Fatalf("JSON Table: %d %v %.200s", resp.StatusCode, err, b)
	}
	// The rest as a PartialObjectMetadataList in YAML, streamed.
	resp, b, _ = roundTrip(t, ts, "DELETE", cmPath, "application/yaml;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("YAML PartialObjectMetadataList: %d Content-Length %q", resp.StatusCode, resp.Header.Get("Content-Length"))
	}
	pom := yamlDoc(t, b)
	items, _ := pom["items"].([]any)
	if str(pom, "kind") != "PartialObjectMetadataList" || str(pom, "apiVersion") != "meta.k8s.io/v1beta1" || len(items) != 649 || str(items[0].(map[string]any), "kind") != "PartialObjectMetadata" {
		t.Fatalf("YAML PartialObjectMetadataList: kind %q, %d items", str(pom, "kind"), len(items))
	}
	if n := left(); n != 0 {
		t.Fatalf("%d left after deleting everything", n)
	}
}
