// Command charts draws the side-by-side kbench results as an SVG chart: for
// each of the performance issue's targets, how many times better kapi was
// than kube-apiserver + etcd (median of the repeats), against the target.
//
//	go run ./bench/charts -in results/compare-full-....jsonl -out docs/images/kbench-targets.svg
//
// The input is the JSON-lines file kbench's compare.sh writes (see "For
// contributors" in docs/performance.md); the reference is the target named
// "reference", kapi the other one.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"log"
	"math"
	"os"
	"sort"
	"strings"
)

type line struct {
	Target   string             `json:"target"`
	Label    string             `json:"label"`
	Workload string             `json:"workload"`
	Metrics  map[string]float64 `json:"metrics"`
}

// goal is one target of the issue: the factor by which kapi must beat the
// reference on a metric (ratio reference/kapi for lower-is-better metrics,
// kapi/reference for higher-is-better ones).
type goal struct {
	name, workload, metric string
	higherBetter           bool
	target                 float64
}

var goals = []goal{
	{"create: objects/s", "create", "ops_per_s", true, 5},
	{"create: server CPU per object", "create", "srv_cpu_ms_per_op", false, 10},
	{"get: requests/s", "get", "ops_per_s", true, 3},
	{"full list of 10,000: time", "list", "p50_ms", false, 5},
	{"full list: server memory growth", "list", "srv_peak_delta_mb", false, 5},
	{"paged walk (limit 500): time", "list", "paged_total_p50_ms", false, 5},
	{"informer sync, list+watch: to the last byte", "informer-sync", "listwatch_raw_p50_s", false, 3},
	{"informer sync, list+watch: server CPU", "informer-sync", "listwatch_srv_cpu_per_sync_s", false, 5},
	{"informer sync, streaming list: to the last byte", "informer-sync", "watchlist_raw_p50_s", false, 3},
	{"informer sync, streaming list: server CPU", "informer-sync", "watchlist_srv_cpu_per_sync_s", false, 5},
	{"read-modify-write updates/s", "update", "ops_per_s", true, 3},
	{"watch fan-out: p99 delivery", "watch-fanout", "lat_p99_ms", false, 3},
	{"watch fan-out: server CPU", "watch-fanout", "srv_cpu_s", false, 1.5},
	{"apply: first applies/s", "apply", "create_per_s", true, 3},
	{"apply: re-applies/s", "apply", "reapply_per_s", true, 3},
	{"idle memory (RSS before the run)", "create", "srv_rss_before_mb", false, 10},
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func main() {
	in := flag.String("in", "", "compare.sh JSON lines")
	out := flag.String("out", "kbench-targets.svg", "SVG file to write")
	flag.Parse()
	if *in == "" {
		log.Fatal("-in is required")
	}
	values, peaks, err := readResults(*in)
	if err != nil {
		log.Fatal(err)
	}
	rows := factors(values, peaks)
	if err := os.WriteFile(*out, []byte(chart(rows)), 0o644); err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("%-50s %6.2f×  (target %g×)\n", r.name, r.factor, r.target)
	}
}

// readResults reads compare.sh's JSON lines: values[side][workload/metric]
// over the repeats, and the peak RSS per side and repeat.
func readResults(path string) (values map[string]map[string][]float64, peaks map[string]map[string]float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	values, peaks = map[string]map[string][]float64{}, map[string]map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Workload == "" {
			continue
		}
		side := "kapi"
		if l.Target == "reference" {
			side = "reference"
		}
		if values[side] == nil {
			values[side], peaks[side] = map[string][]float64{}, map[string]float64{}
		}
		for k, v := range l.Metrics {
			values[side][l.Workload+"/"+k] = append(values[side][l.Workload+"/"+k], v)
			if strings.HasSuffix(k, "srv_peak_mb") { // the whole server: every process
				peaks[side][l.Label] = math.Max(peaks[side][l.Label], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if values["reference"] == nil || values["kapi"] == nil {
		return nil, nil, fmt.Errorf("%s needs lines of both the reference and kapi", path)
	}
	return values, peaks, nil
}

// row is one bar: how many times better kapi was, against the target.
type row struct {
	name           string
	factor, target float64
}

// factors computes the bars of the goals and of peak memory.
func factors(values map[string]map[string][]float64, peaks map[string]map[string]float64) []row {
	var rows []row
	for _, g := range goals {
		ref := median(values["reference"][g.workload+"/"+g.metric])
		got := median(values["kapi"][g.workload+"/"+g.metric])
		factor := got / ref
		if !g.higherBetter {
			factor = ref / got
		}
		rows = append(rows, row{g.name, factor, g.target})
	}
	var rp, kp []float64
	for _, v := range peaks["reference"] {
		rp = append(rp, v)
	}
	for _, v := range peaks["kapi"] {
		kp = append(kp, v)
	}
	return append(rows, row{"peak memory over the run (RSS)", median(rp) / median(kp), 5})
}

// chart draws the bars as an SVG document.
func chart(rows []row) string {
	const width, left, barMax, rowH, top = 980, 370, 530, 26, 40
	maxF := 20.0
	x := func(v float64) float64 { return left + math.Min(v, maxF)/maxF*barMax }
	var b strings.Builder
	h := top + rowH*len(rows) + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="13">`+"\n", width, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15">kapi vs kube-apiserver + etcd: times better (median), | = the issue's target; bars capped at %.0f×</text>`+"\n", maxF)
	for i, r := range rows {
		y := top + i*rowH
		color := "#2e7d32"
		if !(r.factor >= r.target) {
			color = "#c62828"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+16, html.EscapeString(r.name))
		if !math.IsNaN(r.factor) && !math.IsInf(r.factor, 0) {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="18" fill="%s"/>`+"\n", left, y+3, x(r.factor)-left, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2f×</text>`+"\n", x(r.factor)+6, y+16, r.factor)
		} else {
			fmt.Fprintf(&b, `<text x="%d" y="%d">n/a</text>`+"\n", left+6, y+16)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black" stroke-width="2"/>`+"\n", x(r.target), x(r.target), y+1, y+23)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#999"/>`+"\n", left, left, top, top+rowH*len(rows))
	b.WriteString("</svg>\n")
	return b.String()
}
