package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

// FuzzPatchRequest throws arbitrary bodies at PATCH with each of the four
// patch types (and apply with force, dry-run and /status): the server must
// answer with a Status or the object, never a 5xx, and the stored object must
// stay valid.
func FuzzPatchRequest(f *testing.F) {
	for _, s := range []struct {
		body string
		mode uint8
	}{
		{`[{"op":"replace","path":"/spec/size","value":3}]`, 0},
		{`[{"op":"test","path":""}]`, 0},
		{`{"spec":{"size":null,"ports":[{"name":"a","port":1}]}}`, 1},
		{`{"metadata":{"managedFields":[{}]}}`, 1},
		{`{"spec":{"ports":[{"name":"x","$patch":"delete"}],"$setElementOrder/ports":[{"name":"x"}]}}`, 2},
		{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":4,"ports":[{"name":"b","port":2}]}}`, 3},
		{"apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: w}\nstatus: {phase: x}\n", 7},
		{`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","uid":"x"}}`, 11},
	} {
		f.Add([]byte(s.body), s.mode)
	}
	_, ts := newTestServer(f)
	do(f, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"ports":[{"name":"a","port":1}]}}`)
	h := ts.Config.Handler
	types := []string{ctJSONPatch, ctMergePatch, ctStrategic, ctApply}
	f.Fuzz(func(t *testing.T, body []byte, mode uint8) {
		path := wdPath + "/w"
		if mode&4 != 0 {
			path += "/status"
		}
		path += "?fieldManager=fuzz"
		if mode&8 != 0 {
			path += "&dryRun=All"
		}
		ct := types[mode&3]
		if ct == ctApply && mode&16 != 0 {
			path += "&force=true"
		}
		req := httptest.NewRequest(http.MethodPatch, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("PATCH %s (%s) %q: %d %s", path, ct, body, rec.Code, rec.Body.Bytes())
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &head); err != nil {
			t.Fatalf("response is not JSON: %d %q", rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 && head.Kind != "Status" || rec.Code < 400 && head.Kind != "Widget" {
			t.Fatalf("code %d with a %q body", rec.Code, head.Kind)
		}
		// Whatever happened, the stored widget is still a valid one.
		get := httptest.NewRecorder()
		h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, wdPath+"/w", nil))
		if get.Code != 200 {
			t.Fatalf("GET after the patch: %d %s", get.Code, get.Body.Bytes())
		}
		var w map[string]any
		if err := json.Unmarshal(get.Body.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		size, ok := meta.AsInt64(w["spec"].(map[string]any)["size"])
		if !ok || size < 0 || meta.GetName(w) != "w" {
			t.Fatalf("stored widget is invalid: %s", get.Body.Bytes())
		}
	})
}
