package apiserver

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Protobuf lists and gets answered through the encoding cache are byte for
// byte those of a server without it, before and after the objects change.
func TestProtobufCacheAnswersMatchTranscoding(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	servers := map[string]*Server{}
	for name, size := range map[string]int64{"cached": 0, "uncached": -1} {
		// Two servers over one store: the same objects, revisions, uids and
		// continue-token key.
		api := newConfigMapServer(t, Config{Storage: store, ProtobufCacheBytes: size})
		servers[name] = api
	}
	if servers["cached"].pbCache == nil || servers["uncached"].pbCache != nil {
		t.Fatal("ProtobufCacheBytes did not select the cache")
	}
	serve := func(api *Server, method, path, body string) []byte {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Accept", codec.MediaProtobuf)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	for i := 0; i < 20; i++ {
		serve(servers["cached"], "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%02d"},"data":{"v":"%d"}}`, i, i))
	}
	compare := func(round string) {
		t.Helper()
		for _, path := range []string{cmPath, cmPath + "/c03", cmPath + "?limit=7"} {
			for k := 0; k < 2; k++ { // the second time from the cache
				got, want := serve(servers["cached"], "GET", path, ""), serve(servers["uncached"], "GET", path, "")
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: GET %s (time %d) differs from transcoding", round, path, k+1)
				}
			}
		}
	}
	compare("first")
	serve(servers["cached"], "PUT", cmPath+"/c03", `{"metadata":{"name":"c03"},"data":{"v":"changed"}}`)
	compare("after an update")
	if n, _ := servers["cached"].pbCache.Len(); n == 0 {
		t.Fatal("the cache holds nothing after protobuf reads")
	}
}
