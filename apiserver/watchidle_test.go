package apiserver

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// Watches that sent a burst of events and went idle keep no batch buffer:
// one user's thousand watches, each woken by one burst, would otherwise
// hold a buffer of up to a full batch each for as long as they stay open.
func TestIdleWatchesHoldNoBuffers(t *testing.T) {
	cfg := Config{Storage: badgerInMemory(t), AllowAnonymous: true, DisableControllers: true}
	_, ts := serveWatchAPI(t, cfg, false, nil)
	value := strings.Repeat("v", 1<<10)
	for i := range 120 {
		r := do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"},"data":{"v":%q}}`, i, value))
		if r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	collectionRV(t, ts) // the cache holds the objects
	const watchers = 100
	conns := make([]net.Conn, watchers)
	readers := make([]*bufio.Reader, watchers) // the clients' memory is not the server's
	for i := range readers {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns[i], readers[i] = conn, bufio.NewReaderSize(conn, 4096)
	}
	before := heapAfterGC()
	for _, conn := range conns {
		fmt.Fprintf(conn, "GET %s?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true HTTP/1.1\r\nHost: x\r\n\r\n", cmPath)
	}
	synced := make(chan error, watchers)
	for _, br := range readers {
		go func() {
			end := false
			for {
				line, err := br.ReadSlice('\n')
				if err != nil && err != bufio.ErrBufferFull {
					if !end {
						synced <- err
					}
					return
				}
				if !end && bytes.Contains(line, []byte("initial-events-end")) {
					end = true
					synced <- nil // and read on
				}
			}
		}()
	}
	for range watchers {
		if err := <-synced; err != nil {
			t.Fatal(err)
		}
	}
	// A watch gives its buffer back once it finds nothing more to send,
	// just after its last write.
	var grew int64
	for range 50 {
		if grew = int64(heapAfterGC()) - int64(before); grew/watchers < 16<<10 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d idle watches after 120 initial events of 1 KiB each: heap grew %.1f MiB, %d bytes per watch", watchers, float64(grew)/(1<<20), grew/watchers)
	if grew/watchers >= 16<<10 {
		t.Errorf("each idle watch holds %d bytes of heap; want no batch buffer kept (under 16 KiB)", grew/watchers)
	}
}
