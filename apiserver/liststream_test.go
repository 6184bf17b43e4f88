package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// faultStore wraps a store to count the list pages read for configmaps and
// to fail or hold one of them.
type faultStore struct {
	storage.Store
	pages  atomic.Int64
	failAt atomic.Int64 // fail the n-th page read (0: never)
	holdAt atomic.Int64 // hold the n-th page read until its context ends
	held   chan struct{}
}

var errInjected = errors.New("injected storage failure")

func (f *faultStore) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	if bytes.Contains(opts.Prefix, []byte("/configmaps/")) && !opts.KeysOnly {
		n := f.pages.Add(1)
		if n == f.failAt.Load() {
			return storage.ListResult{}, errInjected
		}
		if n == f.holdAt.Load() {
			close(f.held)
			select {
			case <-ctx.Done():
				return storage.ListResult{}, ctx.Err()
			case <-time.After(10 * time.Second):
			}
		}
	}
	return f.Store.List(ctx, opts)
}

// newStreamTestServer serves 1,305 configmaps over a store that can fail or
// hold its list pages. With stateless, the watch cache keeps no state, so
// that every list streams from storage (with its state, the consistent lists
// come from the cache's memory).
func newStreamTestServer(t *testing.T, stateless bool) (*Server, *faultStore, *httptest.Server) {
	t.Helper()
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	fs := &faultStore{Store: store, held: make(chan struct{})}
	cfg := Config{Storage: fs, AllowAnonymous: true, DisableControllers: true}
	if stateless {
		cfg.Watch.StateBytes = -1
	}
	api, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	nss, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, ns := range []string{"other", "empty"} {
		if _, err := nss.Create(context.Background(), "", registry.Object{"metadata": map[string]any{"name": ns}}, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(ns string, n, size int) {
		for i := range n {
			data := map[string]any{"i": fmt.Sprint(i), "pad": strings.Repeat("p<&>", size/4)}
			md := map[string]any{"name": fmt.Sprintf("%s-%04d", ns, i), "labels": map[string]any{"odd": fmt.Sprint(i%2 == 1)}}
			if ns == "other" {
				// Strings YAML and indented JSON treat specially: long lines
				// with spaces (YAML wraps them), several lines, quotes,
				// escapes, look-alikes of other types. In the annotations
				// too, for the representations that show metadata only.
				data["text"] = otherText(i)
				data["lines"] = otherLines
				data["typed"] = otherTyped[i]
				md["annotations"] = map[string]any{"text": data["text"], "lines": data["lines"], "typed": data["typed"]}
			}
			obj := registry.Object{"metadata": md, "data": data}
			if _, err := st.Create(context.Background(), ns, obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create("default", 1300, 600) // ~1 MB: three storage pages, past the gzip threshold
	create("other", 5, 40)       // small: under the gzip threshold
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return api, fs, ts
}

// The strings of the objects in namespace "other" (newStreamTestServer).
const otherLines = "first line\n  indented second\n\nlast \"quoted\" \\ \t tab é ✓"

var otherTyped = []string{"0123", "true", "null", "", " padded ", "- dash", "{brace}", "[x]"}

func otherText(i int) string {
	return strings.Repeat("a sentence with spaces and: colons, ", 3+i) + "end"
}

// get sends a GET with a transport that does not decompress, so that the
// test sees the encoding.
func get(t *testing.T, ts *httptest.Server, path, accept, encoding string) (*http.Response, []byte, error) {
	t.Helper()
	return roundTrip(t, ts, "GET", path, accept, encoding)
}

// roundTrip sends one bodiless request, without decompressing the answer.
func roundTrip(t *testing.T, ts *httptest.Server, method, path, accept, encoding string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, nil)
	req.Header.Set("Accept", accept)
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// normalizeTable blanks the cells of date and Age columns (ages move with the
// clock) so that two Tables made a moment apart compare equal.
func normalizeTable(t *testing.T, body []byte) any {
	t.Helper()
	var tab map[string]any
	if err := json.Unmarshal(body, &tab); err != nil {
		t.Fatalf("table: %v: %.200s", err, body)
	}
	cols, _ := tab["columnDefinitions"].([]any)
	rows, _ := tab["rows"].([]any)
	for i, c := range cols {
		if c := c.(map[string]any); c["type"] == "date" || c["name"] == "Age" { // built-in ages are declared strings
			for _, r := range rows {
				r.(map[string]any)["cells"].([]any)[i] = nil
			}
		}
	}
	return tab
}

// yamlAgeCell is an Age cell in the YAML of a Table: the only lines of
// that document indented by two and a dash are cells.
var yamlAgeCell = regexp.MustCompile(`(?m)^  - (\d+[smhdy])+$`)

// blankYAMLAges blanks the Age cells of a Table in YAML (ages move with the
// clock), so that two Tables made a moment apart compare byte for byte.
func blankYAMLAges(body []byte) []byte {
	return yamlAgeCell.ReplaceAll(body, []byte("  - AGE"))
}

// yamlDoc decodes a YAML document that a test read.
func yamlDoc(t *testing.T, body []byte) map[string]any {
	t.Helper()
	v, _, err := codec.DecodeYAML(body)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		t.Fatalf("yaml: %v: %.200q", err, body)
	}
	return m
}

// protobufItems decodes a protobuf list with the codec package and returns
// its items as generic objects.
func protobufItems(t *testing.T, body []byte, msg *codec.Message, itemsField protowire.Number) []map[string]any {
	t.Helper()
	u, err := codec.DecodeEnvelope(body)
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	var items []map[string]any
	err = codec.Walk(u.Raw, func(num protowire.Number, _ protowire.Type, v []byte) error {
		if num != itemsField {
			return nil
		}
		obj, err := msg.Unmarshal(v)
		items = append(items, obj)
		return err
	})
	if err != nil {
		t.Fatalf("list message: %v", err)
	}
	return items
}

// TestListStreamRepresentations: every streamed representation of a whole
// list, and of a page, is the buffered path's for the same snapshot: byte for
// byte for JSON, YAML, protobuf, PartialObjectMetadataList (JSON, YAML and
// protobuf) and Tables in YAML (Age cells blanked), cell for cell for Tables
// in JSON (ages aside), in namespaces, across all namespaces, with selectors, from
// the watch cache, empty and small (plain, Content-Length) or large (gzip
// when asked; protobuf past its buffer: in one pass from the encoding
// cache, and in two passes without it).
func TestListStreamRepresentations(t *testing.T) {
	// The cache's size also bounds the encodings a list holds references
	// to: a small one makes long lists fall back to the second pass. Only
	// protobuf lists depend on it: the other sizes check those alone.
	for _, cache := range []int{32 << 20, 96 << 10, 0} {
		// The last variant also reads storage instead of the watch cache.
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testListStreamRepresentations(t, cache, cache != 32<<20, cache == 0) })
	}
}

func testListStreamRepresentations(t *testing.T, cacheBytes int, protobufOnly, stateless bool) {
	api, _, ts := newStreamTestServer(t, stateless)
	api.protobufListBuffer = 64 << 10 // past the buffer: references to cached encodings, or two passes
	api.pbCache = codec.NewProtobufCache(cacheBytes)

	const (
		pb    = "application/vnd.kubernetes.protobuf"
		table = "application/json;as=Table;v=v1;g=meta.k8s.io"
		pomV1 = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
		pomPB = pb + ";as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
		pomB1 = pb + ";as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io"
		// YAML conversions, meta v1 and v1beta1.
		tableY   = "application/yaml;as=Table;v=v1;g=meta.k8s.io"
		tableYB1 = "application/yaml;as=Table;v=v1beta1;g=meta.k8s.io"
		pomY     = "application/yaml;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
		pomYB1   = "application/yaml;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io"
		other    = "/api/v1/namespaces/other/configmaps"
	)
	paths := []string{
		cmPath,
		other,
		"/api/v1/namespaces/empty/configmaps",
		"/api/v1/configmaps",
		cmPath + "?labelSelector=odd%3Dtrue",
		cmPath + "?fieldSelector=metadata.name%3Ddefault-0007",
		cmPath + "?resourceVersion=0",
		"/api/v1/configmaps?resourceVersion=0&labelSelector=odd%3Dfalse",
		// Pages (JSON and protobuf are streamed, from storage too).
		cmPath + "?limit=500",
		cmPath + "?limit=400&labelSelector=odd%3Dtrue",
	}
	accepts := []string{"application/json", pb, table, table, table, pomV1, pomPB, pomB1, "application/yaml", "application/json", table, pomV1,
		tableY, tableY, tableY, tableYB1, pomY, pomYB1}
	queries := []string{"", "", "", "includeObject=None", "includeObject=Object", "", "", "", "", "pretty=true", "pretty=true", "pretty=true",
		"", "includeObject=None", "includeObject=Object", "includeObject=Metadata", "", ""}
	if protobufOnly {
		accepts, queries = []string{pb}, []string{""}
	}
	for _, path := range paths {
		for ai, accept := range accepts {
			p := path
			if queries[ai] != "" {
				if strings.Contains(p, "?") {
					p += "&" + queries[ai]
				} else {
					p += "?" + queries[ai]
				}
			}
			for _, enc := range []string{"", "gzip"} {
				name := fmt.Sprintf("%s %s %s", p, accept, enc)
				// The watch cache moves on its own: read the streamed list
				// between two buffered ones and accept either.
				api.bufferLists.Store(true)
				_, before, err1 := get(t, ts, p, accept, enc)
				api.bufferLists.Store(false)
				resp, streamed, err2 := get(t, ts, p, accept, enc)
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", name, err1, err2)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d %s", name, resp.StatusCode, streamed)
				}
				if resp.Header.Get("Content-Encoding") == "gzip" {
					if enc != "gzip" {
						t.Fatalf("%s: gzip not asked for", name)
					}
					if resp.Header.Get("Content-Length") != "" {
						t.Fatalf("%s: gzip with Content-Length", name)
					}
					streamed = gunzip(t, streamed)
					if len(streamed) < gzipThreshold {
						t.Fatalf("%s: %d bytes compressed", name, len(streamed))
					}
				} else if len(streamed) >= gzipThreshold && enc == "gzip" {
					t.Fatalf("%s: %d bytes not compressed", name, len(streamed))
				} else if len(streamed) < gzipThreshold && resp.Header.Get("Content-Length") != fmt.Sprint(len(streamed)) {
					t.Fatalf("%s: small list without its Content-Length", name)
				} else if strings.HasPrefix(accept, pb) && resp.Header.Get("Content-Length") != fmt.Sprint(len(streamed)) {
					// A protobuf list knows its length before its first byte.
					t.Fatalf("%s: protobuf list of %d bytes with Content-Length %q", name, len(streamed), resp.Header.Get("Content-Length"))
				} else if !strings.HasPrefix(accept, pb) && len(streamed) >= gzipThreshold && resp.Header.Get("Content-Length") != "" &&
					!(strings.Contains(p, "limit=") && strings.Contains(accept, ";as=")) { // Table and PartialObjectMetadata pages are not streamed
					t.Fatalf("%s: streamed list of unknown length with Content-Length %q", name, resp.Header.Get("Content-Length"))
				}
				if bytes.HasPrefix(before, []byte{0x1f, 0x8b}) {
					before = gunzip(t, before)
				}
				wantType := strings.Split(accept, ";")[0]
				if ct := resp.Header.Get("Content-Type"); ct != wantType {
					t.Fatalf("%s: Content-Type %q", name, ct)
				}
				same := func(a, b []byte) bool {
					switch accept {
					case table:
						return reflect.DeepEqual(normalizeTable(t, a), normalizeTable(t, b))
					case tableY, tableYB1:
						return bytes.Equal(blankYAMLAges(a), blankYAMLAges(b))
					}
					return bytes.Equal(a, b)
				}
				if !same(before, streamed) {
					api.bufferLists.Store(true)
					_, after, _ := get(t, ts, p, accept, "")
					api.bufferLists.Store(false)
					if !same(after, streamed) {
						t.Fatalf("%s: streamed list differs from the buffered one (%d and %d bytes)\n%.300q\n%.300q", name, len(streamed), len(before), streamed, before)
					}
				}
				switch {
				case accept == pb && path == cmPath:
					items := protobufItems(t, streamed, registry.ConfigMaps().Protobuf, 2)
					if len(items) != 1300 || str(items[7], "metadata", "name") != "default-0007" || str(items[7], "data", "i") != "7" {
						t.Fatalf("%s: %d items decoded", name, len(items))
					}
				case accept == pomB1 && path == cmPath:
					items := protobufItems(t, streamed, codec.PartialObjectMetadataMessage, 1)
					if len(items) != 1300 || str(items[1299], "metadata", "name") != "default-1299" {
						t.Fatalf("%s: %d items decoded", name, len(items))
					}
				case accept == "application/json" && path == "/api/v1/configmaps":
					var list map[string]any
					if err := json.Unmarshal(streamed, &list); err != nil {
						t.Fatal(err)
					}
					if n := len(list["items"].([]any)); n != 1305 {
						t.Fatalf("%s: %d items", name, n)
					}
				case accept == table && queries[ai] == "" && path == cmPath:
					tab := normalizeTable(t, streamed).(map[string]any)
					rows := tab["rows"].([]any)
					if len(rows) != 1300 || len(tab["columnDefinitions"].([]any)) != 3 {
						t.Fatalf("%s: %d rows", name, len(rows))
					}
					row := rows[3].(map[string]any)
					if row["cells"].([]any)[0] != "default-0003" || str(row["object"].(map[string]any), "kind") != "PartialObjectMetadata" {
						t.Fatalf("%s: row %v", name, row)
					}
				case accept == tableY && queries[ai] == "" && path == cmPath:
					// The Age cells the comparison blanks are there.
					rows, _ := yamlDoc(t, streamed)["rows"].([]any)
					if n := len(yamlAgeCell.FindAll(streamed, -1)); n != 1300 || len(rows) != 1300 {
						t.Fatalf("%s: %d rows, %d Age cells", name, len(rows), n)
					}
				case accept == tableY && queries[ai] == "includeObject=Object" && path == other:
					// Long strings wrap; the rows read back as the objects.
					if bytes.Contains(streamed, []byte(otherText(4))) {
						t.Fatalf("%s: a long string on one line:\n%s", name, streamed)
					}
					rows, _ := yamlDoc(t, streamed)["rows"].([]any)
					for i, r := range rows {
						row, _ := r.(map[string]any)
						obj, _ := row["object"].(map[string]any)
						if str(obj, "kind") != "ConfigMap" || str(obj, "data", "text") != otherText(i) || str(obj, "data", "lines") != otherLines || str(obj, "data", "typed") != otherTyped[i] {
							t.Fatalf("%s: row %d: %v", name, i, row)
						}
					}
					if len(rows) != 5 {
						t.Fatalf("%s: %d rows", name, len(rows))
					}
				case (accept == pomY || accept == pomYB1) && path == other:
					version := "meta.k8s.io/v1"
					if accept == pomYB1 {
						version += "beta1"
					}
					items, _ := yamlDoc(t, streamed)["items"].([]any)
					for i, it := range items {
						md, _ := it.(map[string]any)
						if str(md, "apiVersion") != version ||
							str(md, "metadata", "annotations", "text") != otherText(i) || str(md, "metadata", "annotations", "lines") != otherLines || str(md, "metadata", "annotations", "typed") != otherTyped[i] {
							t.Fatalf("%s: item %d: %v", name, i, md)
						}
					}
					if len(items) != 5 {
						t.Fatalf("%s: %d items", name, len(items))
					}
				case accept == pomYB1 && path == cmPath:
					items, _ := yamlDoc(t, streamed)["items"].([]any)
					if len(items) != 1300 || str(items[1299].(map[string]any), "metadata", "name") != "default-1299" {
						t.Fatalf("%s: %d items", name, len(items))
					}
				}
			}
		}
	}
	// Small pages go out whole; errors before the first byte are a Status.
	resp, body, _ := get(t, ts, cmPath+"?limit=5", "application/json", "")
	if resp.Header.Get("Content-Length") == "" || !bytes.Contains(body, []byte(`"continue":"`)) {
		t.Fatalf("paged list: %s", body)
	}
	if resp, _, _ := get(t, ts, cmPath, "application/yaml", ""); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("yaml: %d", resp.StatusCode)
	}
	if resp, _, _ := get(t, ts, cmPath+"?includeObject=Bogus", table, ""); resp.StatusCode != 400 {
		t.Fatalf("bad includeObject: %d", resp.StatusCode)
	}
	if resp, _, _ := get(t, ts, cmPath+"?resourceVersion=abc", pb, ""); resp.StatusCode != 400 {
		t.Fatalf("bad resourceVersion: %d", resp.StatusCode)
	}
}

// TestListStreamErrors: a storage failure before the first gzipThreshold
// bytes (or, for protobuf, anywhere in the first pass) is a plain 500
// Status; after the status line went out the response is cut short, so a
// client never takes a partial list for a complete one.
func TestListStreamErrors(t *testing.T) {
	api, fs, ts := newStreamTestServer(t, true)
	api.protobufListBuffer = 64 << 10
	api.pbCache = nil // the two-pass protobuf list: its second pass can fail
	const pb = "application/vnd.kubernetes.protobuf"
	for _, tc := range []struct {
		accept, enc string
		failAt      int64 // storage page (1-based) that fails; the list has 3
		broken      bool  // true: a cut body; false: a 500 Status
	}{
		{"application/json", "", 1, false},
		{"application/json", "", 2, true},
		{"application/json", "gzip", 3, true},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", "gzip", 3, true},
		{"application/yaml;as=Table;v=v1;g=meta.k8s.io", "", 1, false},
		{"application/yaml;as=Table;v=v1beta1;g=meta.k8s.io", "gzip", 3, true},
		{"application/yaml;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "", 2, true},
		{pb, "", 3, false}, // the first pass measures: nothing written yet
		{pb, "gzip", 5, true},
	} {
		fs.pages.Store(0)
		fs.failAt.Store(tc.failAt)
		resp, body, err := get(t, ts, cmPath, tc.accept, tc.enc)
		fs.failAt.Store(0)
		name := fmt.Sprintf("%s %s page %d", tc.accept, tc.enc, tc.failAt)
		if !tc.broken {
			if err != nil || resp.StatusCode != 500 || !bytes.Contains(body, []byte("injected storage failure")) {
				t.Fatalf("%s: %v %d %.200q", name, err, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", name, resp.StatusCode)
		}
		if err == nil {
			if tc.enc == "gzip" {
				zr, zerr := gzip.NewReader(bytes.NewReader(body))
				if zerr == nil {
					_, zerr = io.ReadAll(zr)
				}
				if zerr != nil {
					continue // a truncated gzip stream
				}
			}
			t.Fatalf("%s: the response looks complete (%d bytes)", name, len(body))
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "unexpected EOF") {
			t.Logf("%s: body ends with %v", name, err)
		}
	}
}

// TestListStreamClientGone: when the client goes away mid-list, the server
// stops reading storage.
func TestListStreamClientGone(t *testing.T) {
	_, fs, ts := newStreamTestServer(t, true)
	fs.pages.Store(0)
	fs.holdAt.Store(2) // the second page waits until the request ends
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+cmPath, nil)
	req.Header.Set("Accept-Encoding", "identity")
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	<-fs.held
	cancel() // the client goes away
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for fs.pages.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := fs.pages.Load(); n != 2 {
		t.Fatalf("storage pages read after the client left: %d in all, want 2", n)
	}
}
