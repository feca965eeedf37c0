# The board-style figures of scripts/bench.sh (sourced by it; BENCH_ONLY=board runs them
# alone with sections 1 and 3): what gateway comparison boards measure, for direct, nginx,
# the lean anchor (examples/lean_proxy: the smallest hyper proxy doing labrouter's
# irreducible work) and labrouter, every labrouter figure with its access log off as
# nginx's is, and the access log's cost beside.
#   - added p50 and p99 at 1 connection: the targets take turns, BOARD_ROUNDS rounds,
#     median of the rounds;
#   - a throughput frontier from one concurrency sweep (BOARD_LEVELS): the most requests/s
#     held while p99 stays under 1, 5 and 10 ms;
#   - a stream of 64 chunks 20 ms apart: added time to the first chunk, added gap p50/p99,
#     and the most concurrent streams with no chunk more than 200 ms late;
#   - RSS idle (1 s after start, before any request), idle again before the sweep, under
#     its load and 2 s after it.
# shellcheck shell=bash disable=SC2153 # BODY, DIRECT, W_* and the rest come from scripts/bench.sh

BOARD_ROUNDS=${BENCH_BOARD_ROUNDS:-5}
BOARD_SECS=${BENCH_BOARD_SECS:-2}
BOARD_LEVELS=${BENCH_BOARD_LEVELS:-1 4 16 64 256}
BOARD_FANOUT=${BENCH_BOARD_FANOUT:-64 256 1024}
P_DRIP64=$((BASE + 5)) P_LEAN=$((BASE + 15)) P_LOGGED=$((BASE + 16)) P_NGINX_DRIP=$((BASE + 17))

# Starts the 64-chunk sim, the lean anchor and a second labrouter with its access log on
# (RUST_LOG=info, to a file, as journald would take it).
board_start() {
  start sim-drip64 "$P_DRIP64" "$SIM" --listen "127.0.0.1:$P_DRIP64" --name drip64 \
    --fault drip:20ms --chunks 64
  start lean "$P_LEAN" "$BIN/examples/lean_proxy" --listen "127.0.0.1:$P_LEAN" \
    --upstream "127.0.0.1:$P_FAST"
  local reg
  reg=$(config "$P_LOGGED" "$TMP/state-logged")
  sed -i 's/access_log: false/access_log: true/' "$reg"
  start labrouter-logged "$P_LOGGED" env RUST_LOG=info "$BIN/labrouter" serve --config "$reg" \
    ${WORKERS:+--workers "$WORKERS"}
  LEANU=http://127.0.0.1:$P_LEAN$CHAT
  LOGGEDU=http://127.0.0.1:$P_LOGGED$CHAT
  local u code
  for u in "$LEANU" "$LOGGEDU"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'content-type: application/json' -d "$BODY" "$u")
    [ "$code" = 200 ] || die "$u answered $code"
  done
}

# Sets B_LAT (one aggregated WRK line per target: direct, nginx, lean, labrouter, logged).
board_latency() {
  log "board: 1 connection, $BOARD_ROUNDS rounds of ${BOARD_SECS}s per target, taking turns"
  B_LAT=$(CONNS=1 THREADS=1 ROUNDS=$BOARD_ROUNDS ROUND_SECS=$BOARD_SECS \
    wrk_rounds "$DIRECT" "$NGINXU" "$LEANU" "$ROUTER" "$LOGGEDU")
}

# Sets B_SWEEP: lines "TARGET CONNS rps p99_us", and RSS_BEFORE / RSS_LOAD_MAX / RSS_RECOVERED.
board_frontier() {
  local c u t w names=(direct nginx lean labrouter) urls=("$DIRECT" "$NGINXU" "$LEANU" "$ROUTER")
  log "board: throughput frontier, connections $BOARD_LEVELS, ${BOARD_SECS}s per point"
  B_SWEEP="" RSS_LOAD_MAX=0
  # Idle again after the 1-connection rounds: what the sweep's "after" returns to.
  sleep 2
  RSS_BEFORE=$(rss_kb "$ROUTER_PID")
  for c in $BOARD_LEVELS; do
    for i in "${!urls[@]}"; do
      u=${urls[$i]} t=$((c < THREADS ? c : THREADS))
      w=$(CONNS=$c THREADS=$t wrk_once "$u" "$BOARD_SECS")
      [ "$(kv "$w" socket_errors)" = 0 ] || log "warning: socket errors at $c connections on ${names[$i]}"
      B_SWEEP+="${names[$i]} $c $(kv "$w" rps) $(kv "$w" p99_us)"$'\n'
      if [ "${names[$i]}" = labrouter ]; then
        local r
        r=$(rss_kb "$ROUTER_PID")
        [ "$r" -gt "$RSS_LOAD_MAX" ] && RSS_LOAD_MAX=$r
      fi
    done
  done
  sleep 2
  RSS_RECOVERED=$(rss_kb "$ROUTER_PID")
}

# The most requests/s of TARGET in the sweep with p99 under BOUND_US (0 when none).
frontier() {
  awk -v t="$1" -v b="$2" '$1 == t && $4 < b && $3 > m { m = $3 } END { printf "%.0f", m }' <<<"$B_SWEEP"
}

# Sets B_TTFC (TTFT lines: direct, nginx, labrouter) and B_FAN (the most streams per target).
# nginx's time to first chunk is the yardstick beside direct: between streams each proxy sits
# idle on cores the sims and the load generator share, so its first chunk comes through a cold
# path (docs/perf/README.md, "the cold path"); nginx shows what that costs a small proxy.
# bench_sim times its drip on a kernel timer (Sim::set_precise): on tokio's millisecond wheel
# the sim's 20 ms lasted 20–21 ms by where in its millisecond each request came, up to a
# millisecond of noise in a figure whose goal is 0.2 ms.
board_streams() {
  local direct=http://127.0.0.1:$P_DRIP64$CHAT body n line
  body='{"model":"stream64","stream":true,"messages":[{"role":"user","content":"hi"}]}'
  log "board: streams of 64 chunks 20 ms apart, direct, through nginx and through labrouter"
  B_TTFC=$("$LOAD" ttft --url "$direct" --url "http://127.0.0.1:$P_NGINX_DRIP$CHAT" --url "$ROUTER" \
    --n 10 --body "$body")
  B_FAN=""
  for u in "$direct" "$ROUTER"; do
    local best=0
    for n in $BOARD_FANOUT; do
      line=$("$LOAD" fanout --url "$u" --n "$n" --spacing-ms 20 --body "$body") || break
      B_FAN+="$line"$'\n'
      if [ "$(kv "$line" failed)" = 0 ] && [ "$(kv "$line" late_max_us)" -le 200000 ]; then best=$n; else break; fi
    done
    B_FAN+="BEST url=$u streams=$best"$'\n'
  done
}

board_benchmarks() {
  board_latency
  board_frontier
  board_streams
}

# The board table, from the section-1 wrk lines (W_*), fast-fail (W_FF) and the above.
board_table() {
  local l_d l_n l_l l_r l_g d50 d99 s f1 f5 f10
  l_d=$(sed -n 1p <<<"$B_LAT") l_n=$(sed -n 2p <<<"$B_LAT") l_l=$(sed -n 3p <<<"$B_LAT")
  l_r=$(sed -n 4p <<<"$B_LAT") l_g=$(sed -n 5p <<<"$B_LAT")
  d50=$(kv "$l_d" p50_us) d99=$(kv "$l_d" p99_us)
  added() { echo "+$(( $(kv "$1" p50_us) - d50 )) / +$(( $(kv "$1" p99_us) - d99 ))"; }
  local a50_r a50_l
  a50_r=$(( $(kv "$l_r" p50_us) - d50 )) a50_l=$(( $(kv "$l_l" p50_us) - d50 ))
  local rr rl p99r p99l ffr rd
  rr=$(kv "$W_ROUTER" rps) rl=$(kv "$W_LEAN" rps) rd=$(kv "$W_DIRECT" rps)
  p99r=$(kv "$W_ROUTER" p99_us) p99l=$(kv "$W_LEAN" p99_us) ffr=$(kv "$W_FF" rps)
  s=""
  for t in direct nginx lean labrouter; do
    f1=$(frontier "$t" 1000) f5=$(frontier "$t" 5000) f10=$(frontier "$t" 10000)
    s+="$t $(thousands "$f1") / $(thousands "$f5") / $(thousands "$f10"); "
  done
  local fl5 fr5
  fl5=$(frontier lean 5000) fr5=$(frontier labrouter 5000)
  local td tr g50d g50r g99d g99r bd br
  local tn
  td=$(grep "url=http://127.0.0.1:$P_DRIP64" <<<"$B_TTFC") tr=$(grep "url=$ROUTER " <<<"$B_TTFC")
  tn=$(grep "url=http://127.0.0.1:$P_NGINX_DRIP" <<<"$B_TTFC")
  g50d=$(kv "$td" gap_p50_us) g50r=$(kv "$tr" gap_p50_us) g99d=$(kv "$td" gap_p99_us) g99r=$(kv "$tr" gap_p99_us)
  bd=$(grep "^BEST url=http://127.0.0.1:$P_DRIP64" <<<"$B_FAN" | sed 's/.*streams=//')
  br=$(grep "^BEST url=$ROUTER " <<<"$B_FAN" | sed 's/.*streams=//')
  local ttfc_added
  ttfc_added=$(( $(kv "$tr" ttft_p50_us) - $(kv "$td" ttft_p50_us) ))
  cat <<EOF
| measure | direct | nginx | lean anchor | labrouter | goal | verdict |
|---|---|---|---|---|---|---|
| throughput, $CONNS connections (req/s) | $(thousands "$rd") | $(thousands "$(kv "$W_NGINX" rps)") | $(thousands "$rl") | $(thousands "$rr") | ≥ 0.95× lean: **$(ratio "$rr" "$rl")×** | $(ok "$rr >= 0.95 * $rl") |
| p99 at $CONNS connections (ms) | $(ms "$(kv "$W_DIRECT" p99_us)") | $(ms "$(kv "$W_NGINX" p99_us)") | $(ms "$p99l") | $(ms "$p99r") | ≤ 1.2× lean: **$(ratio "$p99r" "$p99l")×** | $(ok "$p99r <= 1.2 * $p99l") |
| added p50 / p99 at 1 connection, median of $BOARD_ROUNDS rounds | — | $(added "$l_n") µs | $(added "$l_l") µs | $(added "$l_r") µs (log on: $(added "$l_g")) | p50 ≤ lean + 3 µs | $(ok "$a50_r <= $a50_l + 3") |
| fast-fail, every machine open (req/s) | $(thousands "$rd") | | | $(thousands "$ffr") | ≥ 0.9× direct: **$(ratio "$ffr" "$rd")×** | $(ok "$ffr >= 0.9 * $rd") |
| frontier: most req/s with p99 < 1 / 5 / 10 ms | | | | $s | p99<5 ms ≥ 0.9× lean: **$(ratio "$fr5" "$fl5")×** | $(ok "$fr5 >= 0.9 * $fl5") |
| stream of 64 chunks 20 ms apart: time to first chunk, p50 (ms) | $(ms "$(kv "$td" ttft_p50_us)") | $(ms "$(kv "$tn" ttft_p50_us)") | | $(ms "$(kv "$tr" ttft_p50_us)") | ≤ 0.2 ms added: **$(ms "$ttfc_added") ms** (nginx: $(ms $(( $(kv "$tn" ttft_p50_us) - $(kv "$td" ttft_p50_us) ))) ms) | $(ok "$ttfc_added <= 200") |
| inter-chunk gap p50 / p99 (ms) | $(ms "$g50d") / $(ms "$g99d") | | | $(ms "$g50r") / $(ms "$g99r") | nothing measurable added (≤ 0.1 ms at p50) | $(ok "$g50r - $g50d <= 100") |
| most concurrent streams, no chunk > 200 ms late (of $BOARD_FANOUT) | ${bd:-0} | | | ${br:-0} | as many as direct | $(ok "${br:-0} >= ${bd:-0}") |
| RSS idle / before the sweep / under load / after (MB) | | | | $(mb "$RSS_IDLE") / $(mb "$RSS_BEFORE") / $(mb "$RSS_LOAD_MAX") / $(mb "$RSS_RECOVERED") | idle ≤ 20 MB; after within 10% of idle: **$(ratio "$RSS_RECOVERED" "$RSS_IDLE")×** (of before the sweep: $(ratio "$RSS_RECOVERED" "$RSS_BEFORE")×) | $(ok "$RSS_IDLE <= 20480 && $RSS_RECOVERED <= 1.1 * $RSS_IDLE") |

Access log: labrouter with it on (RUST_LOG=info to a file) adds $(added "$l_g") µs at 1 connection against $(added "$l_r") µs off; at $CONNS connections it serves $(thousands "$(kv "$W_LOGGED" rps)") req/s on against $(thousands "$rr") off (**$(ratio "$(kv "$W_LOGGED" rps)" "$rr")×**), p99 $(ms "$(kv "$W_LOGGED" p99_us)") ms against $(ms "$p99r") ms.
Frontier (most req/s with p99 under 1 / 5 / 10 ms): $s
EOF
}

board_report() {
  BOARD_TABLE=$(board_table)
  echo
  echo "Board-style figures — $(machine)"
  echo "Added latency at 1 connection: wrk -t1 -c1, $BOARD_ROUNDS rounds of ${BOARD_SECS}s per target taking turns, median of rounds; frontier: one wrk run of ${BOARD_SECS}s per target and level ($BOARD_LEVELS connections); labrouter's access log off (nginx's too)."
  echo
  echo "$BOARD_TABLE"
  echo
  echo "raw: latency at 1 connection (direct, nginx, lean, labrouter, labrouter with its access log):"
  sed '/^$/d; s/^/raw: /' <<<"$B_LAT"
  echo "raw: sweep (target connections req/s p99_us):"
  sed '/^$/d; s/^/raw: /' <<<"$B_SWEEP"
  sed '/^$/d; s/^/raw: /' <<<"$B_TTFC"
  sed '/^$/d; s/^/raw: /' <<<"$B_FAN"
}
