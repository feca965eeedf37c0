# shellcheck shell=bash
# Sourced by scripts/bench.sh and scripts/flame.sh: what a proxy's processes spend in CPU per
# request while wrk loads them.
#
#   cpu_per_request PIDS CMD...
#     runs CMD, a wrk run with benches/bench/post.lua or anything else that prints its
#     "WRK requests=N ..." line (a program or a shell function; its output is read, not passed
#     on), and prints one line:
#       CPU requests=N cpu_ms=T cpu_us_per_request=U source=perf|proc
#     T is the CPU time of the processes PIDS (comma-separated; all their threads) while CMD
#     ran: perf stat's task-clock when perf can attach to them, else the growth of
#     utime + stime in /proc/PID/stat (clock ticks of 1/CLK_TCK s, so ±10 ms at 100 Hz).
#     BENCH_NO_PERF=1 takes /proc even when perf is there. The window opens ~0.3 s before CMD
#     (perf attaching), while the processes are idle.
#   cpu_children PID -> the PIDs of PID's children, comma-separated (nginx's workers)

cpu_ticks() { # PIDS -> utime + stime summed over the processes, in clock ticks
  local pid sum=0 t
  for pid in ${1//,/ }; do
    # Fields after the command name, which is in parentheses and may hold spaces.
    t=$(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat") || return 1
    sum=$((sum + t))
  done
  echo "$sum"
}

cpu_children() {
  local kids
  kids=$(pgrep -P "$1" 2>/dev/null) ||
    kids=$(awk -v p="$1" '{ sub(/.*\) /, ""); if ($2 == p) print FILENAME }' /proc/[0-9]*/stat 2>/dev/null |
      cut -d/ -f3)
  echo "$kids" | paste -sd, -
}

cpu_per_request() {
  local pids=$1 perf_out="" perf_pid="" out t0 t1 ms="" src=proc requests hz
  shift
  hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
  cpu_ticks "$pids" >/dev/null || { echo "cpu_per_request: no process $pids" >&2; return 1; }
  if [ "${BENCH_NO_PERF:-0}" != 1 ] && command -v perf >/dev/null &&
    perf stat -e task-clock -p "$pids" -o /dev/null -- true >/dev/null 2>&1; then
    perf_out=$(mktemp /tmp/labrouter-cpu.XXXXXX)
    perf stat -x, -e task-clock -p "$pids" -o "$perf_out" >/dev/null 2>&1 &
    perf_pid=$!
    sleep 0.3
  fi
  t0=$(cpu_ticks "$pids") || t0=0
  if ! out=$("$@"); then
    echo "cpu_per_request: $* failed: $out" >&2
    if [ -n "$perf_pid" ]; then
      kill -INT "$perf_pid" 2>/dev/null || true
      wait "$perf_pid" 2>/dev/null || true
      rm -f "$perf_out"
    fi
    return 1
  fi
  t1=$(cpu_ticks "$pids") || t1=""
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    # CSV: value,unit,event,...; "<not counted>" when perf saw nothing.
    ms=$(awk -F, '$3 ~ /^task-clock/ && $1 ~ /^[0-9.]+$/ { print $1 }' "$perf_out")
    rm -f "$perf_out"
  fi
  [ -n "$t1" ] || { echo "cpu_per_request: $pids exited during the run" >&2; return 1; }
  if [ -n "$ms" ]; then
    src=perf
  else
    ms=$(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.0f", t * 1000 / hz }')
  fi
  requests=$(sed -n 's/^WRK .*\brequests=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
  [ -n "$requests" ] || { echo "cpu_per_request: no WRK line from $*: $out" >&2; return 1; }
  awk -v r="$requests" -v t="$ms" -v s="$src" 'BEGIN {
    printf "CPU requests=%d cpu_ms=%.1f cpu_us_per_request=%.1f source=%s\n", r, t, (r > 0 ? t * 1000 / r : 0), s }'
}
