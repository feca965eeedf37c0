# Shared by scripts/bench.sh and scripts/bench-cluster.sh (sourced, from the repository root
# with ROOT set): processes started on 127.0.0.1 and stopped at exit, wrk runs and their
# aggregation, and the formatting of the tables.
# shellcheck shell=bash

log() { printf '== %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# ---------------------------------------------------------------- processes
# bench_processes NAME: a temporary directory ($TMP) and the started processes ($PIDS),
# all stopped and removed at exit.
bench_processes() {
  TMP=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # port, name, pid
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$TMP/$2.log" >&2 || true
  die "$2 did not start on 127.0.0.1:$1"
}
start() { # name port command... ; sets LAST_PID (no subshell: the trap must see it)
  local name=$1 port=$2
  shift 2
  port_free "$port" || die "127.0.0.1:$port is taken (set BENCH_PORT to another base)"
  "$@" >"$TMP/$name.log" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
  wait_port "$port" "$name" "$LAST_PID"
}

# ---------------------------------------------------------------- wrk
# wrk_once URL SECS -> its WRK line (THREADS, CONNS, BODY or BENCH_BODY_OVERRIDE).
wrk_once() {
  local out
  out=$(BENCH_BODY=${BENCH_BODY_OVERRIDE:-$BODY} wrk -t"$THREADS" -c"$CONNS" -d"${2}s" --latency \
    -s "$ROOT/benches/bench/post.lua" "$1" 2>&1) || die "wrk failed on $1: $out"
  grep '^WRK ' <<<"$out" || die "wrk printed no summary for $1: $out"
}
# Rounds of WRK lines -> one: requests and errors summed, req/s averaged (and its spread:
# (max - min) / mean), percentiles the median of the rounds (and p99's max - min), max the max.
wrk_agg() {
  awk '
    function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } return a[int((n + 1) / 2)] }
    { n++; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1], n] = kv[2] } }
    END {
      lo = hi = v["rps", 1]; plo = phi = v["p99_us", 1]
      for (k = 1; k <= n; k++) { req += v["requests", k]; rps += v["rps", k]; se += v["status_errors", k]; ke += v["socket_errors", k]
        p50[k] = v["p50_us", k]; p90[k] = v["p90_us", k]; p99[k] = v["p99_us", k]; if (v["max_us", k] > mx) mx = v["max_us", k]
        if (v["rps", k] < lo) lo = v["rps", k]; if (v["rps", k] > hi) hi = v["rps", k]
        if (v["p99_us", k] < plo) plo = v["p99_us", k]; if (v["p99_us", k] > phi) phi = v["p99_us", k] }
      printf "WRK requests=%d rps=%.0f rps_spread_pct=%.1f p50_us=%d p90_us=%d p99_us=%d p99_spread_us=%d max_us=%d status_errors=%d socket_errors=%d rounds=%d\n",
        req, rps / n, (rps > 0 ? 100 * (hi - lo) * n / rps : 0), med(p50, n), med(p90, n), med(p99, n), phi - plo, mx, se, ke, n
    }'
}

# ---------------------------------------------------------------- the tables
# kv LINE KEY -> value of KEY=value in LINE
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }
ms() { awk -v v="$1" -v d="${2:-2}" 'BEGIN { printf "%.*f", d, v / 1000 }'; }   # µs -> ms [decimals]
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, (b > 0 ? a / b : 0) }'; }
ok() { awk "BEGIN { exit !($1) }" && echo "**met**" || echo "**missed**"; }
thousands() { printf '%.0f' "$1" | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta'; }
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
machine() {
  local cpu
  cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($cpu), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load before: $LOAD_BEFORE"
}
