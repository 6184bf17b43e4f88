package apiserver

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/kapi-dev/kapi/watch"
)

// stallServer serves configmaps to anonymous users over HTTP/1.1 or
// HTTP/2 (TLS), with tiny send buffers, so that a client that stops reading
// stalls the server's writes at once.
func stallServer(t *testing.T, h2 bool) *httptest.Server {
	t.Helper()
	cfg := Config{Storage: badgerInMemory(t), AllowAnonymous: true, DisableControllers: true, MaxRequestBodyBytes: 2 << 20}
	_, ts := serveWatchAPI(t, cfg, h2, func(l net.Listener) net.Listener { return smallBufListener{l} })
	return ts
}

// stalledWatchH1 starts a watch over a raw HTTP/1.1 connection with a tiny
// receive buffer; stalled reads the response until the first bytes of an
// event and then stops reading.
func stalledWatchH1(t *testing.T, ts *httptest.Server, path string) (stalled func()) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	return func() {
		br := bufio.NewReaderSize(conn, 16)
		var head []byte
		for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
			b, err := br.ReadByte()
			if err != nil {
				t.Fatalf("watch response: %v after %q", err, head)
			}
			head = append(head, b)
		}
		if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
			t.Fatalf("watch response %q", head)
		}
		if _, err := br.Peek(16); err != nil { // the event's chunk has started
			t.Fatal(err)
		}
	}
}

// stalledWatchH2 starts a watch as the only stream of a raw HTTP/2
// connection that never grants flow-control window beyond the initial 64
// KiB; stalled reads frames until the stream's first data, then stops.
func stalledWatchH2(t *testing.T, ts *httptest.Server, path string) (stalled func()) {
	t.Helper()
	conn, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("watch stream: %v", err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.DataFrame:
				if f.StreamID == 1 && len(f.Data()) > 0 {
					return
				}
			case *http2.RSTStreamFrame, *http2.GoAwayFrame:
				t.Fatalf("watch stream: %v", f)
			}
		}
	}
}

// A watcher whose client stops reading holds no copy of its own of a large
// event: N stalled watchers and one 1 MiB write grow the heap by a few
// copies of the object (storage, the cache's state and window, the one
// shared frame), not by N.
func TestWatchStalledSharesLargeFrames(t *testing.T) {
	forEachStall(t, func(t *testing.T, ts *httptest.Server, start stallStart) {
		const watchers = 48
		rv := collectionRV(t, ts)
		path := cmPath + "?watch=1&resourceVersion=" + rv
		var stalled []func()
		for range watchers {
			stalled = append(stalled, start(t, ts, path))
		}
		before := heapAfterGC()
		createMiB(t, ts)
		for _, s := range stalled {
			s() // every watcher is writing the event now
		}
		grew := int64(heapAfterGC()) - int64(before)
		t.Logf("%d stalled watchers, one 1 MiB event: heap grew %.1f MiB", watchers, float64(grew)/(1<<20))
		if grew > watchers/4<<20 {
			t.Errorf("heap grew %.1f MiB with %d stalled watchers of a 1 MiB event: a copy each", float64(grew)/(1<<20), watchers)
		}
	})
}

// createMiB creates a configmap of 1 MiB.
func createMiB(t *testing.T, ts *httptest.Server) {
	t.Helper()
	value := strings.Repeat("v", 1<<20)
	resp, err := ts.Client().Post(ts.URL+cmPath, "application/json", strings.NewReader(`{"metadata":{"name":"big"},"data":{"v":"`+value+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
}

// stallStart starts a watch of path that stalls: calling the function it
// returns reads until the first event has started, then stops reading.
type stallStart func(t *testing.T, ts *httptest.Server, path string) (stalled func())

// forEachStall runs test over HTTP/1.1 and HTTP/2 on a stallServer.
func forEachStall(t *testing.T, test func(t *testing.T, ts *httptest.Server, start stallStart)) {
	for _, h2 := range []bool{false, true} {
		name, start := "HTTP/1.1", stallStart(stalledWatchH1)
		if h2 {
			name, start = "HTTP/2", stalledWatchH2
		}
		t.Run(name, func(t *testing.T) { test(t, stallServer(t, h2), start) })
	}
}

func collectionRV(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + cmPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	i := bytes.Index(b, []byte(`"resourceVersion":"`))
	if i < 0 {
		t.Fatalf("list: %s", b)
	}
	rv, _, _ := strings.Cut(string(b[i+len(`"resourceVersion":"`):]), `"`)
	return rv
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The same for initial events: watchers that start on a large object and
// stop reading share the watch cache's one frame of its ADDED event.
func TestWatchStalledSharesLargeInitialFrames(t *testing.T) {
	forEachStall(t, func(t *testing.T, ts *httptest.Server, start stallStart) {
		const watchers = 48
		createMiB(t, ts)
		collectionRV(t, ts) // the cache holds the object
		before := heapAfterGC()
		for range watchers {
			start(t, ts, cmPath+"?watch=1")() // each is writing the ADDED event now
		}
		grew := int64(heapAfterGC()) - int64(before)
		t.Logf("%d watchers stalled on the initial event of a 1 MiB object: heap grew %.1f MiB", watchers, float64(grew)/(1<<20))
		if grew > watchers/4<<20 {
			t.Errorf("heap grew %.1f MiB with %d watchers stalled on a 1 MiB initial event: a copy each", float64(grew)/(1<<20), watchers)
		}
	})
}

// Large frames written from the cache's copy come out in order with the
// small frames of their batch, over HTTP/1.1 and HTTP/2.
func TestWatchLargeFramesInOrder(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		_, ts, _ := newWatchServer(t, watch.Settings{}, h2)
		rv := collectionRV(t, ts)
		big := strings.Repeat("b", 40<<10)
		var want []string
		for i := range 6 {
			v := "small"
			if i%2 == 1 {
				v = big
			}
			do(t, ts, "POST", cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"},"data":{"v":%q}}`, i, v))
			want = append(want, fmt.Sprintf("ADDED c%d", i))
		}
		// Replayed from the window: one batch.
		w := startWatch(t, ts, cmPath+"?watch=1&resourceVersion="+rv)
		for i, ev := range w.expect(t, want...) {
			if got := str(objOf(ev), "data", "v"); (i%2 == 1) != (got == big) {
				t.Fatalf("event %d: value of %d bytes", i, len(got))
			}
		}
	}
}
