package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// endpoint is the server URL, bearer token and TLS settings of a kubeconfig.
type endpoint struct {
	server, token string
	tls           *tls.Config
}

// readKubeconfig takes the first server, certificate-authority-data and
// token of a kubeconfig such as the quickstart writes: a line scan, so that
// the tool needs no YAML library.
func readKubeconfig(path string, insecure bool) (endpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return endpoint{}, err
	}
	var ep endpoint
	var ca string
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch k {
		case "server":
			if ep.server == "" {
				ep.server = strings.TrimRight(v, "/")
			}
		case "token":
			if ep.token == "" {
				ep.token = v
			}
		case "certificate-authority-data":
			if ca == "" {
				ca = v
			}
		}
	}
	if ep.server == "" {
		return endpoint{}, fmt.Errorf("%s: no server", path)
	}
	ep.tls = &tls.Config{InsecureSkipVerify: insecure}
	if ca != "" && !insecure {
		pem, err := base64.StdEncoding.DecodeString(ca)
		if err != nil {
			return endpoint{}, fmt.Errorf("%s: certificate-authority-data: %w", path, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return endpoint{}, fmt.Errorf("%s: certificate-authority-data holds no certificate", path)
		}
		ep.tls.RootCAs = pool
	}
	return ep, nil
}

// transport speaks HTTP/1.1 only: over HTTP/2 Go would multiplex every watch
// onto one connection, and the point is one connection (and its server-side
// buffers) per watcher. Small buffers keep thousands of them cheap here.
func (ep endpoint) transport(idle int) *http.Transport {
	tc := ep.tls.Clone()
	tc.NextProtos = []string{"http/1.1"}
	tc.ClientSessionCache = tls.NewLRUClientSessionCache(1024)
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 30 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      4 << 10,
		WriteBufferSize:     4 << 10,
	}
}

func (ep endpoint) request(ctx context.Context, method, path, ctype string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, ep.server+path, body)
	if err != nil {
		return nil, err
	}
	if ep.token != "" {
		req.Header.Set("Authorization", "Bearer "+ep.token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("User-Agent", "kapi-watchload")
	return req, nil
}

// call sends one request and returns the status and body.
func (ep endpoint) call(ctx context.Context, hc *http.Client, method, path, ctype, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := ep.request(ctx, method, path, ctype, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// sample is the server's state at one moment; -1 where it is unknown.
type sample struct {
	goroutines       float64 // go_goroutines
	heapMB           float64 // go_memstats_heap_inuse_bytes
	rssAnon, rssFile float64 // MB, /proc/PID/status
}

func (s sample) rss() float64 {
	if s.rssAnon < 0 {
		return -1
	}
	return s.rssAnon + s.rssFile
}

// max keeps the larger of each figure.
func (s sample) max(o sample) sample {
	if o.goroutines > s.goroutines {
		s.goroutines = o.goroutines
	}
	if o.heapMB > s.heapMB {
		s.heapMB = o.heapMB
	}
	if o.rssAnon > s.rssAnon {
		s.rssAnon = o.rssAnon
	}
	if o.rssFile > s.rssFile {
		s.rssFile = o.rssFile
	}
	return s
}

// into writes the sample's figures as prefix_goroutines, prefix_heap_mb,
// prefix_rss_anon_mb, prefix_rss_file_mb and prefix_rss_mb.
func (s sample) into(m map[string]any, prefix string) {
	put := func(k string, v float64) {
		if v >= 0 {
			m[prefix+"_"+k] = round(v, 1)
		}
	}
	put("goroutines", s.goroutines)
	put("heap_mb", s.heapMB)
	put("rss_anon_mb", s.rssAnon)
	put("rss_file_mb", s.rssFile)
	put("rss_mb", s.rss())
}

// probe reads the server's /metrics (bearer token) and, with pid > 0, its
// /proc/PID/status.
func (ep endpoint) probe(ctx context.Context, hc *http.Client, pid int) sample {
	s := sample{-1, -1, -1, -1}
	if pid > 0 {
		s.rssAnon, s.rssFile = procRSS(pid)
	}
	st, body, err := ep.call(ctx, hc, "GET", "/metrics", "", "")
	if err != nil || st != 200 {
		return s
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines, _ = strconv.ParseFloat(v, 64)
		case "go_memstats_heap_inuse_bytes":
			f, _ := strconv.ParseFloat(v, 64)
			s.heapMB = f / (1 << 20)
		}
	}
	return s
}

// procRSS returns RssAnon and RssFile of pid in MB (-1 when unreadable).
func procRSS(pid int) (anon, file float64) {
	anon, file = -1, -1
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		if k == "RssAnon" {
			anon = kb / 1024
		} else {
			file = kb / 1024
		}
	}
	return
}
