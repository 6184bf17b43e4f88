package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestJSONLinesAuditSinkConcurrent(t *testing.T) {
	var buf bytes.Buffer
	sink := NewJSONLinesAuditSink(&buf)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				sink.Record(context.Background(), AuditRecord{User: fmt.Sprintf("u%d", i), Name: fmt.Sprintf("n%d", j), Code: 200, Verb: "get"})
			}
		}()
	}
	wg.Wait()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	sink.Record(context.Background(), AuditRecord{User: "late"}) // after Close: dropped, no panic

	seen := map[string]bool{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var rec AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		key := rec.User + "/" + rec.Name
		if seen[key] {
			t.Fatalf("record %s written twice", key)
		}
		seen[key] = true
	}
	if got, want := uint64(len(seen))+sink.Dropped(), uint64(writers*each+1); got != want {
		t.Fatalf("written %d + dropped %d = %d records, want %d", len(seen), sink.Dropped(), got, want)
	}
	// The buffer holds more than writers*each records, so only the late one
	// may have been dropped.
	if len(seen) != writers*each {
		t.Fatalf("written %d records, want %d", len(seen), writers*each)
	}
}

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct{ release chan struct{} }

func (w blockingWriter) Write(p []byte) (int, error) { <-w.release; return len(p), nil }

func TestJSONLinesAuditSinkDoesNotBlock(t *testing.T) {
	w := blockingWriter{release: make(chan struct{})}
	sink := NewJSONLinesAuditSink(w)
	start := time.Now()
	n := auditBuffer * 2
	for i := range n {
		sink.Record(context.Background(), AuditRecord{Name: fmt.Sprint(i)})
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Record blocked behind a stuck writer: %v for %d records", d, n)
	}
	if sink.Dropped() == 0 {
		t.Fatal("no record dropped although the writer is stuck and the buffer full")
	}
	close(w.release)
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestJSONLinesAuditSinkWriteError(t *testing.T) {
	sink := NewJSONLinesAuditSink(failingWriter{})
	sink.Record(context.Background(), AuditRecord{Name: "x"})
	if err := sink.Close(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Close = %v, want the write error", err)
	}
}

// TestJSONLinesAuditSinkServer checks the sink behind a real server: a
// request yields one line with its verb, resource and code.
func TestJSONLinesAuditSinkServer(t *testing.T) {
	var buf bytes.Buffer
	sink := NewJSONLinesAuditSink(&buf)
	srv := securedServer(t, sink, nil)
	req, err := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/default/configmaps/missing", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer reader-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The record is written after the response: close the server first so
	// the handler has returned.
	srv.Close()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	var rec AuditRecord
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("audit log %q: %v", buf.String(), err)
	}
	if rec.Verb != "get" || rec.Resource != "configmaps" || rec.Namespace != "default" || rec.Name != "missing" || rec.Code != http.StatusNotFound || rec.User != "reader" {
		t.Fatalf("record = %+v", rec)
	}
}
