#!/usr/bin/env bash
# Start the quickstart server for kbench (../shared/bench/compare.sh) on DIR:
#   bench/kapi-up.sh DIR    -> DIR/kubeconfig, DIR/pids; returns once /readyz answers
#   bench/kapi-down.sh DIR  -> stops exactly the pid in DIR/pids
# The binary is built into bench/bin/quickstart (go build: a no-op when nothing
# changed) the way ../shared/reference/build.sh builds kube-apiserver and etcd:
# CGO_ENABLED=0 (a static binary: no libc mapped, ~1.5 MB less resident),
# -trimpath, -ldflags "-s -w". KAPI_NO_BUILD=1 uses the one there.
# KAPI_ARGS adds quickstart flags (word-split), e.g. KAPI_ARGS=--pprof-listen=127.0.0.1:6060.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${1:?usage: $0 DIR}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
if [[ -z "${KAPI_NO_BUILD:-}" || ! -x "$HERE/bin/quickstart" ]]; then
  (cd "$HERE/.." && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$HERE/bin/quickstart" ./examples/quickstart)
fi

port=""
for _ in $(seq 1 200); do
  p=$((20000 + RANDOM % 40000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n "$port" ]] || { echo "kapi-up: no free port" >&2; exit 1; }

mkdir -p "$DIR/logs"
: >"$DIR/pids"
# shellcheck disable=SC2086
nohup setsid "$HERE/bin/quickstart" --data-dir "$DIR/data" --listen "127.0.0.1:$port" \
  --log-level warn ${KAPI_ARGS:-} </dev/null >>"$DIR/logs/kapi.log" 2>&1 &
pid=$!
echo "$pid kapi" >"$DIR/pids"
for _ in $(seq 1 300); do
  if [[ -s "$DIR/data/kubeconfig" ]] && curl -fsSk "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    cp "$DIR/data/kubeconfig" "$DIR/kubeconfig"
    echo "$DIR/kubeconfig"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || { echo "kapi-up: server exited (see $DIR/logs/kapi.log)" >&2; exit 1; }
  sleep 0.1
done
echo "kapi-up: not ready after 30s" >&2
kill "$pid" 2>/dev/null || true
exit 1
