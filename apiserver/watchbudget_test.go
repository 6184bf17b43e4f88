package apiserver

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/watch"
)

// listedNames returns the names of the items of a list,
// following continue tokens when limit is set.
func listedNames(t *testing.T, get func(string) map[string]any, path string) []string {
	t.Helper()
	var names []string
	cont := ""
	for {
		p := path
		if cont != "" {
			p += "&continue=" + url.QueryEscape(cont)
		}
		l := get(p)
		for _, it := range l["items"].([]any) {
			names = append(names, str(it.(map[string]any), "metadata", "name"))
		}
		if cont = str(l, "metadata", "continue"); cont == "" {
			return names
		}
	}
}

// The caches of all types share one memory budget: a type whose state the
// budget drops goes on answering lists, gets and watches exactly as before,
// from storage, and its state comes back once there is room.
func TestWatchCacheBudgetAcrossTypes(t *testing.T) {
	api, ts, _ := newWatchServer(t, watch.Settings{StateBytes: 48 << 10, ReadmitInterval: 200 * time.Millisecond}, false)
	get := func(p string) map[string]any {
		r := do(t, ts, "GET", p, "")
		if r.code != 200 {
			t.Fatalf("GET %s: %d %s", p, r.code, r.body)
		}
		return r.object(t)
	}
	var widgets []string
	for i := range 30 {
		name := fmt.Sprintf("w%02d", i)
		widgets = append(widgets, name)
		do(t, ts, "POST", wdPath, fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":%d}}`, name, i))
	}
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"seed"}}`)
	// Both caches start and keep their states; then configmaps are read last.
	get(wdPath + "?resourceVersion=0")
	time.Sleep(5 * time.Millisecond)
	get(cmPath + "?resourceVersion=0")
	if b := api.Registry().WatchBudget(); b.States < 2 || b.Dropped != 0 { // namespaces have one too
		t.Fatalf("budget %+v: want both states kept", b)
	}
	// Configmaps grow past the budget: the colder widgets' state is dropped.
	pad := strings.Repeat("x", 1024)
	for i := range 40 {
		do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%02d"},"data":{"pad":%q}}`, i, pad))
	}
	wd, _ := api.Registry().Store(meta.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"})
	eventually(t, "the widgets' state to be dropped", func() bool { s, _ := wd.WatchCacheStats(); return s.StateObjects == -1 })
	if b := api.Registry().WatchBudget(); b.Drops < 1 || b.Used > b.Limit {
		t.Fatalf("budget %+v", b)
	}

	// Every read of widgets answers as before.
	do(t, ts, "DELETE", wdPath+"/w07", "")
	widgets = slices.DeleteFunc(widgets, func(n string) bool { return n == "w07" })
	want := strings.Join(widgets, " ")
	for _, p := range []string{"?resourceVersion=0", "?", "?limit=7", "?resourceVersion=0&limit=7"} {
		eventually(t, "list "+p, func() bool { return strings.Join(listedNames(t, get, wdPath+p), " ") == want })
	}
	if w := get(wdPath + "/w03?resourceVersion=0"); str(w, "spec", "size") != "3" {
		t.Fatalf("get from storage: %v", w)
	}
	ws := startWatch(t, ts, wdPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	var seen []string
	for len(seen) < len(widgets) {
		ev := ws.next(t)
		if ev["type"] == "ADDED" {
			seen = append(seen, str(objOf(ev), "metadata", "name"))
		}
	}
	slices.Sort(seen)
	if strings.Join(seen, " ") != want {
		t.Fatalf("initial events %v", seen)
	}
	do(t, ts, "PATCH", wdPath+"/w05", `{"spec":{"size":50}}`, "Content-Type", "application/merge-patch+json")
	for {
		ev := ws.next(t)
		if ev["type"] == "BOOKMARK" {
			continue
		}
		if ev["type"] != "MODIFIED" || str(objOf(ev), "spec", "size") != "50" {
			t.Fatalf("event %v", ev)
		}
		break
	}

	// Room again: widgets' state comes back on a later read (at most every
	// Settings.ReadmitInterval), answering the same.
	for i := range 40 {
		do(t, ts, "DELETE", cmPath+fmt.Sprintf("/c%02d", i), "")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		get(wdPath + "?resourceVersion=0")
		if s, _ := wd.WatchCacheStats(); s.StateObjects == len(widgets) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the widgets' state did not come back: budget %+v", api.Registry().WatchBudget())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := strings.Join(listedNames(t, get, wdPath+"?resourceVersion=0"), " "); got != want {
		t.Fatalf("list from the state brought back: %s", got)
	}
	if b := api.Registry().WatchBudget(); b.Readmit < 1 {
		t.Fatalf("budget %+v", b)
	}
}
