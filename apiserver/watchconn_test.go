package apiserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// An HTTP/1.1 watch is written straight to its connection after the
// response header (writeWatchConn): the stream is well-formed chunked
// encoding, it ends with the last chunk when the watch times out and the
// connection closes after it, and a client that goes away ends the watch on
// the server.
func TestWatchStreamOverHTTP1(t *testing.T) {
	_, reg, ts := newMetricsServer(t)

	open := func(query string) (net.Conn, *bufio.Reader, *http.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /api/v1/namespaces/default/configmaps?watch=true%s HTTP/1.1\r\nHost: kapi\r\n\r\n", query)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !resp.Close || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("watch response: %d, close %v, transfer encoding %v", resp.StatusCode, resp.Close, resp.TransferEncoding)
		}
		return conn, br, resp
	}

	// Events, then the end of a watch that times out.
	conn, br, resp := open("&timeoutSeconds=2")
	for i := range 3 {
		if r := do(t, ts, "POST", "/api/v1/namespaces/default/configmaps", fmt.Sprintf(`{"metadata":{"name":"c%d"},"data":{"k":%q}}`, i, strings.Repeat("v", 100*i))); r.code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	body, err := io.ReadAll(resp.Body) // the chunked reader: an error unless the last chunk came
	if err != nil {
		t.Fatalf("reading the stream: %v (read %q)", err, body)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d events, want 3: %q", len(lines), body)
	}
	for i, l := range lines {
		var ev struct {
			Type   string
			Object struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type != "ADDED" || ev.Object.Metadata.Name != fmt.Sprintf("c%d", i) {
			t.Fatalf("event %d = %q (%v)", i, l, err)
		}
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the last chunk: read %d, %v; want the connection closed", n, err)
	}

	// A client that goes away ends the watch.
	conn, _, _ = open("")
	waitLongRunning(t, reg, 1)
	conn.Close()
	waitLongRunning(t, reg, 0)
}

// A watch client that reads nothing does not pin its watch on the taken-over
// connection: each write has a deadline, and a write that misses it ends
// the watch.
func TestWatchStreamOverHTTP1StalledReader(t *testing.T) {
	api, reg, ts := newMetricsServer(t)
	api.writeTimeout.Store(int64(200 * time.Millisecond))
	conn, err := net.DialTCP("tcp", nil, ts.Listener.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: kapi\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || !resp.Close {
		t.Fatalf("watch response: %v, %v", resp, err)
	}
	waitLongRunning(t, reg, 1)
	// Then read nothing while events far larger than the socket buffers go out.
	big := strings.Repeat("v", 512<<10)
	for i := 0; i < 64; i++ {
		if r := do(t, ts, "POST", "/api/v1/namespaces/default/configmaps", fmt.Sprintf(`{"metadata":{"name":"big%d"},"data":{"k":%q}}`, i, big)); r.code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	waitLongRunning(t, reg, 0)
}

// waitLongRunning waits until the server counts want open watches of
// configmaps.
func waitLongRunning(t *testing.T, reg *prometheus.Registry, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, _ = gatheredValue(t, reg, "apiserver_longrunning_requests", "verb", "watch", "resource", "configmaps")
		if got == want {
			return
		}
	}
	t.Fatalf("open configmap watches = %v, want %v", got, want)
}
