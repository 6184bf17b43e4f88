package apiserver

import (
	"net/http"
	"testing"
	"time"
)

// TestDateHeader: the cached Date value is what net/http would write, it
// changes with the second, and it has no spare capacity that an Add to a
// header holding it could write into.
func TestDateHeader(t *testing.T) {
	var d dateHeader
	t0 := time.Date(2026, 11, 22, 14, 5, 6, 900_000_000, time.FixedZone("X", 3600))
	v := d.value(t0)
	if want := t0.UTC().Format(http.TimeFormat); len(v) != 1 || v[0] != want {
		t.Fatalf("value = %q, want [%q]", v, want)
	}
	if again := d.value(t0.Add(50 * time.Millisecond)); &again[0] != &v[0] {
		t.Errorf("same second: a new value %q", again)
	}
	next := d.value(t0.Add(200 * time.Millisecond))
	want := t0.Add(200 * time.Millisecond).UTC().Format(http.TimeFormat)
	if next[0] != want {
		t.Errorf("next second: %q, want %q", next[0], want)
	}
	// No room past its one element: an Add to a header holding the value
	// must copy it instead of writing into the shared array.
	if cap(next) != 1 {
		t.Fatalf("shared value has capacity %d", cap(next))
	}
	h := http.Header{"Date": next}
	h.Add("Date", "other")
	if again := d.value(t0.Add(300 * time.Millisecond)); len(again) != 1 || again[0] != want {
		t.Errorf("after an Add elsewhere the shared value is %q", again)
	}
}

// TestResponseDateHeader: responses carry a Date header over HTTP, once.
func TestResponseDateHeader(t *testing.T) {
	_, ts := newTestServer(t)
	resp, err := ts.Client().Get(ts.URL + "/api/v1/namespaces/default")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	dates := resp.Header.Values("Date")
	if len(dates) != 1 {
		t.Fatalf("Date headers %q, want one", dates)
	}
	when, err := http.ParseTime(dates[0])
	if err != nil {
		t.Fatalf("Date %q: %v", dates[0], err)
	}
	if d := time.Since(when); d < -2*time.Second || d > time.Minute {
		t.Errorf("Date %v is %v from now", when, d)
	}
}
