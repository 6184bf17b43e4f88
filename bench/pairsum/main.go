// Command pairsum summarises bench/pair.sh's paired kbench runs: for each
// round, kapi's figure over the reference's for the workload's main
// metrics, with the host's steal time during both runs, and the median of
// each ratio over the rounds.
//
//	go run ./bench/pairsum bench/results/pair-create-DATE.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// metricsOf are the metrics compared per workload (kbench's names).
var metricsOf = map[string][]string{
	"create":        {"ops_per_s", "srv_cpu_ms_per_op", "p50_ms"},
	"get":           {"ops_per_s", "srv_cpu_ms_per_op"},
	"list":          {"p50_ms", "paged_total_p50_ms", "srv_peak_delta_mb"},
	"list-rv0":      {"p50_ms"},
	"protobuf-list": {"pb_p50_ms", "json_p50_ms"},
	"informer-sync": {"listwatch_p50_s", "watchlist_p50_s", "srv_cpu_s"},
	"update":        {"ops_per_s", "srv_cpu_ms_per_op"},
	"watch-fanout":  {"lat_p99_ms", "srv_cpu_s", "missed"},
	"apply":         {"create_per_s", "reapply_per_s"},
}

type line struct {
	Label    string             `json:"label"`
	Workload string             `json:"workload"`
	Metrics  map[string]float64 `json:"metrics"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pairsum FILE.jsonl")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "pairsum:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type pair struct{ ref, kapi *line }
	rounds := map[int]*pair{}
	workload := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Label == "" || l.Metrics == nil {
			continue // kbench's other lines (host facts, tables)
		}
		side, num, ok := strings.Cut(l.Label, "-")
		r, err := strconv.Atoi(num)
		if !ok || err != nil || (side != "ref" && side != "kapi") {
			continue
		}
		workload = l.Workload
		p := rounds[r]
		if p == nil {
			p = &pair{}
			rounds[r] = p
		}
		if side == "ref" {
			p.ref = &l
		} else {
			p.kapi = &l
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	names := metricsOf[workload]
	if len(names) == 0 {
		return fmt.Errorf("no paired runs of a known workload in %s", path)
	}
	nums := make([]int, 0, len(rounds))
	for r := range rounds {
		nums = append(nums, r)
	}
	slices.Sort(nums)
	ratios := make([][]float64, len(names))
	fmt.Printf("%s: kapi/ref per round (steal ref, kapi)\n", workload)
	for _, r := range nums {
		p := rounds[r]
		if p.ref == nil || p.kapi == nil {
			fmt.Printf("round %d: incomplete\n", r)
			continue
		}
		fmt.Printf("round %d:", r)
		for i, m := range names {
			ref, kapi := p.ref.Metrics[m], p.kapi.Metrics[m]
			if ref == 0 {
				fmt.Printf("  %s %g/%g", m, kapi, ref)
				continue
			}
			ratios[i] = append(ratios[i], kapi/ref)
			fmt.Printf("  %s %.4g/%.4g = %.3f", m, kapi, ref, kapi/ref)
		}
		fmt.Printf("  (steal %.2f, %.2f)\n", p.ref.Metrics["host_steal_frac"], p.kapi.Metrics["host_steal_frac"])
	}
	fmt.Print("median:")
	for i, m := range names {
		if len(ratios[i]) > 0 {
			fmt.Printf("  %s %.3f", m, median(ratios[i]))
		}
	}
	fmt.Println()
	return nil
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
