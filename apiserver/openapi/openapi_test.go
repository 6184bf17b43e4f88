package openapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// Build on its own: a document per group version, the index's hashes, and
// the v2 forms computed once.
func TestBuild(t *testing.T) {
	d := Build(testResources(t))
	var index struct {
		Paths map[string]struct{ ServerRelativeURL string }
	}
	if err := json.Unmarshal(d.V3Index, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Paths) != 2 {
		t.Errorf("v3 index: %s", d.V3Index)
	}
	for _, key := range []string{"api/v1", "apis/example.dev/v1"} {
		doc, tag, ok := d.V3(key)
		sum := sha512.Sum512(doc)
		hash := strings.ToUpper(hex.EncodeToString(sum[:]))
		if want := "/openapi/v3/" + key + "?hash=" + hash; !ok || index.Paths[key].ServerRelativeURL != want {
			t.Errorf("%s: %v, index %q, want %q", key, ok, index.Paths[key].ServerRelativeURL, want)
		}
		if tag != `"`+hash+`"` {
			t.Errorf("%s: ETag %s, want the hash %s quoted", key, tag, hash)
		}
	}
	if doc, _, _ := d.V3("apis/example.dev/v1"); !bytes.Contains(doc, []byte(`"/apis/example.dev/v1/namespaces/{namespace}/widgets/{name}/status"`)) {
		t.Error("no widgets/status path")
	}
	if _, _, ok := d.V3("apis/nope/v1"); ok {
		t.Error("a document for a group version that is not served")
	}
	sum := sha512.Sum512(d.V2)
	if etag := d.V2ETag(); etag != `"`+strings.ToUpper(hex.EncodeToString(sum[:]))+`"` {
		t.Errorf("ETag %s", etag)
	}
	pb, err := d.V2Protobuf()
	if again, _ := d.V2Protobuf(); err != nil || len(pb) == 0 || &again[0] != &pb[0] {
		t.Errorf("protobuf: %d bytes, %v, computed again: %v", len(pb), err, err == nil && len(pb) > 0 && &again[0] != &pb[0])
	}
}
