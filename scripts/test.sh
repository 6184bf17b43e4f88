#!/usr/bin/env bash
# Runs every test of the repository: the library's and the modules joined by
# go.work (examples/e2e with kubectl, helm, client-go and headless Chromium, and
# examples/controller). First installs what the tests need beyond Go where it
# is missing: a C compiler (-race needs cgo) and Chromium (the browser test),
# from Debian's packages. Extra arguments go to go test (e.g. -run X).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
apt_updated=""
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: install $* (no apt-get here)" >&2
    exit 1
  fi
  if [ -z "$apt_updated" ]; then
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    apt_updated=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}
if ! command -v gcc >/dev/null 2>&1; then
  apt_install gcc libc6-dev
fi
# The names examples/e2e/browser_test.go looks for; KAPI_CHROMIUM names
# another binary.
have_chromium() {
  local name
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then return 0; fi
  done
  return 1
}
if [ -z "${KAPI_CHROMIUM:-}" ] && ! have_chromium; then
  apt_install chromium fonts-dejavu-core
fi

exec go test -race -count=1 -timeout 30m "$@" ./... ./examples/e2e/... ./examples/controller/...
