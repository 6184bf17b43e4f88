package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage/badger"
)

// benchItems returns n configmaps as a list hands them to the encoder:
// stored JSON with resourceVersion, without kind and apiVersion, each with
// managedFields, a few labels and three data keys (about 700 bytes).
func benchItems(n int) [][]byte {
	items := make([][]byte, n)
	ts := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	for i := range items {
		items[i] = fmt.Appendf(nil, `{"metadata":{"resourceVersion":"%d","creationTimestamp":%q,"labels":{"app":"bench","tier":"backend"},`+
			`"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:a":{},"f:b":{},"f:c":{}},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}}},"manager":"bench","operation":"Update","time":%q}],`+
			`"name":"config-%06d","namespace":"default","uid":"6f1f7c2e-8d4b-4f0e-9a4c-%012d"},`+
			`"data":{"a":"value-a-%d","b":"some longer value for key b, %d","c":"{\"json\":\"inside\",\"n\":%d}"}}`,
			1000+i, ts, ts, i, i, i, i, i)
	}
	return items
}

// discardWriter is a ResponseWriter that counts and drops the body.
type discardWriter struct {
	h http.Header
	n int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }

// BenchmarkListEncode encodes and writes a list of 10,000 configmaps in each
// representation (no storage: the items are in memory, as a list read
// returns them). resp-bytes is the size of the response.
func BenchmarkListEncode(b *testing.B) {
	s := &Server{}
	items := benchItems(10000)
	res := registry.ConfigMaps()
	rem := int64(0)
	lm := meta.ListMeta{ResourceVersion: "20000", RemainingItemCount: &rem}
	for _, tc := range []struct{ name, accept string }{
		{"JSON", "application/json"},
		{"Protobuf", "application/vnd.kubernetes.protobuf"},
		{"Table", "application/json;as=Table;g=meta.k8s.io;v=v1"},
		{"TableNoObject", "application/json;as=Table;g=meta.k8s.io;v=v1"},
		{"PartialObjectMetadataList", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"PartialObjectMetadataListProtobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"YAML", "application/yaml"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			target := "/api/v1/namespaces/default/configmaps"
			if tc.name == "TableNoObject" {
				target += "?includeObject=None"
			}
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Accept", tc.accept)
			w := &discardWriter{h: http.Header{}}
			m := meterCPU(b)
			for b.Loop() {
				p := payload{kind: bodyList, res: &res, items: items, listMeta: lm}
				c, err := p.choose(r)
				if err != nil {
					b.Fatal(err)
				}
				w.n = 0
				s.writeEncoded(w, r, http.StatusOK, c, p, false)
			}
			m.stop()
			b.ReportMetric(float64(w.n), "resp-bytes")
		})
	}
}

// BenchmarkTableWidgets makes the Table of 10,000 widgets, whose printer
// columns are JSONPaths: only the cells' values are decoded.
func BenchmarkTableWidgets(b *testing.B) {
	s := &Server{}
	res := widgetResource(b)
	items := make([][]byte, 10000)
	for i, it := range benchItems(len(items)) {
		// A configmap's metadata, a widget's spec and status.
		md, _ := codec.TopLevelField(it, "metadata")
		items[i] = fmt.Appendf(nil, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":%s,"spec":{"size":%d,"color":"red","tags":["a","b"]},"status":{"phase":"Running","replicas":2}}`, md, i)
	}
	r := httptest.NewRequest("GET", "/apis/example.dev/v1/namespaces/default/widgets?includeObject=None", nil)
	r.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	w := &discardWriter{h: http.Header{}}
	m := meterCPU(b)
	for b.Loop() {
		p := payload{kind: bodyList, res: &res, items: items, listMeta: meta.ListMeta{ResourceVersion: "20000"}}
		c, err := p.choose(r)
		if err != nil {
			b.Fatal(err)
		}
		w.n = 0
		s.writeEncoded(w, r, http.StatusOK, c, p, false)
	}
	m.stop()
	b.ReportMetric(float64(w.n), "resp-bytes")
}

// BenchmarkObjectEncode encodes one configmap (a get) as JSON and protobuf.
func BenchmarkObjectEncode(b *testing.B) {
	s := &Server{}
	item := benchItems(1)[0]
	res := registry.ConfigMaps()
	for _, tc := range []struct{ name, accept string }{
		{"JSON", "application/json"},
		{"Protobuf", "application/vnd.kubernetes.protobuf"},
		{"PartialObjectMetadataProtobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{"Table", "application/json;as=Table;g=meta.k8s.io;v=v1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/api/v1/namespaces/default/configmaps/config-000000", nil)
			r.Header.Set("Accept", tc.accept)
			w := &discardWriter{h: http.Header{}}
			m := meterCPU(b)
			for b.Loop() {
				p := payload{kind: bodyObject, res: &res, json: item}
				c, err := p.choose(r)
				if err != nil {
					b.Fatal(err)
				}
				w.n = 0
				s.writeEncoded(w, r, http.StatusOK, c, p, false)
			}
			m.stop()
			b.ReportMetric(float64(w.n), "resp-bytes")
		})
	}
}

// BenchmarkListHandler serves GET on 10,000 stored configmaps through the
// whole handler (in-memory Badger), in each representation, uncompressed and
// gzip-compressed.
func BenchmarkListHandler(b *testing.B) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, DisableControllers: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		b.Fatal(err)
	}
	st, _ := api.Registry().Store(meta.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	for i := range 10000 {
		obj := registry.Object{"metadata": map[string]any{"name": fmt.Sprintf("config-%06d", i), "labels": map[string]any{"app": "bench", "tier": "backend"}},
			"data": map[string]any{"a": fmt.Sprint("value-a-", i), "b": "some longer value for key b", "c": strings.Repeat("c", 40)}}
		if _, err := st.Create(context.Background(), "default", obj, registry.WriteOptions{FieldManager: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, accept, encoding string }{
		{"JSON", "application/json", ""},
		{"Protobuf", "application/vnd.kubernetes.protobuf", ""},
		{"Table", "application/json;as=Table;g=meta.k8s.io;v=v1", ""},
		{"JSONGzip", "application/json", "gzip"},
		{"ProtobufGzip", "application/vnd.kubernetes.protobuf", "gzip"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			m := meterCPU(b)
			for b.Loop() {
				r := httptest.NewRequest("GET", "/api/v1/namespaces/default/configmaps", nil)
				r.Header.Set("Accept", tc.accept)
				if tc.encoding != "" {
					r.Header.Set("Accept-Encoding", tc.encoding)
				}
				w.n, w.h = 0, http.Header{}
				api.ServeHTTP(w, r)
			}
			m.stop()
			b.ReportMetric(float64(w.n), "resp-bytes")
		})
	}
}
