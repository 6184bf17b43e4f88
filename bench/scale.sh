#!/usr/bin/env bash
# Scale check: N configmaps of 2 KiB on disk, then a restart.
#   bench/scale.sh N [DIR]
# Creates N objects with kbench (../shared/bench), stops the server, starts it
# again on the same data and prints, as JSON lines: create throughput, the
# data directory's size, startup time (process start to /readyz), RSS after
# start, a full list and a paged walk (limit 500) timed with curl, RSS after
# them.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
N="${1:?usage: $0 N [DIR]}"
DIR="${2:-$(mktemp -d -t kapi-scale-XXXXXX)}"
KBENCH="$HERE/../../shared/bench/bin/kbench"
[[ -x "$KBENCH" ]] || (cd "$HERE/../../shared/bench" && go build -o bin/kbench .)
rss() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$(cut -d' ' -f1 "$DIR/pids")/status"; }
now() { date +%s.%N; }
server() { awk '/server:/ {print $2; exit}' "$DIR/kubeconfig"; }
token() { awk '/token:/ {print $2; exit}' "$DIR/kubeconfig"; }
get() { # get PATH -> prints seconds
  curl -sk -A kapi-scale -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $(token)" "$(server)$1"
}

"$HERE/kapi-up.sh" "$DIR" >/dev/null
"$KBENCH" --kubeconfig "$DIR/kubeconfig" --pids "$DIR/pids" --workload create --n "$N" \
  --max-time 60m --no-table --label "scale-$N" 2>/dev/null | grep '"workload":"create"' |
  sed 's/^/{"step":"create",/; s/^{"step":"create",{/{"step":"create",/'
"$HERE/kapi-down.sh" "$DIR"
echo "{\"step\":\"disk\",\"n\":$N,\"data_mb\":$(du -sm "$DIR/data/db" | cut -f1)}"

t0=$(now)
KAPI_NO_BUILD=1 "$HERE/kapi-up.sh" "$DIR" >/dev/null
t1=$(now)
echo "{\"step\":\"restart\",\"n\":$N,\"startup_s\":$(echo "$t1 - $t0" | bc),\"rss_mb\":$(rss)}"

full=$(get /api/v1/configmaps)
walk() {
  local cont="" t=0 page pages=0
  while :; do
    page=$(curl -sk -A kapi-scale -w '\n%{time_total}' -H "Authorization: Bearer $(token)" \
      "$(server)/api/v1/configmaps?limit=500&continue=$(printf %s "$cont" | jq -sRr @uri)")
    t=$(echo "$t + $(tail -1 <<<"$page")" | bc)
    pages=$((pages + 1))
    cont=$(head -c 2000 <<<"$page" | grep -o '"continue": *"[^"]*"' | cut -d'"' -f4 || true)
    [[ -n "$cont" ]] || break
  done
  echo "$t $pages"
}
read -r paged pages < <(walk)
echo "{\"step\":\"list\",\"n\":$N,\"full_list_s\":$full,\"paged_walk_s\":$paged,\"pages\":$pages,\"rss_mb\":$(rss)}"
"$HERE/kapi-down.sh" "$DIR"
