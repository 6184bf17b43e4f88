package apiserver

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/meta"
)

func TestListPagingAndSelectors(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", "/api/v1/namespaces", `{"metadata":{"name":"other"}}`)
	for i := 0; i < 5; i++ {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d","labels":{"i":"%d","even":"%v"}}}`, i, i, i%2 == 0))
	}
	do(t, ts, "POST", "/api/v1/namespaces/other/configmaps", `{"metadata":{"name":"o1"}}`)

	// Pages of two form one snapshot: writes between pages are not seen.
	page1 := do(t, ts, "GET", cmPath+"?limit=2", "").object(t)
	rv := str(page1, "metadata", "resourceVersion")
	cont := str(page1, "metadata", "continue")
	if len(page1["items"].([]any)) != 2 || cont == "" || str(page1, "metadata", "remainingItemCount") != "3" {
		t.Fatalf("page 1: %v", page1)
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c9"}}`)
	do(t, ts, "DELETE", cmPath+"/c4", "")
	var names []string
	for _, it := range page1["items"].([]any) {
		names = append(names, str(it.(map[string]any), "metadata", "name"))
	}
	for cont != "" {
		page := do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(cont), "").object(t)
		if str(page, "metadata", "resourceVersion") != rv {
			t.Fatalf("page resourceVersion %s, want %s", str(page, "metadata", "resourceVersion"), rv)
		}
		for _, it := range page["items"].([]any) {
			names = append(names, str(it.(map[string]any), "metadata", "name"))
		}
		cont = str(page, "metadata", "continue")
		if cont == "" && page["metadata"].(map[string]any)["remainingItemCount"] != nil {
			t.Fatalf("last page has remainingItemCount: %v", page)
		}
	}
	if strings.Join(names, ",") != "c0,c1,c2,c3,c4" {
		t.Fatalf("paged names %v, want the snapshot c0..c4", names)
	}

	// All namespaces.
	all := do(t, ts, "GET", "/api/v1/configmaps", "").object(t)
	if n := len(all["items"].([]any)); n != 6 {
		t.Fatalf("all-namespaces list has %d items, want 6", n)
	}

	// Selectors; no remainingItemCount with selectors.
	sel := do(t, ts, "GET", cmPath+"?labelSelector="+url.QueryEscape("even=true,i notin (0)"), "").object(t)
	if n := len(sel["items"].([]any)); n != 1 || str(sel["items"].([]any)[0].(map[string]any), "metadata", "name") != "c2" {
		t.Fatalf("label selector: %v", sel)
	}
	sel = do(t, ts, "GET", cmPath+"?limit=1&labelSelector=even%3Dfalse", "").object(t)
	if len(sel["items"].([]any)) != 1 || str(sel, "metadata", "continue") == "" || sel["metadata"].(map[string]any)["remainingItemCount"] != nil {
		t.Fatalf("selected page: %v", sel)
	}
	fs := do(t, ts, "GET", "/api/v1/configmaps?fieldSelector="+url.QueryEscape("metadata.namespace=other"), "").object(t)
	if n := len(fs["items"].([]any)); n != 1 {
		t.Fatalf("field selector on namespace: %v", fs)
	}
	fs = do(t, ts, "GET", cmPath+"?fieldSelector="+url.QueryEscape("metadata.name!=c1"), "").object(t)
	if n := len(fs["items"].([]any)); n != 4 {
		t.Fatalf("field selector != : %d items", n)
	}

	// Malformed and forged continue tokens are 400s.
	do(t, ts, "GET", cmPath+"?limit=2&continue=garbage", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(str(page1, "metadata", "continue"))+"x", "").status(t, 400, meta.StatusReasonBadRequest)
	// A token forged with a valid payload but no valid signature is refused.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":1,"start":"other/"}`)) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	do(t, ts, "GET", cmPath+"?limit=2&continue="+url.QueryEscape(forged), "").status(t, 400, meta.StatusReasonBadRequest)
	// A token from one namespace cannot read another.
	do(t, ts, "GET", "/api/v1/namespaces/other/configmaps?limit=2&continue="+url.QueryEscape(str(page1, "metadata", "continue")), "").status(t, 400, meta.StatusReasonBadRequest)

	// resourceVersion / resourceVersionMatch validation.
	do(t, ts, "GET", cmPath+"?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=", "").status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "GET", cmPath+"?resourceVersionMatch=Exact", "").status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "GET", cmPath+"?resourceVersion=0&resourceVersionMatch=Exact", "").status(t, 422, meta.StatusReasonInvalid)
	do(t, ts, "GET", cmPath+"?resourceVersion=abc", "").status(t, 400, meta.StatusReasonBadRequest)
	do(t, ts, "GET", cmPath+"?limit=1&continue="+url.QueryEscape(str(page1, "metadata", "continue"))+"&resourceVersion=5", "").status(t, 400, meta.StatusReasonBadRequest)

	// An exact list at the first page's revision sees the old snapshot.
	exact := do(t, ts, "GET", cmPath+"?resourceVersion="+rv+"&resourceVersionMatch=Exact", "").object(t)
	if n := len(exact["items"].([]any)); n != 5 || str(exact, "metadata", "resourceVersion") != rv {
		t.Fatalf("exact list: %d items at %s", n, str(exact, "metadata", "resourceVersion"))
	}
}

func TestTable(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"t1"},"spec":{"size":4,"color":"green"}}`)
	accept := "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	r := do(t, ts, "GET", wdPath, "", "Accept", accept)
	tbl := r.object(t)
	if str(tbl, "kind") != "Table" || str(tbl, "apiVersion") != "meta.k8s.io/v1" {
		t.Fatalf("table: %s", r.body)
	}
	var cols []string
	for _, c := range tbl["columnDefinitions"].([]any) {
		cols = append(cols, c.(map[string]any)["name"].(string))
	}
	if strings.Join(cols, ",") != "Name,Size,Color,Age" {
		t.Fatalf("columns %v", cols)
	}
	row := tbl["rows"].([]any)[0].(map[string]any)
	cells := row["cells"].([]any)
	if cells[0] != "t1" || cells[1] != float64(4) || cells[2] != "green" || !strings.HasSuffix(cells[3].(string), "s") {
		t.Fatalf("cells %v", cells)
	}
	if str(row, "object", "kind") != "PartialObjectMetadata" || str(row, "object", "metadata", "name") != "t1" {
		t.Fatalf("row object %v", row["object"])
	}
	one := do(t, ts, "GET", wdPath+"/t1", "", "Accept", accept).object(t)
	if len(one["rows"].([]any)) != 1 {
		t.Fatalf("single-object table: %v", one)
	}
	cm := do(t, ts, "GET", cmPath, "", "Accept", accept).object(t)
	if !strings.Contains(str(cm, "columnDefinitions"), `"name":"Data"`) {
		t.Fatalf("configmap table: %v", cm)
	}
	// YAML on request.
	y := do(t, ts, "GET", wdPath+"/t1", "", "Accept", "application/yaml")
	if y.header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(y.body), "size: 4") {
		t.Fatalf("yaml: %s", y.body)
	}
}

func TestWatch(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"before"},"spec":{"size":1}}`)
	list := do(t, ts, "GET", wdPath, "").object(t)
	rv := str(list, "metadata", "resourceVersion")

	w := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rv)
	created := do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}`).object(t)
	ev := w.next(t)
	if ev["type"] != "ADDED" || str(ev["object"].(map[string]any), "metadata", "name") != "w1" ||
		str(ev["object"].(map[string]any), "metadata", "resourceVersion") != str(created, "metadata", "resourceVersion") {
		t.Fatalf("event %v", ev)
	}
	do(t, ts, "PATCH", wdPath+"/w1", `{"spec":{"size":2}}`, "Content-Type", "application/merge-patch+json")
	if ev := w.next(t); ev["type"] != "MODIFIED" || str(ev["object"].(map[string]any), "spec", "size") != "2" {
		t.Fatalf("event %v", ev)
	}
	do(t, ts, "DELETE", wdPath+"/w1", "")
	if ev := w.next(t); ev["type"] != "DELETED" || str(ev["object"].(map[string]any), "metadata", "name") != "w1" {
		t.Fatalf("event %v", ev)
	}

	// Without a resourceVersion, a watch starts with the current state.
	w2 := startWatch(t, ts, wdPath+"?watch=true")
	if ev := w2.next(t); ev["type"] != "ADDED" || str(ev["object"].(map[string]any), "metadata", "name") != "before" {
		t.Fatalf("initial event %v", ev)
	}

	// A single-object watch and a label-selected watch see only their objects.
	w3 := startWatch(t, ts, wdPath+"?watch=1&resourceVersion="+rv+"&fieldSelector=metadata.name%3Dw2")
	w4 := startWatch(t, ts, "/apis/example.dev/v1/widgets?watch=1&resourceVersion="+rv+"&labelSelector=pick")
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":1}}`)
	do(t, ts, "POST", wdPath, `{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":"w2","labels":{"pick":"yes"}},"spec":{"size":1}}`)
	if ev := w3.next(t); str(ev["object"].(map[string]any), "metadata", "name") != "w2" {
		t.Fatalf("field-selected watch got %v", ev)
	}
	if ev := w4.next(t); str(ev["object"].(map[string]any), "metadata", "name") != "w2" {
		t.Fatalf("label-selected watch got %v", ev)
	}

	// Streaming list: initial events then the initial-events-end bookmark.
	w5 := startWatch(t, ts, wdPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	seen := map[string]bool{}
	for {
		ev := w5.next(t)
		obj := ev["object"].(map[string]any)
		if ev["type"] == "BOOKMARK" {
			if str(obj, "metadata", "annotations", "k8s.io/initial-events-end") != "true" || str(obj, "kind") != "Widget" {
				t.Fatalf("bookmark %v", ev)
			}
			break
		}
		seen[str(obj, "metadata", "name")] = true
	}
	if len(seen) != 3 || !seen["before"] || !seen["w2"] || !seen["w3"] {
		t.Fatalf("initial events %v", seen)
	}
	do(t, ts, "GET", wdPath+"?watch=1&sendInitialEvents=true", "").status(t, 422, meta.StatusReasonInvalid)
}
