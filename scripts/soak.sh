#!/usr/bin/env bash
# labrouter fault soak: three simulated machines whose faults change at random (refuse, hang,
# 500, 429 with odd Retry-After values, cut and stalled streams, slow drips, 100-300 MiB
# bodies, malformed JSON, ok), concurrent plain and streamed clients (some with
# x-labrouter-wait), registry reloads, and one SIGKILL + restart of the router mid-run.
# Prints the figures and five invariants (plus a recovery check); exit 0 when all held.
#
#   scripts/soak.sh MINUTES [soak options]     e.g. scripts/soak.sh 2
#
# Options after MINUTES go to examples/soak.rs: --seed N (repeat a run), --clients N [10],
# --max-rps N [40], --rss-limit-mb N [300], --keep (keep the run directory on success).
# Environment: SOAK_NO_BUILD=1 uses the binaries in target/release as they are.
#
# Everything runs on 127.0.0.1 and stops by itself: MINUTES of traffic plus about a minute
# to drain and check. Logs, registry and state of a failed run stay in the printed directory.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
case "$1" in
  -h | --help) usage ;;
esac
MINUTES=$1
shift
[[ $MINUTES =~ ^[0-9]+([.][0-9]+)?$ ]] || {
  printf 'soak.sh: MINUTES must be a positive number, got %s\n\n' "$MINUTES" >&2
  usage
}

if [ "${SOAK_NO_BUILD:-0}" != 1 ]; then
  printf '== cargo build --release --bin labrouter --example soak\n' >&2
  cargo build --release --quiet --bin labrouter --example soak
fi
for b in target/release/labrouter target/release/examples/soak; do
  [ -x "$b" ] || { printf 'soak.sh: %s is missing: build it first\n' "$b" >&2; exit 2; }
done

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec target/release/examples/soak "$MINUTES" --bin target/release/labrouter "$@"
