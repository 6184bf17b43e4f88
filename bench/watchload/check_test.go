package main

import (
	"math"
	"testing"
	"time"
)

func TestParseEvent(t *testing.T) {
	line := []byte(`{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"1234","managedFields":[{"fieldsV1":{"f:data":{"f:wlid":{}}}}],"name":"a"},"data":{"pad":"x","wlid":"17"}}}` + "\n")
	ev, ok := parseEvent(line)
	if !ok || ev.typ != "MODIFIED" || ev.rv != 1234 || ev.id != 17 {
		t.Fatalf("got %+v %v", ev, ok)
	}
	ev, ok = parseEvent([]byte(`{"type":"ADDED","object":{"metadata":{"resourceVersion":"9"},"data":{"other":"1"}}}`))
	if !ok || ev.id != -1 || ev.rv != 9 {
		t.Fatalf("no wlid: got %+v", ev)
	}
	ev, _ = parseEvent([]byte(`{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`))
	if ev.typ != "ERROR" || ev.code != 410 {
		t.Fatalf("error event: got %+v", ev)
	}
	if _, ok := parseEvent([]byte(`garbage`)); ok {
		t.Fatal("garbage parsed")
	}
}

func TestStreamTally(t *testing.T) {
	acked := map[int]bool{0: true, 1: true, 2: true, 3: true, 70: true}
	isAcked := func(id int) bool { return acked[id] }
	var s stream
	s.observe(0, 10, 1, 1, 5)
	s.observe(1, 11, 1, 0, 5) // before its writer had the response: early
	s.observe(1, 11, 1, 1, 6) // duplicate
	s.observe(3, 13, 1, 1, 7)
	s.observe(2, 12, 1, 1, 8)  // new write, lower resourceVersion: out of order
	s.observe(-1, 14, 1, 0, 9) // foreign
	s.observe(4, 15, 1, 0, 9)  // applied, its writer saw an error
	missed, unacked := s.tally(isAcked, 71)
	if missed != 1 || unacked != 1 { // 70 missed, 4 unacknowledged
		t.Fatalf("missed %d unacked %d", missed, unacked)
	}
	if s.got != 5 || s.dups != 1 || s.outOfOrder != 1 || s.foreign != 1 || s.early != 2 {
		t.Fatalf("stream %+v", s)
	}
	// a received id beyond the writers' range counts as unacknowledged
	s.observe(200, 20, 1, 0, 9)
	if _, unacked := s.tally(isAcked, 71); unacked != 2 {
		t.Fatalf("beyond range: unacked %d", unacked)
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h histogram
	if !math.IsNaN(h.quantile(0.5)) {
		t.Fatal("empty histogram has a quantile")
	}
	for i := 1; i <= 100; i++ {
		h.add(msec(i))
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1, 100}} {
		if got := h.quantile(c.q); got < c.want || got > c.want*histBase*histBase {
			t.Errorf("q%.2f = %.2f ms, want %.0f ms within 4%%", c.q, got, c.want)
		}
	}
}

func msec(n int) time.Duration { return time.Duration(n) * time.Millisecond }
