#!/usr/bin/env bash
# Stop a server started by kapi-up.sh DIR: the pid recorded in DIR/pids, only
# while its command line still names DIR (guards against pid reuse).
set -uo pipefail
DIR="${1:?usage: $0 DIR}"
DIR="$(cd "$DIR" && pwd)"
[[ -s "$DIR/pids" ]] || exit 0
while read -r pid _; do
  [[ "$pid" =~ ^[0-9]+$ ]] || continue
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/" || continue
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
done <"$DIR/pids"
: >"$DIR/pids"
