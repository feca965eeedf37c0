#!/usr/bin/env bash
# Render the labrouter dashboard with headless Chromium: a PNG screenshot, or the DOM.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage:
  scripts/dashboard-screenshot.sh URL OUT.png   save a 1280x900 screenshot of URL to OUT.png
  scripts/dashboard-screenshot.sh --dom URL     print the rendered DOM of URL to stdout
  scripts/dashboard-screenshot.sh --help        show this help

URL must be a loopback address (localhost, 127.x.x.x or [::1]); others are refused.
The page gets 3 s of virtual time to run its scripts (fetch /status, /status/events,
/status/history, /status/hourly).
With DASHBOARD_CONSOLE=FILE set, the page's console messages and uncaught errors (as
Chromium logs them) are written to FILE; DASHBOARD_SIZE=W,H sets the window (360,900: a phone).
Uses /usr/bin/chromium; if it is missing and we are root, installs Debian's chromium.
Chromium's own log goes to stderr only if it fails.
EOF
}

die() { echo "dashboard-screenshot: $*" >&2; exit 2; }

mode=shot url="" out=""
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --dom)
    [[ $# -eq 2 ]] || { usage >&2; exit 2; }
    mode=dom url=$2 ;;
  -*) usage >&2; exit 2 ;;
  *)
    [[ $# -eq 2 ]] || { usage >&2; exit 2; }
    url=$1 out=$2 ;;
esac

loopback='^https?://(localhost|127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\])(:[0-9]{1,5})?(/[^[:space:]]*)?$'
[[ $url =~ $loopback ]] || die "refusing non-loopback URL: $url (use http://127.0.0.1:PORT/)"

chromium=/usr/bin/chromium
if [[ ! -x $chromium ]]; then
  [[ $(id -u) -eq 0 ]] || die "$chromium is missing; install it with: apt-get install -y chromium"
  echo "dashboard-screenshot: installing chromium" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi

profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf -- "$profile" "$log"' EXIT

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --user-data-dir="$profile" --virtual-time-budget=3000 "--window-size=${DASHBOARD_SIZE:-1280,900}")

if [[ ${DASHBOARD_CONSOLE:-} ]]; then
  flags+=(--enable-logging=stderr --v=0)
fi
if [[ $mode == dom ]]; then
  flags+=(--dump-dom)
else
  [[ $out == /* ]] || out="$PWD/$out"
  mkdir -p -- "$(dirname -- "$out")"
  rm -f -- "$out"
  flags+=(--screenshot="$out")
fi

# Chromium's log, minus the dbus noise of a headless container.
show_log() { grep -v -e 'dbus/' -e 'unexpected operator' -- "$log" >&2 || true; }

if ! timeout 90 "$chromium" "${flags[@]}" "$url" 2>"$log"; then
  show_log
  die "chromium failed on $url"
fi

if [[ ${DASHBOARD_CONSOLE:-} ]]; then
  grep -E 'CONSOLE|Uncaught' -- "$log" >"$DASHBOARD_CONSOLE" || true
fi

if [[ $mode == shot ]]; then
  [[ -s $out ]] || { show_log; die "no screenshot written to $out"; }
  echo "$out"
fi
