#!/usr/bin/env bash
# Paired runs of one kbench workload: the reference (../shared/reference) and
# the quickstart alternate, each on a fresh server, the order swapped every
# other round; then bench/pairsum prints, per round, kapi's ratio to the
# reference run next to it and the host's steal time in both, and the median
# of the ratios. On a shared machine whose speed drifts, ratios of adjacent
# runs are steadier than the ratio of medians.
#
#   bench/pair.sh [-w WORKLOAD] [-r ROUNDS] [-s full|quick]     (create, 4, full)
#
# Lines go to bench/results/pair-WORKLOAD-DATE.jsonl (KBENCH_RESULTS elsewhere).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REF="$HERE/../../shared/reference"
KBENCH="$HERE/../../shared/bench/bin/kbench"
workload=create rounds=4 scale=full
while getopts "w:r:s:" o; do
  case "$o" in
  w) workload=$OPTARG ;;
  r) rounds=$OPTARG ;;
  s) scale=$OPTARG ;;
  *) echo "usage: $0 [-w WORKLOAD] [-r ROUNDS] [-s full|quick]" >&2; exit 2 ;;
  esac
done
[[ -x "$KBENCH" ]] || (cd "$HERE/../../shared/bench" && go build -o bin/kbench .)
(cd "$HERE/.." && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$HERE/bin/quickstart" ./examples/quickstart)
results="${KBENCH_RESULTS:-$HERE/results}"
mkdir -p "$results"
out="$results/pair-$workload-$(date -u +%Y%m%d-%H%M%S).jsonl"
work="$(mktemp -d -t kapi-pair-XXXXXX)"
trap 'rm -rf "$work"' EXIT

run() { # run SIDE ROUND
  local side=$1 r=$2 dir="$work/$1-$2"
  mkdir -p "$dir"
  if [[ $side == ref ]]; then
    "$REF/kube-up.sh" "$dir" >"$dir/up.log" 2>&1 || { echo "pair.sh: reference did not start, see $dir/up.log" >&2; return 1; }
  else
    KAPI_NO_BUILD=1 "$HERE/kapi-up.sh" "$dir" >/dev/null
  fi
  "$KBENCH" --kubeconfig "$dir/kubeconfig" --pids "$dir/pids" --scale "$scale" --workload "$workload" \
    --label "$side-$r" --no-table --out "$out" >/dev/null || echo "pair.sh: kbench failed for $side-$r" >&2
  if [[ $side == ref ]]; then "$REF/kube-down.sh" "$dir" >/dev/null 2>&1; else "$HERE/kapi-down.sh" "$dir"; fi
  rm -rf "$dir"
}

for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then run ref "$r"; run kapi "$r"; else run kapi "$r"; run ref "$r"; fi
done
echo "$out"
(cd "$HERE/.." && go run ./bench/pairsum "$out")
