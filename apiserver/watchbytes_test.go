package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// One user's Table watches of a large object, whose first frames each
// encodes for itself, hold at most MaxWatchBytesPerUser of them while their
// clients do not read: the watches past it wait. Once those clients go,
// the room comes back for the user's next watch.
func TestWatchBytesPerUser(t *testing.T) {
	cfg := Config{Storage: badgerInMemory(t), AllowAnonymous: true, DisableControllers: true,
		MaxRequestBodyBytes: 2 << 20, MaxWatchBytesPerUser: 4 << 20}
	s, ts := serveWatchAPI(t, cfg, false, func(l net.Listener) net.Listener { return smallBufListener{l} })
	createMiB(t, ts)
	collectionRV(t, ts) // the cache holds the object
	path := cmPath + "?watch=1&includeObject=Object"
	before := heapAfterGC()
	const watchers = 24
	conns := stalledWatches(t, ts, path, acceptTableV1, watchers)
	// The room fills: three frames of a 1 MiB object are out, the other
	// watches wait for room.
	waitRoomHeld(t, s, 3<<20)
	grew := int64(heapAfterGC()) - int64(before)
	t.Logf("%d stalled Table watches of a 1 MiB object, 4 MiB per user: heap grew %.1f MiB", watchers, float64(grew)/(1<<20))
	if grew > 12<<20 {
		t.Errorf("heap grew %.1f MiB with %d stalled watches bounded at 4 MiB for their user", float64(grew)/(1<<20), watchers)
	}
	for _, c := range conns {
		c.Close()
	}
	// The room is back: a watch that reads gets its first event.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+path+"&timeoutSeconds=10", nil)
	req.Header.Set("Accept", acceptTableV1)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	got := make(chan string, 1)
	go func() {
		if sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, `"type":"ADDED"`) || !strings.Contains(line, "columnDefinitions") {
			t.Fatalf("first event %.100q", line)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("no event: the stalled watches' room did not come back")
	}
}

// A user's room is shared by the user's watches, a reservation waits for
// room (or its context), and a user whose watches have all ended is
// forgotten.
func TestWatchBytesAccounts(t *testing.T) {
	b := newWatchBytes(100)
	roomA, leaveA := b.join("u")
	roomB, leaveB := b.join("u")
	roomV, leaveV := b.join("v")
	r1, err := roomA.Reserve(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := roomV.Reserve(t.Context(), 100)
	if err != nil {
		t.Fatalf("another user's room: %v", err)
	}
	if _, ok := roomB.TryReserve(60); ok {
		t.Fatal("TryReserve took more than the user's free room")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := roomB.Reserve(ctx, 60); err == nil {
		t.Fatal("a reservation past the user's room did not wait")
	}
	got := make(chan error, 1)
	go func() {
		r, err := roomB.Reserve(t.Context(), 1000) // more than the room: the whole room
		if err == nil {
			r()
		}
		got <- err
	}()
	r1()
	r1() // once only
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	r2, ok := roomA.TryReserve(100)
	if !ok {
		t.Fatal("the whole room is free, TryReserve refused it")
	}
	r2()
	leaveA()
	leaveB()
	leaveV()
	users := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.users)
	}
	if n := users(); n != 1 {
		t.Fatalf("%d users kept: want v alone, whose reservation is still out", n)
	}
	rv()
	if n := users(); n != 0 {
		t.Fatalf("%d users kept after every watch ended and gave its room back", n)
	}
}

// Watches of system:masters (an exempt priority level) get no room: they
// are not bounded; an ordinary user's are.
func TestWatchBytesExempt(t *testing.T) {
	api, ts, _ := watchLimitServer(t, false, func(*Config) {})
	startWatchAs(t, ts, cmPath+"?watch=1", "admin-token")
	startWatchAs(t, ts, cmPath+"?watch=1", "alice-token")
	api.watchBytes.mu.Lock()
	_, admin := api.watchBytes.users["admin"]
	_, alice := api.watchBytes.users["alice"]
	api.watchBytes.mu.Unlock()
	if admin || !alice {
		t.Fatalf("accounts: admin %v, alice %v; want alice's alone", admin, alice)
	}
}

// stalledWatches starts n watches of path over raw HTTP/1.1 connections
// with tiny receive buffers that are never read.
func stalledWatches(t *testing.T, ts *httptest.Server, path, accept string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", path, accept)
		conns = append(conns, conn)
	}
	return conns
}

// waitRoomHeld waits until the anonymous user's watches hold at least n
// bytes of their room.
func waitRoomHeld(t *testing.T, s *Server, n int64) {
	t.Helper()
	eventually(t, "the user's room to fill", func() bool {
		s.watchBytes.mu.Lock()
		defer s.watchBytes.mu.Unlock()
		u := s.watchBytes.users["system:anonymous"]
		return u != nil && u.held >= n
	})
}

// Watches whose initial events come from storage pages (the type's state
// is not kept) hold a page each while their clients do not read: the
// user's room bounds how many do at once.
func TestWatchBytesStoragePages(t *testing.T) {
	cfg := Config{Storage: badgerInMemory(t), AllowAnonymous: true, DisableControllers: true,
		MaxRequestBodyBytes: 2 << 20, MaxWatchBytesPerUser: 4 << 20}
	cfg.Watch.StateBytes = -1
	s, ts := serveWatchAPI(t, cfg, false, func(l net.Listener) net.Listener { return smallBufListener{l} })
	for i := range 3 {
		value := strings.Repeat("v", 1<<20)
		resp, err := ts.Client().Post(ts.URL+cmPath, "application/json", strings.NewReader(fmt.Sprintf(`{"metadata":{"name":"big%d"},"data":{"v":"%s"}}`, i, value)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d", resp.StatusCode)
		}
	}
	before := heapAfterGC()
	const watchers = 24
	stalledWatches(t, ts, cmPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "application/json", watchers)
	waitRoomHeld(t, s, 3<<20) // one watch reads pages, the others wait
	grew := int64(heapAfterGC()) - int64(before)
	t.Logf("%d stalled watches with initial events from storage pages of 1 MiB objects, 4 MiB per user: heap grew %.1f MiB", watchers, float64(grew)/(1<<20))
	if grew > 16<<20 {
		t.Errorf("heap grew %.1f MiB with %d stalled watches bounded at 4 MiB for their user", float64(grew)/(1<<20), watchers)
	}
}
