package apiserver

import (
	"fmt"
	"strings"
	"testing"
)

// vwEvent is a watch event in short: type, name, resourceVersion and the
// object's apiVersion.
func vwEvent(ev map[string]any) (string, map[string]any) {
	o, _ := ev["object"].(map[string]any)
	return fmt.Sprintf("%s %s %s", ev["type"], str(o, "metadata", "name"), str(o, "metadata", "resourceVersion")), o
}

// Watchers of two versions see the same events in the same order, each in
// its own version.
func TestVersionsWatchSameEventsInEachVersion(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	rv := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion")
	w1 := startWatch(t, ts, vwPathOf("v1")+"?watch=1&resourceVersion="+rv)
	w2 := startWatch(t, ts, vwPathOf("v2")+"?watch=1&resourceVersion="+rv)

	vwCreate(t, ts, "a", "red", "")
	if r := do(t, ts, "POST", vwPathOf("v2"), `{"apiVersion":"example.dev/v2","kind":"Widget","metadata":{"name":"b"},"spec":{"size":2,"paint":{"color":"blue"}}}`); r.code != 201 {
		t.Fatalf("create b through v2: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "PATCH", vwPathOf("v2")+"/a", `{"spec":{"paint":{"color":"green"}}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patch a through v2: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "DELETE", vwPathOf("v1")+"/b", ""); r.code != 200 {
		t.Fatalf("delete b: %d %s", r.code, r.body)
	}
	wantColors := []string{"red", "blue", "green", "blue"}
	var seq1, seq2 []string
	for i := range wantColors {
		e1, o1 := vwEvent(w1.next(t))
		e2, o2 := vwEvent(w2.next(t))
		seq1, seq2 = append(seq1, e1), append(seq2, e2)
		if o1["apiVersion"] != "example.dev/v1" || str(o1, "spec", "color") != wantColors[i] || str(o1, "spec", "paint") != "" {
			t.Errorf("v1 event %d: %v", i, o1)
		}
		if o2["apiVersion"] != "example.dev/v2" || paint(o2) != wantColors[i] || str(o2, "spec", "color") != "" {
			t.Errorf("v2 event %d: %v", i, o2)
		}
	}
	if strings.Join(seq1, ",") != strings.Join(seq2, ",") || !strings.HasPrefix(seq1[0], "ADDED a ") || !strings.HasPrefix(seq1[3], "DELETED b ") {
		t.Errorf("events through v1 %v, through v2 %v", seq1, seq2)
	}
}

// However many watch the non-storage version, each change is converted
// once: the version's watch cache converts it for all of them.
func TestVersionsWatchConvertsOncePerEvent(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	vwCreate(t, ts, "old", "red", "")
	rv := str(do(t, ts, "GET", vwPathOf("v1"), "").object(t), "metadata", "resourceVersion")
	const watchers = 50
	var ws []*watchStream
	for range watchers {
		ws = append(ws, startWatch(t, ts, vwPathOf("v2")+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv))
	}
	// The cache is up (a read from it answered) before counting starts.
	if r := do(t, ts, "GET", vwPathOf("v2")+"?resourceVersion=0", ""); r.code != 200 {
		t.Fatalf("list from the cache: %d %s", r.code, r.body)
	}
	before := vw.toV2.Load()
	vwCreate(t, ts, "a", "red", "")
	for _, c := range []string{"green", "blue"} {
		for _, name := range []string{"a", "old"} {
			if r := do(t, ts, "PATCH", vwPathOf("v1")+"/"+name, `{"spec":{"color":"`+c+`"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
				t.Fatalf("patch: %d %s", r.code, r.body)
			}
		}
	}
	if r := do(t, ts, "DELETE", vwPathOf("v1")+"/a", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	const events = 6
	for i, w := range ws {
		for n := 0; n < events; {
			ev := w.next(t)
			if ev["type"] == "BOOKMARK" {
				continue
			}
			if _, o := vwEvent(ev); o["apiVersion"] != "example.dev/v2" {
				t.Fatalf("watcher %d: %v", i, ev)
			}
			n++
		}
	}
	// One per create and update; the DELETED event carries the version
	// the cache holds already.
	if got := vw.toV2.Load() - before; got != events-1 {
		t.Errorf("%d conversions to v2 for %d events and %d watchers, want %d", got, events, watchers, events-1)
	}
}

// A watch from before the cache's window catches up from storage: its
// events, DELETED included, are in its version.
func TestVersionsWatchFromStorageHistory(t *testing.T) {
	vw := &versionedWidgets{}
	_, ts := newVersionsServer(t, vw)
	rv := vwCreate(t, ts, "a", "red", "")
	if r := do(t, ts, "PATCH", vwPathOf("v1")+"/a", `{"spec":{"color":"green"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "DELETE", vwPathOf("v1")+"/a", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	// The field selector makes the MODIFIED event of a (red → green) a
	// DELETED one for this watch, carrying the previous version (as kube's
	// watch cache does), which is read from storage and converted.
	w := startWatch(t, ts, vwPathOf("v2")+"?watch=1&fieldSelector=spec.paint.color%3Dred&resourceVersion="+rv)
	ev := w.next(t)
	if e, o := vwEvent(ev); !strings.HasPrefix(e, "DELETED a ") || o["apiVersion"] != "example.dev/v2" || paint(o) != "red" || str(o, "spec", "color") != "" {
		t.Errorf("a red widget turned green, through v2 from storage history: %s %v", e, o)
	}
}
