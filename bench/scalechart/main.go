// Command scalechart draws bench/scale.sh's JSON lines as an SVG chart: server
// CPU per create, get and page against the number of objects stored (log
// scales, so that a flat line means a cost that does not grow), and the
// server's peak resident memory, anonymous and file-backed, at each stage.
//
//	go run ./bench/scalechart -in DIR/scale.jsonl -out docs/images/scale.svg
//
// It prints the same figures as a table.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"math"
	"os"
	"sort"
	"strings"
)

// point is one stage's figures, by series name.
type point struct {
	stage  float64
	values map[string]float64
}

// series is one line of the chart: the metric of a step of scale.sh.
type series struct {
	name, step, metric, color string
}

var costSeries = []series{
	{"create", "create", "srv_cpu_ms_per_op", "#1565c0"},
	{"get", "get", "srv_cpu_ms_per_op", "#2e7d32"},
	{"page of 500 (all namespaces)", "pages", "srv_cpu_ms_per_page", "#c62828"},
	{"page of 500 (one namespace)", "ns_pages", "srv_cpu_ms_per_page", "#ef6c00"},
}

var memSeries = []series{
	{"RssAnon, peak", "memory", "peak_rss_anon_mb", "#6a1b9a"},
	{"RssFile, peak", "memory", "peak_rss_file_mb", "#00838f"},
	{"RSS, peak", "memory", "peak_rss_mb", "#424242"},
	{"Go heap in use, peak", "memory", "peak_heap_mb", "#9e9d24"},
}

func main() {
	in := flag.String("in", "", "scale.sh JSON lines")
	out := flag.String("out", "docs/images/scale.svg", "SVG file to write")
	flag.Parse()
	if *in == "" {
		log.Fatal("-in is required")
	}
	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	points, err := readStages(f)
	f.Close()
	if err != nil {
		log.Fatal(err)
	}
	if len(points) == 0 {
		log.Fatalf("%s: no stage lines", *in)
	}
	if err := os.WriteFile(*out, []byte(chart(points)), 0o644); err != nil {
		log.Fatal(err)
	}
	printTable(os.Stdout, points)
}

// readStages collects each stage's figures as "step/metric", in stage order.
func readStages(r io.Reader) ([]point, error) {
	byStage := map[float64]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue
		}
		step, _ := l["step"].(string)
		stage, ok := l["stage"].(float64)
		if step == "" || !ok || step == "restart" {
			continue
		}
		if byStage[stage] == nil {
			byStage[stage] = map[string]float64{}
		}
		for k, v := range l {
			if f, ok := v.(float64); ok {
				byStage[stage][step+"/"+k] = f
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var points []point
	for s, v := range byStage {
		points = append(points, point{s, v})
	}
	sort.Slice(points, func(i, j int) bool { return points[i].stage < points[j].stage })
	return points, nil
}

func printTable(w io.Writer, points []point) {
	all := append(append([]series{}, costSeries...), memSeries...)
	fmt.Fprintf(w, "%-46s", "objects")
	for _, p := range points {
		fmt.Fprintf(w, " %12.0f", p.stage)
	}
	fmt.Fprintln(w)
	for _, s := range all {
		unit := "server CPU ms"
		if s.step == "memory" {
			unit = "MB"
		}
		fmt.Fprintf(w, "%-46s", s.name+" ("+unit+")")
		for _, p := range points {
			if v, ok := p.values[s.step+"/"+s.metric]; ok {
				fmt.Fprintf(w, " %12.3f", v)
			} else {
				fmt.Fprintf(w, " %12s", "-")
			}
		}
		fmt.Fprintln(w)
	}
}

// panel is one plot area with log x and log y axes.
type panel struct {
	x0, y0, w, h           float64 // plot area in SVG units
	xmin, xmax, ymin, ymax float64 // data range, decades
}

func (p panel) px(v float64) float64 {
	return p.x0 + (math.Log10(v)-math.Log10(p.xmin))/(math.Log10(p.xmax)-math.Log10(p.xmin))*p.w
}

func (p panel) py(v float64) float64 {
	return p.y0 + p.h - (math.Log10(v)-math.Log10(p.ymin))/(math.Log10(p.ymax)-math.Log10(p.ymin))*p.h
}

// decades widens [lo, hi] to whole powers of ten.
func decades(lo, hi float64) (float64, float64) {
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

// draw writes one panel: axes, decade grid, a line and dots per series and
// its legend.
func (p panel) draw(b *strings.Builder, title, ylabel string, ss []series, points []point) {
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="14">%s</text>`+"\n", p.x0, p.y0-12, html.EscapeString(title))
	for v := p.xmin; v <= p.xmax*1.0001; v *= 10 {
		x := p.px(v)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, x, p.y0, p.y0+p.h)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, p.y0+p.h+16, count(v))
	}
	for v := p.ymin; v <= p.ymax*1.0001; v *= 10 {
		y := p.py(v)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", p.x0, p.x0+p.w, y, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", p.x0-6, y+4, v)
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", p.x0, p.y0, p.w, p.h)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">objects stored</text>`+"\n", p.x0+p.w/2, p.y0+p.h+34)
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", p.x0-48, p.y0+p.h/2, html.EscapeString(ylabel))
	for i, s := range ss {
		var pts []string
		for _, pt := range points {
			if v, ok := pt.values[s.step+"/"+s.metric]; ok && v > 0 {
				x, y := p.px(pt.stage), p.py(v)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, s.color)
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
		}
		ly := p.y0 + 14 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", p.x0+p.w+12, p.x0+p.w+30, ly-4, ly-4, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", p.x0+p.w+36, ly, html.EscapeString(s.name))
	}
}

// count writes 10000 as 10k and 1000000 as 1M.
func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// rangeOf returns the smallest and largest positive value of the series.
func rangeOf(ss []series, points []point) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range points {
			if v, ok := p.values[s.step+"/"+s.metric]; ok && v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 1, 10
	}
	return decades(lo, hi)
}

func chart(points []point) string {
	const width, height = 980, 640
	xmin, xmax := decades(points[0].stage, points[len(points)-1].stage)
	if xmax < 1e6 {
		xmax = 1e6 // 1,000,000 objects, so that charts of small runs line up
	}
	cost := panel{x0: 80, y0: 60, w: 560, h: 220, xmin: xmin, xmax: xmax}
	cost.ymin, cost.ymax = rangeOf(costSeries, points)
	mem := panel{x0: 80, y0: 370, w: 560, h: 200, xmin: xmin, xmax: xmax}
	mem.ymin, mem.ymax = rangeOf(memSeries, points)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15">kapi at scale (bench/scale.sh): configmaps of 2 KiB, 1,000 watchers connected; log scales</text>`+"\n")
	cost.draw(&b, "server CPU per operation (flat = the cost does not grow with the store)", "ms of server CPU", costSeries, points)
	mem.draw(&b, "server memory while measuring (peak over the stage)", "MB", memSeries, points)
	b.WriteString("</svg>\n")
	return b.String()
}
