package apiserver

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/registry"
)

// Built-in types' Table columns are declared as kube-apiserver's printers
// declare them (ages and counts are strings), while their cells keep their
// JSON types; a bookmark's row shows kube's "<unknown>" age, and a custom
// resource's (a JSONPath date column) no age.
func TestBuiltinTableColumns(t *testing.T) {
	api, ts := newTestServer(t)
	for _, res := range append(registry.Events(registry.EventOptions{}), registry.Secrets(), registry.Leases()) {
		if err := api.Register(res); err != nil {
			t.Fatal(err)
		}
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c1"},"data":{"a":"b"}}`)
	do(t, ts, "POST", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"s1"},"stringData":{"a":"b"}}`)
	do(t, ts, "POST", leasesPath, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l1"},"spec":{"holderIdentity":"me"}}`)
	do(t, ts, "POST", coreEvents, `{"metadata":{"name":"e1"},"involvedObject":{"kind":"ConfigMap","name":"c1","namespace":"default"},"reason":"Test","message":"hello","type":"Normal"}`)
	for path, want := range map[string]string{
		"/api/v1/namespaces":                 "Name:string Status:string Age:string",
		cmPath:                               "Name:string Data:string Age:string",
		"/api/v1/namespaces/default/secrets": "Name:string Type:string Data:string Age:string",
		leasesPath:                           "Name:string Holder:string Age:string",
		coreEvents:                           "Last Seen:string Type:string Reason:string Object:string Subobject:string Source:string Message:string First Seen:string Count:string Name:string",
		"/apis/events.k8s.io/v1/namespaces/default/events": "Last Seen:string Type:string Reason:string Object:string Subobject:string Source:string Message:string First Seen:string Count:string Name:string",
	} {
		r := do(t, ts, "GET", path, "", "Accept", acceptTableV1)
		tbl := r.object(t)
		if _, ok := tbl["columnDefinitions"].([]any); !ok {
			t.Fatalf("%s: %d %s", path, r.code, r.body)
		}
		var cols []string
		for _, c := range tbl["columnDefinitions"].([]any) {
			c := c.(map[string]any)
			cols = append(cols, fmt.Sprintf("%s:%s", c["name"], c["type"]))
		}
		if got := strings.Join(cols, " "); got != want {
			t.Errorf("%s columns %s, want %s", path, got, want)
		}
	}
	cm := do(t, ts, "GET", cmPath+"/c1", "", "Accept", acceptTableV1).object(t)
	if cells := cm["rows"].([]any)[0].(map[string]any)["cells"].([]any); cells[1] != float64(1) || !strings.HasSuffix(cells[2].(string), "s") {
		t.Errorf("configmap cells %v: want a count and an age", cells)
	}

	bookmarkCells := func(path string) []any {
		t.Helper()
		resp := openStream(t, ts, ts.URL+path+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", acceptTableV1)
		br := newLineReader(resp.Body)
		for {
			ev := readJSONEvent(t, br)
			if ev["type"] == "BOOKMARK" {
				return ev["object"].(map[string]any)["rows"].([]any)[0].(map[string]any)["cells"].([]any)
			}
		}
	}
	for path, want := range map[string][]any{
		cmPath:               {"", float64(0), "<unknown>"},
		"/api/v1/namespaces": {"", "", "<unknown>"}, // JSONPath columns only: the raw path
		leasesPath:           {"", "", "<unknown>"},
	} {
		if cells := bookmarkCells(path); !reflect.DeepEqual(cells, want) {
			t.Errorf("%s bookmark cells %#v, want kube's %#v", path, cells, want)
		}
	}
	do(t, ts, "POST", leasesPath, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"free"},"spec":{}}`)
	lease := do(t, ts, "GET", leasesPath+"/free", "", "Accept", acceptTableV1).object(t)
	if cells := lease["rows"].([]any)[0].(map[string]any)["cells"].([]any); cells[1] != "" {
		t.Errorf("a lease without a holder shows %#v, want kube's \"\"", cells[1])
	}
	if cells := bookmarkCells(wdPath); cells[len(cells)-1] != nil {
		t.Errorf("widget bookmark cells %q: want no age", cells)
	}
}
