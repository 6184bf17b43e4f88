package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
)

// auditBuffer is how many records a JSONLinesAuditSink holds for its writer
// before it starts dropping them.
const auditBuffer = 4096

// JSONLinesAuditSink writes audit records to an io.Writer as JSON lines: one
// AuditRecord object per line.
//
// Record never waits for the writer: records go through a buffered channel
// to one writer goroutine, and when the buffer is full (the writer is
// slower than the requests, or stuck) the record is dropped and counted
// (Dropped) rather than delaying the response. Close writes out what is
// buffered and stops the goroutine; records arriving after Close are
// dropped. It is safe for concurrent use.
type JSONLinesAuditSink struct {
	mu      sync.RWMutex // guards closed against sends on a closed ch
	closed  bool
	ch      chan AuditRecord
	done    chan struct{}
	dropped atomic.Uint64
	err     error // the first write error; set by the writer goroutine before done closes
}

var _ AuditSink = (*JSONLinesAuditSink)(nil)

// NewJSONLinesAuditSink starts a sink writing to w. Call Close when done (it
// does not close w).
func NewJSONLinesAuditSink(w io.Writer) *JSONLinesAuditSink {
	s := &JSONLinesAuditSink{ch: make(chan AuditRecord, auditBuffer), done: make(chan struct{})}
	go s.run(w)
	return s
}

// Record queues rec for writing; it drops rec when the buffer is full.
func (s *JSONLinesAuditSink) Record(_ context.Context, rec AuditRecord) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.ch <- rec:
	default:
		s.dropped.Add(1)
	}
}

// Dropped is how many records were not written because the buffer was full
// or the sink closed.
func (s *JSONLinesAuditSink) Dropped() uint64 { return s.dropped.Load() }

// Close writes the buffered records, stops the writer goroutine and returns
// the first write error, if any. It is safe to call more than once.
func (s *JSONLinesAuditSink) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	<-s.done
	return s.err
}

func (s *JSONLinesAuditSink) run(w io.Writer) {
	defer close(s.done)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw) // Encode ends every value with a newline
	note := func(err error) {
		if err != nil && s.err == nil {
			s.err = err
		}
	}
	for rec := range s.ch {
		note(enc.Encode(rec))
		if len(s.ch) == 0 {
			// Nothing more queued: let the lines reach w now rather than
			// when the buffer fills.
			note(bw.Flush())
		}
	}
	note(bw.Flush())
}
