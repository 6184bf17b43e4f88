package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// walkPages reads pages of a list (path has its limit) over one kept-alive
// connection, following continue tokens and starting over at the end when
// cycle is set, and reports the time and the server's CPU per page (from
// /proc/PID/stat when pid is set): a page's cost without a TLS handshake.
func walkPages(ctx context.Context, ep endpoint, path string, pages, pid int, cycle bool) (map[string]any, error) {
	hc := &http.Client{Transport: ep.transport(1)}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	if _, _, err := ep.call(ctx, hc, "GET", "/version", "", ""); err != nil { // the handshake, outside the figures
		return nil, err
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var bytes int
	cont, n := "", 0
	for n < pages {
		p := path
		if cont != "" {
			p += sep + "continue=" + url.QueryEscape(cont)
		}
		code, body, err := ep.call(ctx, hc, "GET", p, "", "")
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %.200s", p, code, body)
		}
		bytes += len(body)
		n++
		var l struct {
			Metadata struct{ Continue string } `json:"metadata"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, fmt.Errorf("GET %s: %w", p, err)
		}
		if cont = l.Metadata.Continue; cont == "" && !cycle {
			break
		}
	}
	elapsed := time.Since(t0)
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"pages": n, "ms_per_page": round(elapsed.Seconds()*1000/float64(n), 3),
		"mb": round(float64(bytes)/(1<<20), 1)}
	if pid > 0 {
		out["srv_cpu_ms_per_page"] = round((cpu1-cpu0)*1000/float64(n), 3)
	}
	return out, nil
}

// procCPU returns the user and system CPU seconds of process pid (0: none).
func procCPU(pid int) (float64, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (ut + st) / clockTicks, nil
}
