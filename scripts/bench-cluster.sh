#!/usr/bin/env bash
# labrouter cluster benchmark (README "Several routers", issue 14): what sharing verdicts through Redis
# costs. The added latency of a transition (published by one router, adopted by its peer)
# and of the probe-lease round trip, against the bare Redis round trip of the same run
# (examples/bench_cluster.rs: two routers in one process); then the throughput and latency
# of a router with `cluster:` on against the same router without, taking turns on one
# simulated machine (goal: no measurable difference, since only transitions touch Redis),
# and how many Redis commands the load caused. One markdown table with goals and verdicts.
# Then section 3, the shared task queue (`cluster.tasks: shared`, scripts/bench-cluster-tasks.sh):
# durable submits/s through two routers on a Redis with `appendfsync always` beside one
# router's SQLite queue, the time from a router's SIGKILL to its running tasks running on the
# other, and Redis round trips per task; a second table.
#
#   scripts/bench-cluster.sh                              # about 2 minutes after the build
#   BENCH_SECS=3 BENCH_ROUNDS=2 scripts/bench-cluster.sh  # shorter
#   BENCH_ONLY=tasks scripts/bench-cluster.sh             # only the shared queue (~1 minute)
#
# Environment (defaults in brackets):
#   BENCH_SECS [5]       seconds of each wrk run, per router per round; and of fixed-rate load
#                        per router
#   BENCH_ROUNDS [3]     wrk rounds; OFF and ON take turns in each (the first alternating), so
#                        that whatever else the machine does hits them alike
#   BENCH_WARMUP [1]     seconds of unrecorded load per router first
#   BENCH_CONNS [32]     wrk connections;  BENCH_THREADS [2] wrk threads
#   BENCH_RPS [1000]     fixed request rate (bench_load rate, OFF and ON in 1 s turns)
#   BENCH_N [300]        rounds of each latency measure back to back (bench_cluster --n)
#   BENCH_IDLE_N [100]   rounds again, each operation after BENCH_GAP_MS [20] ms of nothing
#   BENCH_PORT [18200]   base port: the sim +1, router OFF +2, ON +3, its peer +4; Redis on the
#                        first free port from +20; section 3: routers +5 to +7, sims +8 and +9
#                        (+10 is never started), its durable Redis on the first free port from +61
#   BENCH_ONLY=tasks     run only section 3, the shared task queue
#   BENCH_TASK_SECS [5]  section 3a: seconds of submits;  BENCH_TASK_CLIENTS [32] submitters per
#                        router (the local router gets twice as many)
#   BENCH_TASK_LEASE [3] section 3b: cluster.task_lease in seconds; BENCH_FAILOVER_TASKS [8]
#                        tasks running on the killed router; BENCH_FAILOVER_ROUNDS [3]
#   BENCH_RT_TASKS [300] section 3c: tasks run to their end for the round trips
#   BENCH_NO_BUILD=1     use the binaries in target/release as they are ($CARGO_TARGET_DIR/release
#                        when that is set)
#   BENCH_OUT            also write the table to this file
#
# Needs wrk and redis-server (Debian packages wrk, redis-server; installed with apt-get when
# missing and run as root) and curl (wrk not with BENCH_ONLY=tasks). All traffic goes to
# 127.0.0.1; Redis binds 127.0.0.1 only and keeps nothing on disk but section 3's
# append-only file in the run's temporary directory; every load run is bounded in time and
# count; everything the script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECS=${BENCH_SECS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=${BENCH_WARMUP:-1}
CONNS=${BENCH_CONNS:-32}
THREADS=${BENCH_THREADS:-2}
RPS=${BENCH_RPS:-1000}
N=${BENCH_N:-300}
IDLE_N=${BENCH_IDLE_N:-100}
GAP_MS=${BENCH_GAP_MS:-20}
BASE=${BENCH_PORT:-18200}
P_SIM=$((BASE + 1)) P_OFF=$((BASE + 2)) P_ON=$((BASE + 3)) P_PEER=$((BASE + 4))
CHAT=/v1/chat/completions
BODY='{"model":"code","messages":[{"role":"user","content":"hi"}]}'
REDIS_ENV=LABROUTER_BENCH_REDIS
PREFIX=bench-cluster-sh-$$
ONLY=${BENCH_ONLY:-}
case "$ONLY" in "" | tasks) ;; *) printf 'bench-cluster.sh: BENCH_ONLY=%s: expected tasks\n' "$ONLY" >&2; exit 2;; esac

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
# shellcheck source=scripts/bench-cluster-tasks.sh
. "$ROOT/scripts/bench-cluster-tasks.sh"

# ---------------------------------------------------------------- tools
need_install=()
[ "$ONLY" = tasks ] || command -v wrk >/dev/null || need_install+=(wrk)
command -v redis-server >/dev/null || need_install+=(redis-server)
command -v redis-cli >/dev/null || need_install+=(redis-tools)
command -v curl >/dev/null || need_install+=(curl)
if [ ${#need_install[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${need_install[*]} (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${need_install[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq "${need_install[@]}" >/dev/null; }
    case " ${need_install[*]} " in *" redis-server "*)
      log "note: Debian may have started its own redis-server on :6379 (systemctl disable --now redis-server)";;
    esac
  else
    die "missing ${need_install[*]}: install them (sudo apt-get install -y ${need_install[*]}) and rerun"
  fi
fi

EXAMPLES=(bench_cluster bench_load bench_tasks bench_sim)
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  log "cargo build --release --bin labrouter ${EXAMPLES[*]/#/--example }"
  # shellcheck disable=SC2046 # one --example per name
  cargo build --release --quiet --bin labrouter $(printf -- '--example %s ' "${EXAMPLES[@]}")
fi
TARGET=${CARGO_TARGET_DIR:-target}
case "$TARGET" in /*) ;; *) TARGET=$ROOT/$TARGET;; esac
BIN=$TARGET/release
for b in labrouter "${EXAMPLES[@]/#/examples/}"; do
  [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run cargo build --release --bin labrouter --examples"
done

# ---------------------------------------------------------------- processes
bench_processes labrouter-bench-cluster
if [ "$ONLY" = tasks ]; then
  queue_benchmarks
  queue_report
  if [ -n "${BENCH_OUT:-}" ]; then echo "$QUEUE_TABLE" >"$BENCH_OUT"; fi
  exit 0
fi

for p in "$P_SIM" "$P_OFF" "$P_ON" "$P_PEER"; do
  port_free "$p" || die "127.0.0.1:$p is taken (set BENCH_PORT to another base)"
done
P_REDIS=
for p in $(seq $((BASE + 20)) $((BASE + 60))); do
  if port_free "$p"; then P_REDIS=$p; break; fi
done
[ -n "$P_REDIS" ] || die "no free port for Redis in 127.0.0.1:$((BASE + 20))-$((BASE + 60))"
REDIS_URL=redis://127.0.0.1:$P_REDIS/0
rcli() { redis-cli -h 127.0.0.1 -p "$P_REDIS" "$@"; }

log "redis-server on 127.0.0.1:$P_REDIS (nothing saved)"
mkdir -p "$TMP/redis"
start redis "$P_REDIS" redis-server --bind 127.0.0.1 --port "$P_REDIS" --save "" --appendonly no \
  --dir "$TMP/redis"
for _ in $(seq 50); do [ "$(rcli ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
[ "$(rcli ping 2>/dev/null)" = PONG ] || die "redis-server does not answer PING"
REDIS_VERSION=$(rcli info server | tr -d '\r' | sed -n 's/^redis_version://p')

# ---------------------------------------------------------------- 1: latency
log "1. transition and probe-lease latency: two routers in-process, $N rounds back to back, $IDLE_N after ${GAP_MS} ms gaps"
LAT=$("$BIN/examples/bench_cluster" --redis "$REDIS_URL" --n "$N" --idle-n "$IDLE_N" \
  --gap-ms "$GAP_MS") || die "bench_cluster failed"
line() { grep "^$1 " <<<"$LAT" || die "bench_cluster printed no '$1' line: $LAT"; }
T_BUSY=$(line "transition to=both mode=busy")
L_BUSY=$(line "lease result=won mode=busy")
P_BUSY=$(line "baseline op=ping mode=busy")
R_BUSY=$(line "release mode=busy")
L_LOST=$(line "lease result=lost mode=busy")
if [ "$IDLE_N" -gt 0 ]; then
  T_IDLE=$(line "transition to=both mode=idle")
  L_IDLE=$(line "lease result=won mode=idle")
  P_IDLE=$(line "baseline op=ping mode=idle")
fi

# ---------------------------------------------------------------- 2: the request path
registry() { # listen-port state-dir [node] -> registry file; with a node, cluster: is on
  local f="$TMP/registry-$1.yaml"
  {
    cat <<EOF
server:
  listen: 127.0.0.1:$1
  state_dir: $2
EOF
    if [ -n "${3:-}" ]; then
      cat <<EOF
cluster:
  redis_url_env: $REDIS_ENV
  prefix: $PREFIX
  node: $3
  timeout: 50ms
EOF
    fi
    cat <<EOF
defaults:
  # The bulkhead (8 in flight by default) would turn most of $CONNS connections into 503s;
  # the benchmark measures the proxy.
  max_concurrency: 4096
machines:
  sim: { url: "http://127.0.0.1:$P_SIM/v1", shared: true }
models:
  sim-m: { machine: sim, name: sim-model }
routes:
  - { name: code, default: true, chain: [sim-m] }
EOF
  } >"$f"
  env "$REDIS_ENV=$REDIS_URL" "$BIN/labrouter" check "$f" >/dev/null || die "generated registry $f is invalid"
  echo "$f"
}

log "2. one sim, router OFF (no cluster:), router ON and its idle peer (cluster: on) on 127.0.0.1:$BASE+"
start sim "$P_SIM" "$BIN/labrouter" sim --listen "127.0.0.1:$P_SIM" --name sim
REG_OFF=$(registry "$P_OFF" "$TMP/off")
REG_ON=$(registry "$P_ON" "$TMP/on" on)
REG_PEER=$(registry "$P_PEER" "$TMP/peer" peer)
start off "$P_OFF" env RUST_LOG=warn "$BIN/labrouter" serve --config "$REG_OFF"
OFF_PID=$LAST_PID
start on "$P_ON" env RUST_LOG=warn "$REDIS_ENV=$REDIS_URL" "$BIN/labrouter" serve --config "$REG_ON"
ON_PID=$LAST_PID
start peer "$P_PEER" env RUST_LOG=warn "$REDIS_ENV=$REDIS_URL" "$BIN/labrouter" serve --config "$REG_PEER"

OFF=http://127.0.0.1:$P_OFF$CHAT
ON=http://127.0.0.1:$P_ON$CHAT
# Sanity: both answer 200 from the sim; ON and its peer see Redis up and each other, and
# share the machine.
for u in "$OFF" "$ON"; do
  h=$(curl -s -D - -o /dev/null --max-time 5 -H 'content-type: application/json' -d "$BODY" "$u")
  grep -q '^HTTP/1.1 200' <<<"$h" || die "$u did not answer 200: $h"
  grep -qi '^x-labrouter-target: sim-m@sim' <<<"$h" || die "$u did not route to sim-m@sim: $h"
done
status() { curl -s --max-time 5 "http://127.0.0.1:$1/status"; }
for i in $(seq 50); do
  s_on=$(status "$P_ON") s_peer=$(status "$P_PEER")
  if grep -q '"state":"up"' <<<"$s_on" && grep -q '"peers_seen":\["peer"\]' <<<"$s_on" &&
    grep -q '"peers_seen":\["on"\]' <<<"$s_peer"; then
    break
  fi
  [ "$i" = 50 ] && die "router ON's cluster is not up with its peer seen after 5 s: $s_on"
  sleep 0.1
done
grep -q '"shared":true' <<<"$s_on" || die "router ON does not share the machine: $s_on"
status "$P_OFF" | grep -q '"cluster":' && die "router OFF shows a cluster"

ROUND_SECS=$SECS
# Commands Redis processed (those a script runs count too), and the scripts the routers ran
# (every operation of theirs is one: a heartbeat a second each, a re-sync every 15 s).
commands() { rcli info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
scripts_run() {
  rcli info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ { n += $3 } END { print n + 0 }'
}

log "2a. wrk: $CONNS connections, $THREADS threads, $ROUNDS rounds of ${ROUND_SECS}s per router, OFF and ON taking turns"
wrk_once "$OFF" "$WARMUP" >/dev/null
wrk_once "$ON" "$WARMUP" >/dev/null
CMDS_BEFORE=$(commands) SCRIPTS_BEFORE=$(scripts_run) LOAD_STARTED=$EPOCHREALTIME
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order=("$OFF" "$ON"); else order=("$ON" "$OFF"); fi
  for u in "${order[@]}"; do echo "$r $u $(wrk_once "$u" "$ROUND_SECS")"; done
done >"$TMP/wrk-rounds"

log "2b. fixed rate: $RPS req/s, ${SECS}s per router in 1s turns"
RATE_OUT=$("$BIN/examples/bench_load" rate --url "$OFF" --url "$ON" --rps "$RPS" --secs "$SECS" \
  --slice-secs 1 --warmup-secs "$WARMUP" --body "$BODY") || die "bench_load rate failed"
LOAD_SECS=$(awk -v a="$LOAD_STARTED" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
SCRIPTS_AFTER=$(scripts_run) CMDS_AFTER=$(commands)
Q_OFF=$(grep "url=$OFF " <<<"$RATE_OUT") Q_ON=$(grep "url=$ON " <<<"$RATE_OUT")

W_OFF=$(grep " $OFF WRK " "$TMP/wrk-rounds" | cut -d' ' -f3- | wrk_agg)
W_ON=$(grep " $ON WRK " "$TMP/wrk-rounds" | cut -d' ' -f3- | wrk_agg)
for w in "$W_OFF" "$W_ON"; do
  if [ "$(kv "$w" status_errors)" != 0 ] || [ "$(kv "$w" socket_errors)" != 0 ]; then
    log "warning: errors during load: $w"
  fi
done
for q in "$Q_OFF" "$Q_ON"; do
  [ "$(kv "$q" errors)" = 0 ] || log "warning: errors at fixed rate: $q"
done
# ON/OFF per round (the same round's two runs, back to back).
ROUND_RATIOS=$(awk '{ split($5, kv, "="); rps[$1, $2] = kv[2]; r[$1] = 1 }
  END { for (k in r) printf "%.3f\n", rps[k, on] / rps[k, off] }' on="$ON" off="$OFF" "$TMP/wrk-rounds" | sort -g)
RATIO_LO=$(head -1 <<<"$ROUND_RATIOS") RATIO_HI=$(tail -1 <<<"$ROUND_RATIOS")
s_on_after=$(status "$P_ON")
grep -q '"state":"up"' <<<"$s_on_after" || log "warning: router ON's cluster is not up after the load: $s_on_after"
ON_RSS_KB=$(awk '/^VmRSS:/ {print $2}' "/proc/$ON_PID/status")
OFF_RSS_KB=$(awk '/^VmRSS:/ {print $2}' "/proc/$OFF_PID/status")

# ---------------------------------------------------------------- the table
t50=$(kv "$T_BUSY" p50_us) t99=$(kv "$T_BUSY" p99_us) tmax=$(kv "$T_BUSY" max_us)
l50=$(kv "$L_BUSY" p50_us) l99=$(kv "$L_BUSY" p99_us)
g50=$(kv "$P_BUSY" p50_us) g99=$(kv "$P_BUSY" p99_us)
lost50=$(kv "$L_LOST" p50_us) lost99=$(kv "$L_LOST" p99_us)
unavailable=$(( $(kv "$L_BUSY" unavailable) + $(kv "$L_BUSY" lost) ))
worst_t=$t99 worst_l=$l99
t_idle="" l_idle=""
if [ "$IDLE_N" -gt 0 ]; then
  it50=$(kv "$T_IDLE" p50_us) it99=$(kv "$T_IDLE" p99_us) itmax=$(kv "$T_IDLE" max_us)
  il50=$(kv "$L_IDLE" p50_us) il99=$(kv "$L_IDLE" p99_us)
  ig50=$(kv "$P_IDLE" p50_us) ig99=$(kv "$P_IDLE" p99_us)
  unavailable=$((unavailable + $(kv "$L_IDLE" unavailable) + $(kv "$L_IDLE" lost)))
  worst_t=$(( it99 > t99 ? it99 : t99 )) worst_l=$(( il99 > l99 ? il99 : l99 ))
  tmax=$(( itmax > tmax ? itmax : tmax ))
  t_idle="; after ${GAP_MS} ms idle $(ms "$it50" 3) / $(ms "$it99" 3) ms"
  l_idle="; after ${GAP_MS} ms idle $(ms "$il50" 3) / $(ms "$il99" 3) ms against PING $(ms "$ig50" 3) / $(ms "$ig99" 3) ms ($(ratio "$il50" "$ig50" 3)× / $(ratio "$il99" "$ig99" 3)×)"
fi
ro=$(kv "$W_OFF" rps) rn=$(kv "$W_ON" rps) x=$(ratio "$rn" "$ro" 3)
so=$(kv "$W_OFF" rps_spread_pct) sn=$(kv "$W_ON" rps_spread_pct)
p50o=$(kv "$W_OFF" p50_us) p99o=$(kv "$W_OFF" p99_us) p50n=$(kv "$W_ON" p50_us) p99n=$(kv "$W_ON" p99_us)
d99=$((p99n - p99o)) s99=$(kv "$W_OFF" p99_spread_us)
q99o=$(kv "$Q_OFF" p99_us) q99n=$(kv "$Q_ON" p99_us) q50o=$(kv "$Q_OFF" p50_us) q50n=$(kv "$Q_ON" p50_us)
dq99=$((q99n - q99o)) dq50=$((q50n - q50o))
# Less the INFO calls of this script between the two readings.
cmds=$((CMDS_AFTER - CMDS_BEFORE - 3)) scripts=$((SCRIPTS_AFTER - SCRIPTS_BEFORE))
served=$(( $(kv "$W_ON" requests) + $(kv "$Q_ON" ok) ))
# Two routers: a heartbeat a second and a re-sync every 15 s each (one more of each for the
# edges of the window).
beats=$(awk -v t="$LOAD_SECS" 'BEGIN { printf "%d", 2 * (int(t) + 1) + 2 * (int(t / 15) + 1) }')

TABLE=$(cat <<EOF
| measure | result | goal | verdict |
|---|---|---|---|
| transition published by one router → adopted by its peer, p50 / p99 ($N forced open + $N closed by hand) | back to back **$(ms "$t50" 3) / $(ms "$t99" 3) ms**$t_idle; max $(ms "$tmax" 3) ms | ≤ 1 s (README "Several routers") | $(ok "$worst_t <= 1000000 && $tmax <= 1000000") |
| probe-lease round trip (\`Machines::pooled\`, won), p50 / p99 | back to back **$(ms "$l50" 3) / $(ms "$l99" 3) ms** against a bare PING $(ms "$g50" 3) / $(ms "$g99" 3) ms ($(ratio "$l50" "$g50" 3)× / $(ratio "$l99" "$g99" 3)×)$l_idle; lost to a peer's lease $(ms "$lost50" 3) / $(ms "$lost99" 3) ms; released (compare-and-delete) $(ms "$(kv "$R_BUSY" p50_us)" 3) / $(ms "$(kv "$R_BUSY" p99_us)" 3) ms after the drop; not won: $unavailable | ≤ cluster.timeout (50 ms), every round won | $(ok "$worst_l <= 50000 && $unavailable == 0") |
| throughput, ON / OFF ($CONNS connections, $ROUNDS rounds of ${ROUND_SECS}s each) | ON $(thousands "$rn") req/s, OFF $(thousands "$ro") req/s: **$x×** (rounds $RATIO_LO–$RATIO_HI×; spread between rounds: OFF $so%, ON $sn%) | ≥ 0.95×: no measurable difference within this machine's noise | $(ok "$x >= 0.95") |
| p99 ON − OFF at $CONNS connections (median of rounds) | ON $(ms "$p50n") / $(ms "$p99n") ms, OFF $(ms "$p50o") / $(ms "$p99o") ms (p50 / p99): **$(ms "$d99") ms** (OFF's p99 varies $(ms "$s99") ms between rounds) | within OFF's own spread, or ≤ 0.1 ms | $(ok "$d99 <= ($s99 > 100 ? $s99 : 100)") |
| latency ON − OFF at $(thousands "$RPS") req/s (fixed rate, 1 s turns), p50 / p99 | ON $(ms "$q50n") / $(ms "$q99n") ms, OFF $(ms "$q50o") / $(ms "$q99o") ms: **$(ms "$dq50") / $(ms "$dq99") ms** (late sends, the generator's own hiccups: OFF $(kv "$Q_OFF" late_sends), ON $(kv "$Q_ON" late_sends) of $(kv "$Q_OFF" sent)) | p50 ≤ 0.1 ms added (a p99 this far out is the machine's scheduling) | $(ok "$dq50 <= 100") |
| Redis during the load (wrk and fixed rate, ${LOAD_SECS} s) | **$scripts scripts** run by the routers ($(thousands "$cmds") commands counting those inside the scripts) for $(thousands "$served") requests through ON | none per request: only heartbeats and re-syncs, ≤ $beats | $(ok "$scripts <= $beats") |
EOF
)

echo
echo "labrouter cluster benchmark (README "Several routers") — $(machine)"
echo "Redis $REDIS_VERSION on 127.0.0.1 (nothing saved), cluster.timeout 50 ms. Latencies: examples/bench_cluster, two routers in one process (labrouter::run, 2 tokio workers), $N rounds back to back and $IDLE_N after ${GAP_MS} ms of nothing, nearest-rank percentiles, from A's step to this task seeing B's breaker change. Request path: labrouter sim, router OFF (no cluster:), router ON (cluster: on, the machine shared: true) with an idle peer router; wrk -t$THREADS -c$CONNS, OFF and ON taking turns in $ROUNDS rounds (order alternating) after ${WARMUP}s warm-up, req/s averaged and percentiles the median round; then bench_load at a fixed rate. Everything shares the cores. RSS after the load: OFF $((OFF_RSS_KB / 1024)) MB, ON $((ON_RSS_KB / 1024)) MB."
echo
echo "$TABLE"
echo
awk '{ print "raw: " $0 }' <<<"$LAT"
echo "raw: wrk off: $W_OFF"
echo "raw: wrk on: $W_ON"
awk '{ print "raw: round " $0 }' "$TMP/wrk-rounds"
echo "raw: rate off: $Q_OFF"
echo "raw: rate on: $Q_ON"

queue_benchmarks
queue_report
if [ -n "${BENCH_OUT:-}" ]; then printf '%s\n\n%s\n' "$TABLE" "$QUEUE_TABLE" >"$BENCH_OUT"; fi
