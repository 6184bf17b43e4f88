#!/usr/bin/env bash
# Staged scale run: one server on one data directory, filled with configmaps of
# 2 KiB up to each stage size in turn, measured at each size:
#   bench/scale.sh [-s 10000,100000,1000000] [-d DIR] [-o OUT.jsonl]
# DIR must be new (default: a fresh temporary directory); OUT defaults to
# DIR/scale.jsonl. Needs kbench (../shared/bench), curl and jq.
#
# Every line is a JSON object with "step", "stage" (the stage size) and
# "objects" (configmaps stored when the step ended):
#   fill      kbench create of up to 100,000 objects at 64 concurrent writers
#   create    kbench create of 5,000 more: ops_per_s, srv_cpu_ms_per_op, p50/p99
#   get       kbench get, 20,000 random gets over the 10,000 oldest objects
#   pages     the first 40 pages (limit=500) of /api/v1/configmaps
#   ns_pages  40 pages (limit=500) of the oldest fill namespace, walked again
#             from the start when it has fewer
#             (ms_per_page and srv_cpu_ms_per_page over one kept-alive
#             connection, bench/watchload -walk)
#   list      a full list of all configmaps: seconds, MB, server CPU
#   memory    the server while 1,000 watchers (bench/watchload -hold) are
#             connected and the steps above run: idle before they connect,
#             peak and end of RssAnon, RssFile, Go heap, goroutines, and
#             whether every watcher got every write (bench/watchload alone
#             checks that the server comes back to idle after watchers leave)
#   restart   after the last stage: process start to /readyz, RSS after start
# Server CPU comes from /proc/PID/stat (utime+stime) where kbench gives none.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
STAGES=10000,100000,1000000
DIR=""
OUT=""
while getopts "s:d:o:h" opt; do
  case $opt in
    s) STAGES=$OPTARG ;;
    d) DIR=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) sed -n '2,6p' "$0" >&2; exit 2 ;;
  esac
done
if [[ -z "$DIR" ]]; then DIR=$(mktemp -d -t kapi-scale-XXXXXX); fi
[[ ! -e "$DIR/data" ]] || { echo "scale.sh: $DIR/data exists; the fill counts objects from zero, give a new DIR" >&2; exit 2; }
mkdir -p "$DIR/logs"
DIR="$(cd "$DIR" && pwd)"
OUT="${OUT:-$DIR/scale.jsonl}"
IFS=, read -r -a SIZES <<<"$STAGES"

KBENCH="$HERE/../../shared/bench/bin/kbench"
[[ -x "$KBENCH" ]] || (cd "$HERE/../../shared/bench" && go build -o bin/kbench .)
WATCHLOAD="$HERE/bin/watchload"
(cd "$HERE/.." && go build -o "$WATCHLOAD" ./bench/watchload)

CHUNK=100000 # objects per kbench fill run: kbench builds all its bodies up front
BATCH=5000   # the measured create batch
WATCHERS=1000
CLK=$(getconf CLK_TCK)
pid() { cut -d' ' -f1 "$DIR/pids"; }
server() { awk '/server:/ {print $2; exit}' "$DIR/kubeconfig"; }
token() { awk '/token:/ {print $2; exit}' "$DIR/kubeconfig"; }
cpu() { sed 's/.*) //' "/proc/$(pid)/stat" | awk '{print $12 + $13}'; } # utime+stime, ticks
cpu_s() { awk -v a="$1" -v b="$2" -v c="$CLK" 'BEGIN {printf "%.3f", (b - a) / c}'; }
rss() { awk '/^RssAnon/ {a=$2} /^RssFile/ {f=$2} END {printf "\"rss_anon_mb\":%.1f,\"rss_file_mb\":%.1f", a/1024, f/1024}' "/proc/$(pid)/status"; }
emit() { tee -a "$OUT"; }
# fetch PATH FILE -> "seconds_without_handshake bytes"
fetch() {
  curl -sk -A kapi-scale -o "$2" -w '%{time_total} %{time_appconnect} %{size_download}' \
    -H "Authorization: Bearer $(token)" "$(server)$1" | awk '{printf "%.6f %.0f\n", $1 - $2, $3}'
}
kb() { # kbench with the run's defaults; JSON lines on stdout
  "$KBENCH" --kubeconfig "$DIR/kubeconfig" --pids "$DIR/pids" --no-table --size 2048 \
    --namespaces 10 --quiesce 10s --max-time 60m "$@" 2>>"$DIR/logs/kbench.log"
}
# kbline STEP WORKLOAD: kbench's line of WORKLOAD as a scale line
kbline() {
  grep "\"workload\":\"$2\"" | jq -c --arg step "$1" --argjson stage "$stage" --argjson objects "$objects" \
    '{step: $step, stage: $stage, objects: $objects, ok: .ok} + (.metrics | {ops, errors, ops_per_s,
      srv_cpu_ms_per_op, p50_ms, p99_ms, srv_peak_mb}) + (if .error then {error: .error} else {} end)'
}
# walk PATH PAGES STEP [cycle]: PAGES pages (limit=500) of PATH over one
# kept-alive connection (bench/watchload -walk); with cycle the walk starts
# over at the end until it has PAGES pages
walk() {
  local flags=()
  [[ -z "${4:-}" ]] || flags=(-cycle)
  "$WATCHLOAD" -kubeconfig "$DIR/kubeconfig" -pid "$(pid)" -walk "$1" -pages "$2" "${flags[@]}" |
    jq -c --arg step "$3" --argjson stage "$stage" --argjson objects "$objects" \
      '{step: $step, stage: $stage, objects: $objects} + .'
}

"$HERE/kapi-up.sh" "$DIR" >/dev/null
trap '"$HERE/kapi-down.sh" "$DIR"; [[ -n "${wl:-}" ]] && kill "$wl" 2>/dev/null; true' EXIT
objects=0
k=0
for stage in "${SIZES[@]}"; do
  k=$((k + 1))
  # fill up to the stage size, in chunks of at most CHUNK objects
  j=0
  while ((objects < stage)); do
    n=$((stage - objects < CHUNK ? stage - objects : CHUNK))
    objects=$((objects + n))
    kb --workload create --c 64 --n "$n" --run-id "f$k-$j" --quiesce 0s | kbline fill create | emit
    j=$((j + 1))
  done
  echo "{\"step\":\"disk\",\"stage\":$stage,\"objects\":$objects,\"data_mb\":$(du -sm "$DIR/data" | cut -f1)}" | emit

  # 1,000 watchers held while the costs are measured; their line has memory
  rm -f "$DIR/watch.ready"
  "$WATCHLOAD" -kubeconfig "$DIR/kubeconfig" -pid "$(pid)" -watchers "$WATCHERS" -writers 2 -rate 1 \
    -writes 1000000 -hold -ready-file "$DIR/watch.ready" -namespace scale-watch -sample 1s -leave-timeout 0 \
    >"$DIR/watch.out" 2>>"$DIR/logs/watchload.log" &
  wl=$!
  for _ in $(seq 1 1800); do [[ -e "$DIR/watch.ready" ]] || ! kill -0 "$wl" 2>/dev/null && break; sleep 0.1; done
  [[ -e "$DIR/watch.ready" ]] || { echo "scale.sh: watchers did not connect (see $DIR/logs/watchload.log)" >&2; exit 1; }

  objects=$((objects + BATCH))
  kb --workload create --c 64 --n "$BATCH" --run-id "c$k" | kbline create create | emit
  kb --workload get --c 32 --gets 20000 --n "$((objects < 10000 ? objects : 10000))" --run-id f1-0 | kbline get get | emit
  walk "/api/v1/configmaps?limit=500" 40 pages | emit
  walk "/api/v1/namespaces/kb-f1-0-00/configmaps?limit=500" 40 ns_pages cycle | emit
  c0=$(cpu)
  read -r s b < <(fetch /api/v1/configmaps /dev/null)
  c1=$(cpu)
  jq -nc --argjson stage "$stage" --argjson objects "$objects" --argjson s "$s" --argjson b "$b" \
    --argjson cpu "$(cpu_s "$c0" "$c1")" \
    '{step: "list", stage: $stage, objects: $objects, s: ($s * 1000 | round / 1000), mb: ($b / 1048576 | round), srv_cpu_s: $cpu}' | emit

  kill -INT "$wl"
  wait "$wl" || echo "scale.sh: watchload reported a failure at stage $stage (see the memory line)" >&2
  wl=""
  tail -1 "$DIR/watch.out" | jq -c --argjson stage "$stage" --argjson objects "$objects" \
    '{step: "memory", stage: $stage, objects: $objects} + (to_entries | map(select(.key | test("^(idle|peak|end)_")))
      | from_entries) + {watchers, connect_s, writes_acked, deliveries, missed, duplicates, out_of_order, reconnects,
      lat_p99_ms}' | emit
done

# restart on the same data: process start to /readyz (kapi-up.sh polls every 0.1 s)
"$HERE/kapi-down.sh" "$DIR"
echo "{\"step\":\"disk\",\"stage\":$stage,\"objects\":$objects,\"data_mb\":$(du -sm "$DIR/data" | cut -f1),\"after\":\"stop\"}" | emit
t0=$(date +%s.%N)
KAPI_NO_BUILD=1 "$HERE/kapi-up.sh" "$DIR" >/dev/null
t1=$(date +%s.%N)
start=$(rss)
sleep 5
echo "{\"step\":\"restart\",\"stage\":$stage,\"objects\":$objects,\"startup_s\":$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}'),$start,\"after_5s\":{$(rss)}}" | emit
echo "scale.sh: lines in $OUT; chart: go run ./bench/scalechart -in $OUT" >&2
