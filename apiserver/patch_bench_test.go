package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/schema"
)

// The patch and apply benchmarks run through ServeHTTP on a durable on-disk
// Badger store, on widgets with 50 ports (a list map keyed by name).

func patchBenchServer(b *testing.B) *Server {
	b.Helper()
	api := benchServer(b)
	var gs schema.Schema
	if err := json.Unmarshal([]byte(gadgetSchema), &gs); err != nil {
		b.Fatal(err)
	}
	for _, res := range []registry.Resource{widgetResource(b), {Group: "example.dev", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true, Schema: &gs}} {
		if err := api.Register(res); err != nil {
			b.Fatal(err)
		}
	}
	return api
}

// ports50 is the JSON of 50 ports, the first with port number first.
func ports50(first int) string {
	ps := make([]string, 50)
	for i := range ps {
		port := 8000 + i
		if i == 0 {
			port = first
		}
		ps[i] = fmt.Sprintf(`{"name":"port-%02d","port":%d,"protocol":"TCP"}`, i, port)
	}
	return "[" + strings.Join(ps, ",") + "]"
}

func applyWidget(kind, name string, firstPort int) string {
	return fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":%q,"metadata":{"name":%q,"labels":{"app":"bench"}},"spec":{"size":3,"color":"red","ports":%s}}`,
		kind, name, ports50(firstPort))
}

// cpuMeter reports the process CPU time per operation ("cpu-ms/op"), which a
// busy shared machine distorts less than wall time.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func meterCPU(b *testing.B) *cpuMeter {
	b.ReportAllocs()
	return &cpuMeter{b: b, start: processCPU()}
}

func (m *cpuMeter) stop() {
	if m.b.N > 0 && m.start > 0 {
		m.b.ReportMetric(float64(processCPU()-m.start)/float64(time.Millisecond)/float64(m.b.N), "cpu-ms/op")
	}
}

func servePatch(b *testing.B, h http.Handler, path, ct, body string, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPatch, path, strings.NewReader(body))
	req.Header.Set("Content-Type", ct)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("PATCH %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec
}

func rvOf(b *testing.B, body []byte) string {
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		b.Fatal(err)
	}
	return o.Metadata.ResourceVersion
}

// BenchmarkApplyCreate: server-side apply creating a widget with 50 ports.
func BenchmarkApplyCreate(b *testing.B) {
	api := patchBenchServer(b)
	m := meterCPU(b)
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("w-%06d", i)
		servePatch(b, api, wdPath+"/"+name+"?fieldManager=bench", ctApply, applyWidget("Widget", name, 80), 201)
	}
	m.stop()
}

// BenchmarkApplyNoop: re-applying an unchanged configuration, which must not
// write (the resourceVersion stays).
func BenchmarkApplyNoop(b *testing.B) {
	api := patchBenchServer(b)
	cfg := applyWidget("Widget", "w", 80)
	rv := rvOf(b, servePatch(b, api, wdPath+"/w?fieldManager=bench", ctApply, cfg, 201).Body.Bytes())
	m := meterCPU(b)
	for b.Loop() {
		servePatch(b, api, wdPath+"/w?fieldManager=bench", ctApply, cfg, 200)
	}
	m.stop()
	if got := rvOf(b, servePatch(b, api, wdPath+"/w?fieldManager=bench", ctApply, cfg, 200).Body.Bytes()); got != rv {
		b.Fatalf("a no-op apply wrote: resourceVersion %s, was %s", got, rv)
	}
}

// BenchmarkApplyChange: an apply that changes one port.
func BenchmarkApplyChange(b *testing.B) {
	api := patchBenchServer(b)
	cfgs := []string{applyWidget("Widget", "w", 80), applyWidget("Widget", "w", 81)}
	servePatch(b, api, wdPath+"/w?fieldManager=bench", ctApply, cfgs[0], 201)
	m := meterCPU(b)
	for i := 0; b.Loop(); i++ {
		servePatch(b, api, wdPath+"/w?fieldManager=bench", ctApply, cfgs[(i+1)%2], 200)
	}
	m.stop()
}

// BenchmarkApplyChangeScalar: kbench's re-apply, a small widget whose
// configuration changes one string (spec.color) each time.
func BenchmarkApplyChangeScalar(b *testing.B) {
	api := patchBenchServer(b)
	cfg := func(color string) string {
		return `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w","labels":{"app":"kbench"}},` +
			`"spec":{"size":7,"color":"` + color + `","replicas":3,"tags":["bench","t3"],` +
			`"ports":[{"name":"http","port":80,"protocol":"TCP"},{"name":"metrics","port":9007,"protocol":"TCP"}]}}`
	}
	cfgs := []string{cfg("blue"), cfg("green")}
	servePatch(b, api, wdPath+"/w?fieldManager=bench&force=true", ctApply, cfgs[0], 201)
	m := meterCPU(b)
	for i := 0; b.Loop(); i++ {
		servePatch(b, api, wdPath+"/w?fieldManager=bench&force=true", ctApply, cfgs[(i+1)%2], 200)
	}
	m.stop()
}

// benchPatch runs one patch type against an object with 50 ports, each patch
// changing the first port.
func benchPatch(b *testing.B, path, ct string, bodies [2]string) {
	b.Helper()
	api := patchBenchServer(b)
	kind := "Widget"
	if strings.Contains(path, "gadgets") {
		kind = "Gadget"
	}
	servePatch(b, api, path+"?fieldManager=bench", ctApply, applyWidget(kind, "w", 80), 201)
	m := meterCPU(b)
	for i := 0; b.Loop(); i++ {
		servePatch(b, api, path, ct, bodies[(i+1)%2], 200)
	}
	m.stop()
}

func BenchmarkPatchJSON(b *testing.B) {
	benchPatch(b, wdPath+"/w", ctJSONPatch, [2]string{
		`[{"op":"replace","path":"/spec/ports/0/port","value":80}]`,
		`[{"op":"replace","path":"/spec/ports/0/port","value":81}]`,
	})
}

func BenchmarkPatchMerge(b *testing.B) {
	benchPatch(b, wdPath+"/w", ctMergePatch, [2]string{
		`{"spec":{"ports":` + ports50(80) + `}}`,
		`{"spec":{"ports":` + ports50(81) + `}}`,
	})
}

func BenchmarkPatchStrategic(b *testing.B) {
	benchPatch(b, gdPath+"/w", ctStrategic, [2]string{
		`{"spec":{"ports":[{"name":"port-00","port":80}]}}`,
		`{"spec":{"ports":[{"name":"port-00","port":81}]}}`,
	})
}
