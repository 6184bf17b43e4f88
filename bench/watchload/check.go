package main

import (
	"bytes"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// event is what a watcher needs from one watch event line: its type, the
// object's resourceVersion and the write id the writers put in data.wlid
// (-1 when the object carries none).
type event struct {
	typ  string
	rv   uint64
	id   int
	code int // an ERROR event's status code
}

var (
	keyType = []byte(`"type":"`)
	keyRV   = []byte(`"resourceVersion":"`)
	keyID   = []byte(`"wlid":"`)
	keyCode = []byte(`"code":`)
)

// quoted returns the string value after key in line (the first occurrence),
// and whether key was found. Watch events are compact JSON, one a line; the
// object's own resourceVersion is the first one (managedFields carry none),
// and "wlid":" occurs only as the data key ("f:wlid":{} in managedFields).
func quoted(line, key []byte) ([]byte, bool) {
	i := bytes.Index(line, key)
	if i < 0 {
		return nil, false
	}
	v := line[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return nil, false
	}
	return v[:j], true
}

// parseEvent scans one watch event line without decoding the whole object:
// at thousands of watchers the load generator shares the cores with the
// server, so it must stay cheap.
func parseEvent(line []byte) (event, bool) {
	typ, ok := quoted(line, keyType)
	if !ok {
		return event{}, false
	}
	ev := event{typ: string(typ), id: -1}
	if rv, ok := quoted(line, keyRV); ok {
		ev.rv, _ = strconv.ParseUint(string(rv), 10, 64)
	}
	if id, ok := quoted(line, keyID); ok {
		if n, err := strconv.Atoi(string(id)); err == nil && n >= 0 {
			ev.id = n
		}
	}
	if ev.typ == "ERROR" {
		if i := bytes.Index(line, keyCode); i >= 0 {
			v := line[i+len(keyCode):]
			j := 0
			for j < len(v) && v[j] >= '0' && v[j] <= '9' {
				j++
			}
			ev.code, _ = strconv.Atoi(string(v[:j]))
		}
	}
	return ev, true
}

// histogram counts latencies in buckets 4% wide from 1 µs: cheap to fill per
// watcher and to merge, quantiles within 4%.
type histogram [600]uint32

const histBase = 1.04

func (h *histogram) add(d time.Duration) {
	us := float64(d) / float64(time.Microsecond)
	i := 0
	if us > 1 {
		i = int(math.Log(us) / math.Log(histBase))
	}
	if i >= len(h) {
		i = len(h) - 1
	}
	h[i]++
}

func (h *histogram) merge(o *histogram) {
	for i, n := range o {
		h[i] += n
	}
}

// quantile returns the upper edge of the bucket holding quantile q, in ms
// (NaN when empty).
func (h *histogram) quantile(q float64) float64 {
	var total uint64
	for _, n := range h {
		total += uint64(n)
	}
	if total == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, n := range h {
		seen += uint64(n)
		if seen >= rank {
			return math.Pow(histBase, float64(i+1)) / 1000
		}
	}
	return math.NaN()
}

// stream is one watcher's record of what it received: which write ids (a
// bitset grown on demand), in what resourceVersion order, and latencies.
// Only the watcher's goroutine touches it until the watcher has ended.
type stream struct {
	seen       []uint64
	lastRV     uint64
	got        int // distinct write ids received
	dups       int // a write id received again
	outOfOrder int // a new write whose resourceVersion is below one already seen
	foreign    int // data events without a write id of this run
	early      int // received before its writer had the response (latency counted 0)
	reconnects int
	gone       int // 410 Gone: the resourceVersion was compacted, events lost
	lastErr    string
	lat        histogram // from the writer's response (0 when early)
	e2e        histogram // from the writer's request
}

// observe records one data event carrying write id and resourceVersion rv;
// sent is when its writer sent it, acked when it got the response (0: not
// yet), now the receipt (unix ns).
func (s *stream) observe(id int, rv uint64, sent, acked, now int64) {
	if id < 0 {
		s.foreign++
		return
	}
	w, b := id/64, uint(id%64)
	for len(s.seen) <= w {
		s.seen = append(s.seen, 0)
	}
	if s.seen[w]&(1<<b) != 0 {
		s.dups++
		return
	}
	s.seen[w] |= 1 << b
	s.got++
	if rv <= s.lastRV {
		s.outOfOrder++
	} else {
		s.lastRV = rv
	}
	if sent > 0 {
		s.e2e.add(time.Duration(now - sent))
	}
	if acked == 0 || acked > now {
		s.early++
		s.lat.add(0)
		return
	}
	s.lat.add(time.Duration(now - acked))
}

func (s *stream) has(id int) bool {
	w := id / 64
	return w < len(s.seen) && s.seen[w]&(1<<uint(id%64)) != 0
}

// tally compares a stream with the acknowledged writes (acked[id] != 0):
// missed are acknowledged writes never received, unacked are received writes
// whose writer saw an error (applied anyway; not a failure).
func (s *stream) tally(acked func(id int) bool, ids int) (missed, unacked int) {
	for id := 0; id < ids; id++ {
		switch got, ok := s.has(id), acked(id); {
		case ok && !got:
			missed++
		case got && !ok:
			unacked++
		}
	}
	// ids beyond the writers' range cannot be acknowledged
	for w := ids / 64; w < len(s.seen); w++ {
		m := s.seen[w]
		if w == ids/64 {
			m &^= 1<<uint(ids%64) - 1
		}
		unacked += bits.OnesCount64(m)
	}
	return missed, unacked
}
