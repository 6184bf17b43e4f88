package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// An HTTP/1.1 watch is written straight to its connection after the
// response header (writeWatchConn): the stream is well-formed chunked
// encoding, it ends with the last chunk when the watch times out and the
// connection closes after it, and a client that goes away ends the watch on
// the server.
func TestWatchStreamOverHTTP1(t *testing.T) {
	store, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	api, err := New(context.Background(), Config{Storage: store, AllowAnonymous: true, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	if err := api.Register(registry.ConfigMaps()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)

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

// waitLongRunning waits until the server counts want long-running requests.
func waitLongRunning(t *testing.T, reg *prometheus.Registry, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got = 0
		for _, mf := range mfs {
			if mf.GetName() == "apiserver_longrunning_requests" {
				for _, m := range mf.GetMetric() {
					got += m.GetGauge().GetValue()
				}
			}
		}
		if got == want {
			return
		}
	}
	t.Fatalf("long-running requests = %v, want %v", got, want)
}
