//! The load generator `scripts/bench.sh` uses where wrk cannot: a fixed request rate, time to
//! first token and chunk timing of streams, and many slow streams held open at once.
//!
//! Every mode is bounded in count and time and talks only to loopback URLs.
//!
//! - `rate --url URL [--url URL2 ...] --rps 1000 --secs 10`: open loop at a fixed rate (one
//!   request every 1/rps, each on its own task, so a slow answer never delays the next send);
//!   latency from send to the last body byte. Several URLs take turns in 2 s slices.
//! - `ttft --url URL [--url URL2 ...] --n 20 [--body B ...]`: sequential streaming requests,
//!   URLs taking turns; time to the first content chunk (an SSE `data: {` event, or an
//!   Ollama NDJSON line with `"done":false`), to the last one, and the most chunks that ever
//!   arrived in one read (1 = nothing was held back and batched). One `--body` serves every
//!   URL; several go to the URLs in order (an OpenAI body and an Ollama one).
//! - `streams --url URL --n 1000 --rss-pid PID`: opens N streams at once, waits until every
//!   one has its first chunk, reads the RSS of PID, holds them a moment, then drops them.
//! - `fanout --url URL --n 256 --spacing-ms 20`: opens N streams at once and reads them
//!   to the end; how late each content chunk came against the machine's own spacing (its
//!   gap from the one before, or from the send for the first, less `spacing`): the most
//!   concurrent streams a proxy carries with no chunk held back is where that stays small.
//!
//! Each prints one line of `key=value` pairs per URL for the script to parse.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use tokio::time::Instant;

const DEFAULT_BODY: &str = r#"{"model":"code","messages":[{"role":"user","content":"hi"}]}"#;
const STREAM_BODY: &str =
    r#"{"model":"code","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

#[derive(Debug, Parser)]
#[command(about = "Loopback load generator for scripts/bench.sh")]
struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Fixed-rate open-loop load; prints latency percentiles, one line per URL. Several
    /// URLs take turns in slices of `slice_secs`, so they share whatever else the machine
    /// is doing at the time.
    Rate {
        #[arg(long, required = true)]
        url: Vec<String>,
        #[arg(long, default_value_t = 1000)]
        rps: u32,
        /// Seconds of load per URL.
        #[arg(long, default_value_t = 10)]
        secs: u32,
        #[arg(long, default_value_t = 2)]
        slice_secs: u32,
        /// Each URL first gets this much load, sent but not recorded (connections warm up).
        #[arg(long, default_value_t = 1)]
        warmup_secs: u32,
        #[arg(long, default_value = DEFAULT_BODY)]
        body: String,
    },
    /// Sequential streams; time to first chunk and chunk spacing, one line per URL (several
    /// URLs take turns stream by stream).
    Ttft {
        #[arg(long, required = true)]
        url: Vec<String>,
        #[arg(long, default_value_t = 20)]
        n: usize,
        #[arg(long, default_values_t = [STREAM_BODY.to_string()])]
        body: Vec<String>,
    },
    /// N concurrent streams read to the end; how late their chunks came.
    Fanout {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 256)]
        n: usize,
        /// The machine's own delay before each chunk.
        #[arg(long, default_value_t = 20)]
        spacing_ms: u64,
        #[arg(long, default_value = STREAM_BODY)]
        body: String,
    },
    /// N concurrent open streams; prints the RSS of `rss_pid` while they are open.
    Streams {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 1000)]
        n: usize,
        #[arg(long)]
        rss_pid: u32,
        /// How long to keep them open after the reading.
        #[arg(long, default_value_t = 1)]
        hold_secs: u64,
        #[arg(long, default_value = STREAM_BODY)]
        body: String,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let urls = match &args.mode {
        Mode::Rate { url, .. } | Mode::Ttft { url, .. } => url.clone(),
        Mode::Streams { url, .. } | Mode::Fanout { url, .. } => vec![url.clone()],
    };
    if let Some(url) = urls.iter().find(|u| !loopback(u)) {
        eprintln!("bench_load: {url} is not a loopback URL; refusing");
        return ExitCode::FAILURE;
    }
    // One thread: the generator takes as little CPU from the measured servers as it can.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match args.mode {
            Mode::Rate {
                url,
                rps,
                secs,
                slice_secs,
                warmup_secs,
                body,
            } => rate(url, rps, secs, slice_secs, warmup_secs, body).await,
            Mode::Ttft { url, n, body } => ttft(url, n, body).await,
            Mode::Fanout {
                url,
                n,
                spacing_ms,
                body,
            } => fanout(url, n, Duration::from_millis(spacing_ms), body).await,
            Mode::Streams {
                url,
                n,
                rss_pid,
                hold_secs,
                body,
            } => streams(url, n, rss_pid, hold_secs, body).await,
        }
    });
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(url: &str) -> bool {
    let rest = url.strip_prefix("http://").unwrap_or("");
    rest.starts_with("127.") || rest.starts_with("localhost:") || rest.starts_with("[::1]:")
}

fn client(pool: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(pool)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("cannot build the client: {e}"))
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn micros(d: Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

/// Sends `n` requests to `url`, one every `period` from now, each on its own task; returns
/// the latency of each that succeeded (µs, None for a failure) and how many sends were late.
async fn paced(
    client: &reqwest::Client,
    url: &str,
    body: &bytes::Bytes,
    n: u64,
    period: Duration,
) -> (Vec<Option<u64>>, u64) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<u64>>();
    let started = Instant::now();
    let mut late = 0u64;
    for i in 0..n {
        let at = started + period * u32::try_from(i).unwrap_or(u32::MAX);
        if Instant::now() > at + Duration::from_millis(2) {
            late += 1;
        }
        tokio::time::sleep_until(at).await;
        let (client, url, body, tx) = (client.clone(), url.to_owned(), body.clone(), tx.clone());
        tokio::spawn(async move {
            let sent = Instant::now();
            let ok = match client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
            {
                Ok(resp) => {
                    let good = resp.status().is_success();
                    resp.bytes().await.is_ok() && good
                }
                Err(_) => false,
            };
            let _ = tx.send(ok.then(|| micros(sent.elapsed())));
        });
    }
    drop(tx);
    let mut out = Vec::with_capacity(n as usize);
    let drain = async {
        while let Some(l) = rx.recv().await {
            out.push(l);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(30), drain).await;
    out.resize(n as usize, None);
    (out, late)
}

async fn rate(
    urls: Vec<String>,
    rps: u32,
    secs: u32,
    slice_secs: u32,
    warmup_secs: u32,
    body: String,
) -> Result<String, String> {
    let client = client(usize::MAX)?;
    let period = Duration::from_secs(1) / rps.max(1);
    let body = bytes::Bytes::from(body);
    let per_slice = u64::from(rps) * u64::from(slice_secs.max(1));
    let total = u64::from(rps) * u64::from(secs);
    for url in &urls {
        let warm = u64::from(rps) * u64::from(warmup_secs);
        paced(&client, url, &body, warm, period).await;
    }
    let mut lat: Vec<Vec<u64>> = vec![Vec::new(); urls.len()];
    let mut errors = vec![0u64; urls.len()];
    let mut late = vec![0u64; urls.len()];
    let mut sent = 0u64;
    while sent < total {
        let n = per_slice.min(total - sent);
        for (k, url) in urls.iter().enumerate() {
            let (got, l) = paced(&client, url, &body, n, period).await;
            late[k] += l;
            for x in got {
                match x {
                    Some(us) => lat[k].push(us),
                    None => errors[k] += 1,
                }
            }
        }
        sent += n;
    }
    let lines: Vec<String> = urls
        .iter()
        .enumerate()
        .map(|(k, url)| {
            let l = &mut lat[k];
            l.sort_unstable();
            format!(
                "RATE url={url} sent={total} ok={} errors={} late_sends={} rps={rps} p50_us={} p90_us={} p99_us={} p999_us={} max_us={}",
                l.len(),
                errors[k],
                late[k],
                pct(l, 0.50),
                pct(l, 0.90),
                pct(l, 0.99),
                pct(l, 0.999),
                l.last().copied().unwrap_or(0),
            )
        })
        .collect();
    Ok(lines.join("\n"))
}

/// Arrival times (since the send) of each content chunk (SSE or NDJSON) of one stream, and the most
/// content chunks that came in a single read.
async fn one_stream(
    client: &reqwest::Client,
    url: &str,
    body: &str,
) -> Result<(Vec<Duration>, usize), String> {
    let t0 = Instant::now();
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .map_err(|e| format!("stream request failed: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("stream answered {}", resp.status()));
    }
    let mut arrivals = Vec::new();
    let mut most = 0;
    let mut body = resp.bytes_stream();
    while let Some(frame) = body.next().await {
        let frame = frame.map_err(|e| format!("stream broke: {e}"))?;
        let at = t0.elapsed();
        let text = String::from_utf8_lossy(&frame);
        let content = text.matches("data: {").count() + text.matches("\"done\":false").count();
        most = most.max(content);
        arrivals.extend(std::iter::repeat_n(at, content));
    }
    Ok((arrivals, most))
}

#[derive(Default)]
struct StreamStats {
    first: Vec<u64>,
    last: Vec<u64>,
    gaps: Vec<u64>,
    most: usize,
    chunks: usize,
}

async fn ttft(urls: Vec<String>, n: usize, bodies: Vec<String>) -> Result<String, String> {
    let client = client(4)?;
    if bodies.len() != 1 && bodies.len() != urls.len() {
        return Err(format!(
            "{} bodies for {} URLs: give one, or one per URL",
            bodies.len(),
            urls.len()
        ));
    }
    let body_of = |i: usize| &bodies[i.min(bodies.len() - 1)];
    // One unrecorded stream each opens the pooled connections.
    for (i, url) in urls.iter().enumerate() {
        one_stream(&client, url, body_of(i)).await?;
    }
    let mut stats: Vec<StreamStats> = urls.iter().map(|_| StreamStats::default()).collect();
    for _ in 0..n {
        for (i, (url, s)) in urls.iter().zip(stats.iter_mut()).enumerate() {
            let (arrivals, m) = one_stream(&client, url, body_of(i)).await?;
            let (Some(a), Some(z)) = (arrivals.first(), arrivals.last()) else {
                return Err(format!("a stream from {url} carried no content chunk"));
            };
            s.first.push(micros(*a));
            s.last.push(micros(*z));
            for w in arrivals.windows(2) {
                s.gaps.push(micros(w[1] - w[0]));
            }
            s.most = s.most.max(m);
            s.chunks = arrivals.len();
        }
    }
    let lines: Vec<String> = urls
        .iter()
        .zip(stats.iter_mut())
        .map(|(url, s)| {
            s.first.sort_unstable();
            s.last.sort_unstable();
            let gap_mean = s.gaps.iter().sum::<u64>() as f64 / s.gaps.len().max(1) as f64;
            s.gaps.sort_unstable();
            format!(
                "TTFT url={url} streams={n} chunks={} ttft_p50_us={} ttft_max_us={} last_p50_us={} gap_mean_us={gap_mean:.0} gap_p50_us={} gap_p99_us={} gap_max_us={} max_chunks_per_read={}",
                s.chunks,
                pct(&s.first, 0.5),
                s.first.last().copied().unwrap_or(0),
                pct(&s.last, 0.5),
                pct(&s.gaps, 0.5),
                pct(&s.gaps, 0.99),
                s.gaps.last().copied().unwrap_or(0),
                s.most,
            )
        })
        .collect();
    Ok(lines.join("\n"))
}

async fn fanout(url: String, n: usize, spacing: Duration, body: String) -> Result<String, String> {
    let client = client(0)?;
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            one_stream(&client, &url, &body).await
        }));
    }
    let (mut late, mut failed, mut chunks) = (Vec::new(), 0usize, 0usize);
    for t in tasks {
        match t.await {
            Ok(Ok((arrivals, _))) if !arrivals.is_empty() => {
                chunks += arrivals.len();
                let mut before = Duration::ZERO;
                for at in arrivals {
                    late.push(micros((at - before).saturating_sub(spacing)));
                    before = at;
                }
            }
            _ => failed += 1,
        }
    }
    late.sort_unstable();
    Ok(format!(
        "FANOUT url={url} streams={n} failed={failed} chunks={chunks} late_p50_us={} late_p99_us={} late_max_us={}",
        pct(&late, 0.5),
        pct(&late, 0.99),
        late.last().copied().unwrap_or(0),
    ))
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn streams(
    url: String,
    n: usize,
    pid: u32,
    hold_secs: u64,
    body: String,
) -> Result<String, String> {
    let client = client(0)?;
    let before = rss_kb(pid);
    let open = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        // Ramp in batches so the listeners' accept queues are never the bottleneck.
        if i > 0 && i % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        let (open, failed, stop) = (open.clone(), failed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let stopped = stop.notified();
            tokio::pin!(stopped);
            stopped.as_mut().enable();
            let resp = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            let mut body = match resp {
                Ok(r) if r.status().is_success() => r.bytes_stream(),
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            let mut counted = false;
            loop {
                tokio::select! {
                    () = &mut stopped => return,
                    frame = body.next() => match frame {
                        Some(Ok(_)) if !counted => {
                            counted = true;
                            open.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(Ok(_)) => {}
                        _ => {
                            if !counted {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                            return;
                        }
                    },
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while open.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < n
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ramp_ms = started.elapsed().as_millis();
    // Let the allocator settle with every stream open and flowing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kb(pid);
    let opened = open.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(hold_secs)).await;
    let still = rss_kb(pid).max(during);
    stop.notify_waiters();
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    Ok(format!(
        "STREAMS asked={n} open={opened} failed={} ramp_ms={ramp_ms} rss_before_kb={before} rss_open_kb={during} rss_open_max_kb={still}",
        failed.load(Ordering::Relaxed)
    ))
}
