// Command watchload checks watch delivery under many watchers and writers,
// and that the server gives back what they took once they leave:
//
//	go run ./bench/watchload -kubeconfig DIR/kubeconfig -pid $(cut -d' ' -f1 DIR/pids)
//
// It measures the server's idle goroutines (go_goroutines from /metrics), Go
// heap and RSS (RssAnon, RssFile of -pid), opens -watchers watches, each its
// own HTTP/1.1 connection, on one namespace's configmaps from one
// resourceVersion, and lets -writers writers create and update objects there
// at -rate writes/s each. Every watcher must receive every acknowledged write
// exactly once and in resourceVersion order; a watch that ends is reopened
// from the last resourceVersion it saw. Then the watchers close and the
// server is polled until goroutines and RssAnon are back near idle. One JSON
// line on stdout; exit status 1 on a missed, duplicated or reordered event,
// a write error, or a server that does not come back to idle.
//
// With -hold the writers keep writing (up to -writes) until SIGINT or
// SIGTERM: bench/scale.sh holds 1,000 watchers this way while it measures,
// and -ready-file tells it when they are connected.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	kubeconfig, namespace, runID, readyFile  string
	insecure, hold, cleanup                  bool
	watchers, writers, writes, objects, pid  int
	rate                                     float64
	connectParallel                          int
	grace, leaveTimeout, sampleEvery         time.Duration
	goroutineSlack, rssSlackMB, rssSlackFrac float64
}

func main() {
	var cf config
	flag.StringVar(&cf.kubeconfig, "kubeconfig", "", "kubeconfig with server, CA and bearer token (the quickstart's)")
	flag.BoolVar(&cf.insecure, "insecure", false, "skip TLS verification")
	flag.StringVar(&cf.namespace, "namespace", "watchload", "namespace watched and written (created if missing)")
	flag.StringVar(&cf.runID, "run-id", "", "object name prefix; random when empty")
	flag.IntVar(&cf.watchers, "watchers", 5000, "watchers, one connection each")
	flag.IntVar(&cf.writers, "writers", 64, "concurrent writers")
	flag.IntVar(&cf.writes, "writes", 1280, "writes in all (with -hold: at most)")
	flag.Float64Var(&cf.rate, "rate", 0.25, "writes per second per writer")
	flag.IntVar(&cf.objects, "objects", 4, "objects per writer: its first write of each creates it, the others update")
	flag.IntVar(&cf.pid, "pid", 0, "server process id, for RssAnon/RssFile (0: no RSS)")
	flag.IntVar(&cf.connectParallel, "connect-parallel", 32, "watches being opened at once")
	flag.DurationVar(&cf.grace, "grace", 2*time.Minute, "after the last write, how long watchers may take to receive everything")
	flag.DurationVar(&cf.leaveTimeout, "leave-timeout", 5*time.Minute, "after the watchers close, how long the server may take to come back to idle (0: no check)")
	flag.DurationVar(&cf.sampleEvery, "sample", 500*time.Millisecond, "how often the server's goroutines and memory are sampled")
	flag.Float64Var(&cf.goroutineSlack, "goroutine-slack", 10, "goroutines above idle still counted as idle")
	flag.Float64Var(&cf.rssSlackMB, "rss-slack-mb", 32, "MB of RssAnon above idle still counted as idle (the Go runtime returns freed memory gradually)")
	flag.Float64Var(&cf.rssSlackFrac, "rss-slack-frac", 0.1, "or this fraction of idle RssAnon, when larger")
	flag.BoolVar(&cf.hold, "hold", false, "write until SIGINT/SIGTERM (or -writes), then check and leave")
	flag.StringVar(&cf.readyFile, "ready-file", "", "created once every watcher is connected")
	flag.BoolVar(&cf.cleanup, "cleanup", true, "delete the objects written, after the leave check")
	walk := flag.String("walk", "", "instead of watching: read -pages pages of this list path (with its limit) over one connection and report the time and server CPU per page")
	pages := flag.Int("pages", 40, "pages read by -walk")
	cycle := flag.Bool("cycle", false, "with -walk: start over at the end of the list until -pages pages are read")
	flag.Parse()
	if *walk != "" {
		ep, err := readKubeconfig(cf.kubeconfig, cf.insecure)
		var out map[string]any
		if err == nil {
			out, err = walkPages(context.Background(), ep, *walk, *pages, cf.pid, *cycle)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "watchload -walk:", err)
			os.Exit(1)
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
		return
	}
	if cf.kubeconfig == "" || cf.watchers < 1 || cf.writers < 1 || cf.writes < 1 || cf.objects < 1 || cf.rate <= 0 {
		fmt.Fprintln(os.Stderr, "watchload: -kubeconfig is required; -watchers, -writers, -writes, -objects and -rate must be positive")
		flag.Usage()
		os.Exit(2)
	}
	if cf.runID == "" {
		cf.runID = strconv.FormatUint(rand.Uint64()%1e6, 36)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, err := run(ctx, cf, log)
	if out != nil {
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
	if err != nil {
		log.Error("watchload failed", "err", err)
		os.Exit(1)
	}
}

// run does the whole check; the map is the JSON line, written even on
// failure when there is something to report.
func run(ctx context.Context, cf config, log *slog.Logger) (map[string]any, error) {
	ep, err := readKubeconfig(cf.kubeconfig, cf.insecure)
	if err != nil {
		return nil, err
	}
	// plain requests (writes, /metrics) share a pool; the watches get their
	// own transport, so closing it closes exactly the watchers' connections
	plain := &http.Client{Transport: ep.transport(cf.writers + 8), Timeout: time.Minute}
	watchTr := ep.transport(0)
	watchClient := &http.Client{Transport: watchTr}

	base := "/api/v1/namespaces/" + cf.namespace + "/configmaps"
	st, body, err := ep.call(ctx, plain, "POST", "/api/v1/namespaces", "application/json",
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+cf.namespace+`"}}`)
	if err != nil || (st != 201 && st != 409) {
		return nil, fmt.Errorf("create namespace %s: %d %v %.200s", cf.namespace, st, err, body)
	}
	st, body, err = ep.call(ctx, plain, "GET", base+"?limit=1", "", "")
	if err != nil || st != 200 {
		return nil, fmt.Errorf("list %s: %d %v %.200s", base, st, err, body)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Metadata.ResourceVersion == "" {
		return nil, fmt.Errorf("list %s: no resourceVersion (%v)", base, err)
	}
	startRV := list.Metadata.ResourceVersion

	out := map[string]any{
		"tool": "watchload", "watchers": cf.watchers, "writers": cf.writers,
		"rate_per_writer": cf.rate, "namespace": cf.namespace, "hold": cf.hold,
	}
	idle := ep.probe(ctx, plain, cf.pid)
	idle.into(out, "idle")
	mon := startSampler(ctx, ep, plain, cf.pid, cf.sampleEvery, idle)

	// watchers
	wctx, closeWatchers := context.WithCancel(context.Background())
	defer closeWatchers()
	w := newWrites(cf.writes)
	var delivered atomic.Int64 // acknowledged-or-not writes received, over all watchers
	streams := make([]*stream, cf.watchers)
	var connected, ended sync.WaitGroup
	sem := make(chan struct{}, cf.connectParallel)
	t0 := time.Now()
	for i := range streams {
		streams[i] = &stream{}
		connected.Add(1)
		ended.Add(1)
		go func(s *stream) {
			defer ended.Done()
			watch(wctx, ep, watchClient, base, startRV, s, w, &delivered, sem, connected.Done)
		}(streams[i])
	}
	if err := waitFor(ctx, &connected, 3*time.Minute); err != nil {
		closeWatchers()
		ended.Wait()
		return out, fmt.Errorf("watchers not connected: %w", err)
	}
	out["connect_s"] = round(time.Since(t0).Seconds(), 2)
	log.Info("watchers connected", "watchers", cf.watchers, "s", out["connect_s"])
	if cf.readyFile != "" {
		if err := os.WriteFile(cf.readyFile, []byte("ready\n"), 0o644); err != nil {
			return out, err
		}
	}

	// writers
	wr := writeAll(ctx, cf, ep, plain, base, w)
	if cf.hold { // -writes ran out first: keep the watchers until told
		<-ctx.Done()
	}
	out["writes_acked"] = wr.acked
	out["write_errors"] = wr.errors
	if wr.firstErr != "" {
		out["first_write_error"] = wr.firstErr
	}
	out["write_s"] = round(wr.elapsed.Seconds(), 2)
	out["writes_per_s"] = round(float64(wr.acked)/wr.elapsed.Seconds(), 1)

	// drain: every watcher has every acknowledged write, or the grace is over
	want := int64(wr.acked) * int64(cf.watchers)
	tDrain := time.Now()
	for delivered.Load() < want && time.Since(tDrain) < cf.grace {
		time.Sleep(20 * time.Millisecond)
	}
	out["drain_s"] = round(time.Since(tDrain).Seconds(), 2)
	end := ep.probe(context.Background(), plain, cf.pid)
	end.into(out, "end")
	closeWatchers()
	ended.Wait()
	watchTr.CloseIdleConnections()
	peak := mon.stop()
	peak.into(out, "peak")

	failures := tallyAll(out, streams, w, wr.ids)
	if wr.errors > 0 {
		failures = append(failures, fmt.Sprintf("%d write errors (first: %s)", wr.errors, wr.firstErr))
	}

	// leave: the server's goroutines and anonymous memory back near idle
	if cf.leaveTimeout > 0 {
		after, took, back := waitIdle(ep, plain, cf, idle)
		after.into(out, "after")
		out["leave_s"] = round(took.Seconds(), 1)
		out["back_to_idle"] = back
		if !back {
			failures = append(failures, fmt.Sprintf("server not back to idle within %s", cf.leaveTimeout))
		}
	}
	if cf.cleanup {
		cleanup(ep, plain, cf, base)
	}
	if len(failures) > 0 {
		return out, errors.New(strings.Join(failures, "; "))
	}
	return out, nil
}

// waitFor waits for wg, ctx or the timeout.
func waitFor(ctx context.Context, wg *sync.WaitGroup, timeout time.Duration) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("timeout after %s", timeout)
	}
}

// watch keeps one watch open from startRV until ctx is done, reopening it
// from the last resourceVersion seen when the stream ends. connected is
// called once, when the first response arrives (or the watcher gives up).
func watch(ctx context.Context, ep endpoint, hc *http.Client, base, startRV string, s *stream,
	w *writes, delivered *atomic.Int64, sem chan struct{}, connected func()) {
	rv := startRV
	first := true
	signal := func() {
		if first {
			first = false
			connected()
		}
	}
	defer signal()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			s.reconnects++
			time.Sleep(100 * time.Millisecond)
		}
		req, err := ep.request(ctx, "GET", base+"?watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion="+rv, "", nil)
		if err != nil {
			s.lastErr = err.Error()
			return
		}
		if first {
			sem <- struct{}{}
		}
		resp, err := hc.Do(req)
		if first {
			<-sem
		}
		if err != nil {
			if ctx.Err() == nil {
				s.lastErr = err.Error()
			}
			continue
		}
		if resp.StatusCode != 200 {
			s.lastErr = "watch status " + resp.Status
			resp.Body.Close()
			continue
		}
		signal()
		rv = read(resp.Body, s, rv, w, delivered)
		resp.Body.Close()
		if s.gone > 0 {
			return
		}
	}
}

// read consumes one watch stream and returns the last resourceVersion seen.
func read(body io.Reader, s *stream, rv string, w *writes, delivered *atomic.Int64) string {
	br := bufio.NewReaderSize(body, 4<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull { // an event longer than the buffer
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if err != nil {
			return rv
		}
		now := time.Now().UnixNano()
		ev, ok := parseEvent(line)
		if !ok {
			continue
		}
		switch ev.typ {
		case "ADDED", "MODIFIED", "DELETED":
			var sent, acked int64
			if ev.id >= 0 && ev.id < len(w.acked) {
				sent, acked = w.sent[ev.id].Load(), w.acked[ev.id].Load()
			}
			s.observe(ev.id, ev.rv, sent, acked, now)
			if ev.id >= 0 {
				delivered.Add(1)
			}
			rv = strconv.FormatUint(ev.rv, 10)
		case "BOOKMARK":
			if ev.rv > 0 {
				rv = strconv.FormatUint(ev.rv, 10)
			}
		case "ERROR":
			if ev.code == 410 {
				s.gone++
			}
			s.lastErr = fmt.Sprintf("ERROR event, code %d", ev.code)
			return rv
		}
	}
}

// writes holds, per write id, when it was sent and when its writer got a
// success response (unix ns; 0: not yet, or failed).
type writes struct {
	sent, acked []atomic.Int64
}

func newWrites(n int) *writes {
	return &writes{sent: make([]atomic.Int64, n), acked: make([]atomic.Int64, n)}
}

type writeResult struct {
	acked, errors, ids int
	firstErr           string
	elapsed            time.Duration
}

// writeAll runs the writers: writer w owns objects wl-RUN-w-j and writes them
// in turn at its rate, each write carrying its id in data.wlid. It ends after
// -writes writes or, with -hold, when ctx is done.
func writeAll(ctx context.Context, cf config, ep endpoint, hc *http.Client, base string, ws *writes) writeResult {
	var next, acked, errs atomic.Int64
	var mu sync.Mutex
	firstErr := ""
	pad := strings.Repeat("x", 256)
	interval := time.Duration(float64(time.Second) / cf.rate)
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < cf.writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			due := t0.Add(interval * time.Duration(w) / time.Duration(cf.writers)) // spread the writers' phases
			for k := 0; ; k++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(due)):
				}
				due = due.Add(interval)
				id := int(next.Add(1) - 1)
				if id >= len(ws.acked) {
					return
				}
				name := fmt.Sprintf("wl-%s-%d-%d", cf.runID, w, k%cf.objects)
				var st int
				var body []byte
				var err error
				ws.sent[id].Store(time.Now().UnixNano())
				if k < cf.objects {
					st, body, err = ep.call(context.Background(), hc, "POST", base, "application/json",
						`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"},"data":{"wlid":"`+strconv.Itoa(id)+`","pad":"`+pad+`"}}`)
				} else {
					st, body, err = ep.call(context.Background(), hc, "PATCH", base+"/"+name, "application/merge-patch+json",
						`{"data":{"wlid":"`+strconv.Itoa(id)+`"}}`)
				}
				if err == nil && (st == 200 || st == 201) {
					ws.acked[id].Store(time.Now().UnixNano())
					acked.Add(1)
					continue
				}
				errs.Add(1)
				mu.Lock()
				if firstErr == "" {
					firstErr = fmt.Sprintf("%s: %d %v %.200s", name, st, err, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ids := min(int(next.Load()), len(ws.acked))
	return writeResult{acked: int(acked.Load()), errors: int(errs.Load()), ids: ids, firstErr: firstErr, elapsed: time.Since(t0)}
}

// tallyAll sums the watchers' streams into out and returns what failed.
func tallyAll(out map[string]any, streams []*stream, w *writes, ids int) []string {
	var missed, unacked, got, dups, ooo, foreign, early, reconnects, gone, short int
	var lat, e2e histogram
	lastErr := ""
	isAcked := func(id int) bool { return w.acked[id].Load() != 0 }
	for _, s := range streams {
		m, u := s.tally(isAcked, ids)
		missed += m
		unacked += u
		if m > 0 {
			short++
		}
		got += s.got
		dups += s.dups
		ooo += s.outOfOrder
		foreign += s.foreign
		early += s.early
		reconnects += s.reconnects
		gone += s.gone
		lat.merge(&s.lat)
		e2e.merge(&s.e2e)
		if s.lastErr != "" {
			lastErr = s.lastErr
		}
	}
	out["deliveries"] = got
	out["missed"] = missed
	out["watchers_short"] = short
	out["duplicates"] = dups
	out["out_of_order"] = ooo
	out["unacked_deliveries"] = unacked
	out["foreign_events"] = foreign
	out["early"] = early
	out["reconnects"] = reconnects
	out["gone"] = gone
	for name, q := range map[string]float64{"p50": 0.5, "p99": 0.99, "max": 1} {
		if v := lat.quantile(q); !math.IsNaN(v) {
			out["lat_"+name+"_ms"] = round(v, 2)
		}
		if v := e2e.quantile(q); !math.IsNaN(v) {
			out["e2e_"+name+"_ms"] = round(v, 2)
		}
	}
	if lastErr != "" {
		out["last_watch_error"] = lastErr
	}
	var failures []string
	if missed > 0 {
		failures = append(failures, fmt.Sprintf("%d events missed (%d watchers short)", missed, short))
	}
	if dups > 0 || ooo > 0 {
		failures = append(failures, fmt.Sprintf("%d duplicates, %d out of order", dups, ooo))
	}
	if gone > 0 {
		failures = append(failures, fmt.Sprintf("%d watches got 410 Gone", gone))
	}
	return failures
}

// sampler polls the server while the watchers run and keeps the peak.
type sampler struct {
	done chan struct{}
	peak chan sample
}

func startSampler(ctx context.Context, ep endpoint, hc *http.Client, pid int, every time.Duration, first sample) *sampler {
	sm := &sampler{done: make(chan struct{}), peak: make(chan sample, 1)}
	go func() {
		peak := first
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-sm.done:
				sm.peak <- peak.max(ep.probe(context.Background(), hc, pid))
				return
			case <-t.C:
				peak = peak.max(ep.probe(ctx, hc, pid))
			}
		}
	}()
	return sm
}

func (sm *sampler) stop() sample {
	close(sm.done)
	return <-sm.peak
}

// waitIdle polls until goroutines and RssAnon are within the slack of idle,
// or the timeout; it returns the last sample, the time taken and whether the
// server came back.
func waitIdle(ep endpoint, hc *http.Client, cf config, idle sample) (sample, time.Duration, bool) {
	hc.Transport.(*http.Transport).CloseIdleConnections() // the writers' connections too
	t0 := time.Now()
	for {
		s := ep.probe(context.Background(), hc, cf.pid)
		ok := s.goroutines >= 0 && s.goroutines <= idle.goroutines+cf.goroutineSlack &&
			(cf.pid <= 0 || s.rssAnon <= idle.rssAnon+max(cf.rssSlackMB, cf.rssSlackFrac*idle.rssAnon))
		if ok || time.Since(t0) > cf.leaveTimeout {
			return s, time.Since(t0), ok
		}
		time.Sleep(cf.sampleEvery)
	}
}

// cleanup deletes the objects the writers created (best effort).
func cleanup(ep endpoint, hc *http.Client, cf config, base string) {
	for w := 0; w < cf.writers; w++ {
		for j := 0; j < cf.objects; j++ {
			ep.call(context.Background(), hc, "DELETE", fmt.Sprintf("%s/wl-%s-%d-%d", base, cf.runID, w, j), "", "")
		}
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
