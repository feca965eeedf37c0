-- wrk script for scripts/bench.sh: POST an OpenAI chat request, print one parseable line.
-- The body comes from BENCH_BODY (the script sets it); the default routes to the `code` route.
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
  or '{"model":"code","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "WRK requests=%d rps=%.0f p50_us=%d p90_us=%d p99_us=%d max_us=%d status_errors=%d socket_errors=%d\n",
    summary.requests, summary.requests / secs,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.status, e.connect + e.read + e.write + e.timeout))
end
