//! A fault soak for `scripts/soak.sh MINUTES`: three simulated machines whose faults change at
//! random, concurrent clients, registry reloads and one SIGKILL + restart of the router, then
//! five invariants checked and printed with their figures.
//!
//! `cargo run --release --example soak -- MINUTES [--bin target/release/labrouter] [--seed N]`
//!
//! The sims run in this process (`labrouter::sim::Sim`); the router is the real binary, a
//! child process with its log in the run directory. Everything listens on and talks to
//! 127.0.0.1 only; the run is bounded in time (MINUTES, plus at most about a minute to drain
//! and check) and in requests (`--max-rps` × the run's seconds); every process it starts is
//! killed when it ends. Exit status 0 when every invariant held, 1 when one failed, 2 when the
//! soak itself could not run.
//!
//! Invariants (each printed with its figure):
//! 1. every request was answered before its deadline (registry `total` + slack): a 2xx
//!    completion, a structured JSON error `{"error":{...}}`, or for a stream that broke after
//!    bytes, a final SSE `data: {"error":...}` event. Connection errors fail it, except for
//!    requests in flight at the deliberate SIGKILL.
//! 2. no "panicked" in the router's logs.
//! 3. an open machine gets no work and a half-open one at most one request (its probe), per
//!    the ledger's intervals and the sims' timestamped work hits. Tolerated: up to
//!    `max_concurrency` hits within [`INFLIGHT_WINDOW`] after a breaker opened (requests
//!    admitted while it was closed whose head reached the sim just after), and for an interval
//!    that spans the SIGKILL, the killed process's requests (up to `max_concurrency`) and one
//!    more probe (a half-open verdict comes back without its probe lease). A probe that ends
//!    without a verdict (client gone, the request's own deadline, a usable 429) lets the next
//!    request probe (README "What trips a breaker"); the router logs each such release, and each allows one more
//!    hit in its interval. Hits in the very millisecond a breaker opened are not counted
//!    against it: the ledger keeps whole milliseconds, so they cannot be ordered against the
//!    transition (the failures that opened it land there too).
//! 4. the router's RSS (sampled every second) stays under `--rss-limit-mb`.
//! 5. the ledger replays: per machine every row's `from` is the previous row's `to` (across
//!    the restart: the restored verdict, or `closed` when the router said it ignored it as
//!    older than `max_cooldown`), and the last `to` is the state `/status` shows once faults
//!    are cleared and traffic stopped.
//!
//! After that, one more (6): with every sim healthy, each breaker closes again within a
//! bounded time, and the ledger still replays to `/status`.

#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use labrouter::sim::{Fault, Sim};
use serde_json::{json, Value};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Registry timeouts: short, so that faults cycle fast.
const CONNECT: &str = "1s";
const FIRST_BYTE: &str = "1s";
const IDLE: &str = "2s";
const TOTAL_S: u64 = 20;
const COOLDOWN_S: u64 = 2;
const MAX_COOLDOWN_S: u64 = 10;
/// Client-side deadline: the router's `total` plus this much.
const SLACK: Duration = Duration::from_secs(5);
/// A hit this soon after its breaker opened may be a request admitted while it was closed.
const INFLIGHT_WINDOW_MS: f64 = 250.0;
/// Largest body a client keeps whole; beyond it only the head and tail are kept.
const KEEP: usize = 1 << 20;
/// Server keys that main is adding; each is set only if `labrouter check` accepts it.
const OPTIONAL_SERVER_KEYS: &[(&str, &[&str])] = &[
    ("max_upstream_body", &["64MiB"]),
    ("header_timeout", &["10s"]),
    ("idle_timeout", &["60s"]),
    ("max_connections", &["1024"]),
    ("keep_ledger", &["30d", "720h", "true"]),
];

#[derive(Debug, Parser)]
#[command(about = "Fault soak of labrouter on loopback; prints its invariants and figures")]
struct Args {
    /// How long to run the faults and the traffic, in minutes (fractions allowed).
    minutes: f64,
    /// The router binary.
    #[arg(long, default_value = "target/release/labrouter")]
    bin: PathBuf,
    /// Random seed (default: from the clock); printed so a run can be repeated.
    #[arg(long)]
    seed: Option<u64>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// Upper bound on the request rate; the run sends at most this × its seconds requests.
    #[arg(long, default_value_t = 40)]
    max_rps: u64,
    /// The RSS bound of invariant 4, in MB (10^6 bytes).
    #[arg(long, default_value_t = 300)]
    rss_limit_mb: u64,
    /// Keep the run directory (registry, logs, state) even when every invariant held.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(args.minutes > 0.0 && args.minutes <= 24.0 * 60.0) {
        eprintln!("soak: MINUTES must be a number in (0, 1440]");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

// ============================================================== small helpers

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn wall_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn now_ms() -> f64 {
    wall_ms(SystemTime::now())
}

/// splitmix64: enough randomness for a soak, no dependency.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

fn log(msg: impl AsRef<str>) {
    eprintln!("soak: {}", msg.as_ref());
}

// ============================================================== the registry

/// What a reload may change, per machine.
#[derive(Clone, Debug, PartialEq)]
struct Knobs {
    failure_threshold: u32,
    cooldown_s: u64,
    max_concurrency: u32,
}

const DEFAULT_KNOBS: Knobs = Knobs {
    failure_threshold: 3,
    cooldown_s: COOLDOWN_S,
    max_concurrency: 3,
};

struct Registry {
    path: PathBuf,
    port: u16,
    state_dir: PathBuf,
    machines: Vec<(String, String)>,
    knobs: Vec<Knobs>,
    /// Optional server keys `labrouter check` accepted.
    extra: Vec<(String, String)>,
}

impl Registry {
    fn yaml(&self) -> String {
        let mut y = String::new();
        let _ = writeln!(y, "# written by examples/soak.rs");
        let _ = writeln!(y, "server:\n  listen: 127.0.0.1:{}", self.port);
        let _ = writeln!(y, "  state_dir: \"{}\"", self.state_dir.display());
        for (k, v) in &self.extra {
            let _ = writeln!(y, "  {k}: {v}");
        }
        let _ = writeln!(
            y,
            "defaults:\n  timeouts: {{ connect: {CONNECT}, first_byte: {FIRST_BYTE}, idle: {IDLE}, total: {TOTAL_S}s }}"
        );
        let _ = writeln!(
            y,
            "  breaker: {{ failure_threshold: 3, cooldown: {COOLDOWN_S}s, backoff: 2.0, max_cooldown: {MAX_COOLDOWN_S}s, success_threshold: 1 }}"
        );
        let _ = writeln!(y, "  max_concurrency: 3\nmachines:");
        for ((name, url), k) in self.machines.iter().zip(&self.knobs) {
            let _ = writeln!(
                y,
                "  {name}:\n    url: \"{url}\"\n    max_concurrency: {}\n    breaker: {{ failure_threshold: {}, cooldown: {}s }}",
                k.max_concurrency, k.failure_threshold, k.cooldown_s
            );
        }
        let _ = writeln!(y, "models:");
        for (name, _) in &self.machines {
            let _ = writeln!(y, "  {name}-m: {{ machine: {name}, name: \"sim-{name}\" }}");
        }
        let names: Vec<String> = self
            .machines
            .iter()
            .map(|(n, _)| format!("{n}-m"))
            .collect();
        let _ = writeln!(
            y,
            "routes:\n  - name: fwd\n    default: true\n    chain: [{}]",
            names.join(", ")
        );
        let rev: Vec<String> = names.iter().rev().cloned().collect();
        let _ = writeln!(
            y,
            "  - name: rev\n    keywords: [reverse]\n    chain: [{}]",
            rev.join(", ")
        );
        let _ = writeln!(
            y,
            "  - name: mid\n    keywords: [middle]\n    chain: [{}]",
            names[1..].join(", ")
        );
        y
    }

    /// As editors save: a new file renamed over the old one.
    fn write(&self) -> Result<()> {
        let tmp = self.path.with_extension("yaml.tmp");
        std::fs::write(&tmp, self.yaml()).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("renaming over {}", self.path.display()))
    }
}

async fn check(bin: &Path, file: &Path) -> Result<bool> {
    let out = Command::new(bin)
        .arg("check")
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running {} check", bin.display()))?;
    Ok(out.status.success())
}

/// Adds each optional server key `labrouter check` accepts (main is adding them).
async fn probe_optional_keys(bin: &Path, reg: &mut Registry) -> Result<()> {
    reg.write()?;
    if !check(bin, &reg.path).await? {
        bail!(
            "the generated registry {} does not pass labrouter check",
            reg.path.display()
        );
    }
    for (key, values) in OPTIONAL_SERVER_KEYS {
        let mut taken = false;
        for v in *values {
            reg.extra.push(((*key).to_string(), (*v).to_string()));
            reg.write()?;
            if check(bin, &reg.path).await? {
                taken = true;
                log(format!("server.{key}: {v} (accepted by labrouter check)"));
                break;
            }
            reg.extra.pop();
        }
        if !taken {
            log(format!(
                "server.{key}: not set (labrouter check rejects it on this build)"
            ));
        }
    }
    reg.write()
}

// ============================================================== the router process

struct Router {
    child: Child,
    pid: u32,
}

async fn spawn_router(bin: &Path, config: &Path, log_path: &Path) -> Result<Router> {
    let out = std::fs::File::create(log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let err = out.try_clone()?;
    let child = Command::new(bin)
        .arg("serve")
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("the router exited at once"))?;
    Ok(Router { child, pid })
}

async fn wait_healthy(base: &str, router: &mut Router, within: Duration) -> Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()?;
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(status) = router.child.try_wait()? {
            bail!("the router exited while starting: {status}");
        }
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the router did not answer /healthz within {within:?}")
}

fn rss_kb(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

// ============================================================== shared run state

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Plain,
    Stream,
    WaitPlain,
    WaitStream,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Stream => "stream",
            Kind::WaitPlain => "plain+wait",
            Kind::WaitStream => "stream+wait",
        }
    }
    fn streams(self) -> bool {
        matches!(self, Kind::Stream | Kind::WaitStream)
    }
}

/// How one request ended, as the client saw it.
#[derive(Debug)]
enum Answer {
    Completion {
        huge: bool,
    },
    StreamDone,
    /// A stream that ended with an SSE error event after bytes.
    StreamBroken,
    /// A structured JSON error with this status and `error.type`.
    Error(u16, String),
    /// Not answered properly: why.
    Failed(String),
    /// A transport error on a request that was in flight when the router was killed.
    Killed,
}

#[derive(Default)]
struct KindStats {
    sent: u64,
    served: u64,
    errored: u64,
    broken: u64,
    failed: u64,
    killed: u64,
}

#[derive(Default)]
struct Stats {
    kinds: BTreeMap<Kind, KindStats>,
    errors: BTreeMap<String, u64>,
    failures: Vec<String>,
    failure_kinds: BTreeMap<String, u64>,
    served_by: BTreeMap<String, u64>,
    huge_served: u64,
    slowest: Duration,
    faults: BTreeMap<String, BTreeMap<&'static str, u64>>,
    reloads: BTreeMap<&'static str, u64>,
    reload_errors: Vec<String>,
}

struct Shared {
    base: String,
    /// Swapped at the restart: pooled connections to the killed router are not reused.
    client: Mutex<reqwest::Client>,
    /// True while the router is up; clients and reloads wait while it is false.
    up: tokio::sync::watch::Sender<bool>,
    /// Router incarnation: 0 before the kill, 1 after.
    epoch: AtomicU64,
    /// When the kill was sent (tokio clock), once it was.
    killed_at: Mutex<Option<Instant>>,
    /// Traffic stops at this instant.
    stop_at: Instant,
    stopping: AtomicBool,
    sent: AtomicU64,
    max_requests: u64,
    rss_pid: AtomicU32,
    stats: Mutex<Stats>,
    /// Index of the sim currently sending huge bodies, or usize::MAX.
    huge_owner: AtomicUsize,
}

fn client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(1))
        .tcp_nodelay(true)
        .build()?)
}

impl Shared {
    async fn wait_up(&self) {
        let mut rx = self.up.subscribe();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    fn done(&self) -> bool {
        self.stopping.load(Ordering::Relaxed) || Instant::now() >= self.stop_at
    }
}

// ============================================================== clients

async fn client_loop(shared: Arc<Shared>, mut rng: Rng) {
    let mut id = 0u64;
    loop {
        shared.wait_up().await;
        if shared.done() {
            return;
        }
        // The kill sets `up` false before it bumps the epoch: a request that reads the new
        // epoch here while `up` is false waits for the restart instead.
        let epoch = shared.epoch.load(Ordering::SeqCst);
        if !*shared.up.borrow() {
            continue;
        }
        if shared.sent.fetch_add(1, Ordering::Relaxed) >= shared.max_requests {
            return;
        }
        id += 1;
        let kind = match rng.below(100) {
            0..=44 => Kind::Plain,
            45..=79 => Kind::Stream,
            80..=91 => Kind::WaitPlain,
            _ => Kind::WaitStream,
        };
        let (model, text) = rng
            .pick(&[
                ("auto", "hello there"),
                ("auto", "please reverse this list"),
                ("auto", "the middle one"),
                ("fwd", "hi"),
                ("rev", "hi"),
                ("alpha-m", "hi"),
                ("beta-m", "hi"),
                ("gamma-m", "hi"),
            ])
            .to_owned();
        let wait = rng.pick(&["3s", "8s", "15s"]).to_string();
        let started = Instant::now();
        let answer = one_request(&shared, kind, model, text, &wait, id).await;
        let elapsed = started.elapsed();
        // A transport failure of a request that was in flight when the router was killed.
        let answer = match answer {
            (Answer::Failed(why), true) => {
                let killed = *lock(&shared.killed_at);
                match killed {
                    Some(k) if epoch == 0 && started <= k => Answer::Killed,
                    _ => Answer::Failed(why),
                }
            }
            (a, _) => a,
        };
        record(&shared, kind, model, &answer, elapsed);
        tokio::time::sleep(rng.ms(0, 150)).await;
    }
}

fn record(shared: &Shared, kind: Kind, model: &str, answer: &Answer, elapsed: Duration) {
    let mut st = lock(&shared.stats);
    st.slowest = st.slowest.max(elapsed);
    let k = st.kinds.entry(kind).or_default();
    k.sent += 1;
    match answer {
        Answer::Completion { .. } | Answer::StreamDone => k.served += 1,
        Answer::StreamBroken => k.broken += 1,
        Answer::Error(..) => k.errored += 1,
        Answer::Failed(_) => k.failed += 1,
        Answer::Killed => k.killed += 1,
    }
    match answer {
        Answer::Completion { huge: true } => st.huge_served += 1,
        Answer::Error(status, ty) => *st.errors.entry(format!("{status} {ty}")).or_default() += 1,
        Answer::Failed(why) => {
            let short: String = why.split(':').next().unwrap_or(why).to_string();
            *st.failure_kinds.entry(short).or_default() += 1;
            if st.failures.len() < 20 {
                st.failures.push(format!(
                    "{} {model} after {:.2}s: {why}",
                    kind.name(),
                    elapsed.as_secs_f64()
                ));
            }
        }
        _ => {}
    }
}

/// Sends one request and reads its answer to the end. The bool says whether a failure was a
/// transport error (which the SIGKILL may excuse).
async fn one_request(
    shared: &Shared,
    kind: Kind,
    model: &str,
    text: &str,
    wait: &str,
    id: u64,
) -> (Answer, bool) {
    let client = lock(&shared.client).clone();
    let body = json!({"model": model, "stream": kind.streams(),
        "messages": [{"role": "user", "content": text}], "user": format!("soak-{id}")});
    let mut req = client
        .post(format!("{}/v1/chat/completions", shared.base))
        .json(&body);
    if matches!(kind, Kind::WaitPlain | Kind::WaitStream) {
        req = req.header("x-labrouter-wait", wait);
    }
    let deadline = Instant::now() + Duration::from_secs(TOTAL_S) + SLACK;
    let resp = match tokio::time::timeout_at(deadline, req.send()).await {
        Err(_) => {
            return (
                Answer::Failed("deadline: no response headers".into()),
                false,
            )
        }
        Ok(Err(e)) => return (Answer::Failed(format!("transport: {}", root(&e))), true),
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    if let Some(t) = resp
        .headers()
        .get("x-labrouter-target")
        .and_then(|v| v.to_str().ok())
    {
        let machine = t.rsplit('@').next().unwrap_or(t).to_string();
        *lock(&shared.stats).served_by.entry(machine).or_default() += 1;
    }
    let sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let (head, tail, size) = match read_body(resp, deadline).await {
        Ok(b) => b,
        Err(BodyError::Deadline(n)) => {
            return (
                Answer::Failed(format!(
                    "deadline: body not finished ({n} bytes read, status {status})"
                )),
                false,
            )
        }
        Err(BodyError::Transport(n, e)) => {
            return (
                Answer::Failed(format!(
                    "transport: body cut after {n} bytes (status {status}): {e}"
                )),
                true,
            )
        }
    };
    let answer = if status.is_success() && sse {
        classify_sse(&head, &tail, size)
    } else if status.is_success() {
        classify_completion(&head, &tail, size)
    } else {
        match serde_json::from_slice::<Value>(&head) {
            Ok(v) if size <= KEEP && v["error"].is_object() => Answer::Error(
                status.as_u16(),
                v["error"]["type"].as_str().unwrap_or("?").to_string(),
            ),
            _ => Answer::Failed(format!(
                "unstructured {status} answer: {:?}",
                String::from_utf8_lossy(&head[..head.len().min(200)])
            )),
        }
    };
    (answer, false)
}

fn root(e: &reqwest::Error) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(s) = last.source() {
        last = s;
    }
    if e.is_connect() {
        format!("connect: {last}")
    } else {
        last.to_string()
    }
}

enum BodyError {
    Deadline(usize),
    Transport(usize, String),
}

/// Reads a body to its end, keeping at most [`KEEP`] bytes of its head and 4 KiB of its
/// tail: a 300 MiB answer passes through without being held.
async fn read_body(
    mut resp: reqwest::Response,
    deadline: Instant,
) -> std::result::Result<(Vec<u8>, Vec<u8>, usize), BodyError> {
    let (mut head, mut tail, mut size) = (Vec::new(), Vec::new(), 0usize);
    loop {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => return Err(BodyError::Deadline(size)),
            Ok(Err(e)) => return Err(BodyError::Transport(size, root(&e))),
            Ok(Ok(None)) => return Ok((head, tail, size)),
            Ok(Ok(Some(b))) => {
                size += b.len();
                let room = KEEP.saturating_sub(head.len());
                head.extend_from_slice(&b[..room.min(b.len())]);
                tail.extend_from_slice(&b[b.len().saturating_sub(4096)..]);
                if tail.len() > 8192 {
                    tail.drain(..tail.len() - 4096);
                }
            }
        }
    }
}

fn classify_completion(head: &[u8], tail: &[u8], size: usize) -> Answer {
    if size <= KEEP {
        return match serde_json::from_slice::<Value>(head) {
            Ok(v) if v["choices"].is_array() => Answer::Completion { huge: false },
            _ => Answer::Failed(format!(
                "2xx that is not a completion: {:?}",
                String::from_utf8_lossy(&head[..head.len().min(200)])
            )),
        };
    }
    // Too big to keep: the sim's huge completion opens with `{"choices":` and ends with `}`.
    let opens = head.starts_with(br#"{"choices":"#);
    let closes = tail.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
    if opens && closes {
        Answer::Completion { huge: true }
    } else {
        Answer::Failed(format!("2xx of {size} bytes that is not a completion"))
    }
}

fn classify_sse(head: &[u8], tail: &[u8], size: usize) -> Answer {
    let text = if size <= KEEP { head } else { tail };
    let text = String::from_utf8_lossy(text);
    let last = text
        .rsplit("\n\n")
        .map(str::trim)
        .find(|e| !e.is_empty())
        .unwrap_or("");
    let data = last
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n");
    if data == "[DONE]" {
        return Answer::StreamDone;
    }
    match serde_json::from_str::<Value>(&data) {
        Ok(v) if v["error"].is_object() => Answer::StreamBroken,
        _ => Answer::Failed(format!(
            "stream ended without [DONE] or an error event ({size} bytes; last event {:?})",
            &last[..last.len().min(200)]
        )),
    }
}

// ============================================================== faults

const ODD_RETRY_AFTER: &[Option<&str>] = &[
    Some("18446744073709551615"),
    Some("1e30"),
    Some("-1"),
    Some("soon"),
    Some("Fri, 31 Dec 9999 23:59:59 GMT"),
    Some("99999999999999999999999999"),
    Some("NaN"),
    Some("inf"),
    None,
];

fn fault_name(f: &Fault) -> &'static str {
    match f {
        Fault::Ok => "ok",
        Fault::Refuse => "refuse",
        Fault::Hang => "hang",
        Fault::Reset => "reset",
        Fault::Status { code: 429, .. } => "429",
        Fault::Status { .. } => "500",
        Fault::Malformed => "malformed",
        Fault::SlowFirstByte(_) => "slow",
        Fault::Drip(_) => "drip",
        Fault::CutAfter(_) => "cut",
        Fault::StallAfter(_) => "stall",
        Fault::Huge(_) => "huge",
    }
}

fn pick_fault(rng: &mut Rng, may_be_huge: bool) -> Fault {
    match rng.below(100) {
        0..=27 => Fault::Ok,
        28..=34 => Fault::Refuse,
        35..=41 => Fault::Hang,
        42..=48 => Fault::Status {
            code: 500,
            retry_after: None,
        },
        49..=58 => Fault::Status {
            code: 429,
            retry_after: rng.pick(ODD_RETRY_AFTER).map(str::to_string),
        },
        59..=65 => Fault::CutAfter(rng.below(4) as usize),
        66..=71 => Fault::StallAfter(rng.below(3) as usize),
        72..=78 => Fault::Drip(rng.ms(100, 1500)),
        79..=84 => Fault::Malformed,
        85..=88 => Fault::Reset,
        89..=93 => Fault::SlowFirstByte(rng.ms(300, 2500)),
        _ if may_be_huge => Fault::Huge((100 + rng.below(201) as usize) << 20),
        _ => Fault::Ok,
    }
}

async fn fault_loop(shared: Arc<Shared>, sims: Vec<Sim>, idx: usize, mut rng: Rng) {
    let sim = &sims[idx];
    while !shared.done() {
        let owner = shared.huge_owner.load(Ordering::SeqCst);
        let may_be_huge = owner == usize::MAX || owner == idx;
        let fault = pick_fault(&mut rng, may_be_huge);
        let huge = matches!(fault, Fault::Huge(_));
        if huge {
            if shared
                .huge_owner
                .compare_exchange(usize::MAX, idx, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
                && shared.huge_owner.load(Ordering::SeqCst) != idx
            {
                continue;
            }
        } else {
            let _ = shared.huge_owner.compare_exchange(
                idx,
                usize::MAX,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
        *lock(&shared.stats)
            .faults
            .entry(sim.name().to_string())
            .or_default()
            .entry(fault_name(&fault))
            .or_default() += 1;
        sim.set(fault);
        let hold = if huge {
            rng.ms(1000, 3000)
        } else {
            rng.ms(1000, 6000)
        };
        tokio::time::sleep_until((Instant::now() + hold).min(shared.stop_at)).await;
    }
    sim.set(Fault::Ok);
    let _ = shared
        .huge_owner
        .compare_exchange(idx, usize::MAX, Ordering::SeqCst, Ordering::SeqCst);
}

// ============================================================== reloads

async fn reload_loop(shared: Arc<Shared>, reg: Arc<Mutex<Registry>>, mut rng: Rng) {
    loop {
        tokio::time::sleep_until((Instant::now() + rng.ms(4000, 10000)).min(shared.stop_at)).await;
        if shared.done() {
            return;
        }
        shared.wait_up().await;
        let action = match rng.below(4) {
            0 => "POST /admin/reload",
            1 => "file touched",
            2 => "knobs changed (file)",
            _ => "knobs changed + POST",
        };
        let written = {
            let mut reg = lock(&reg);
            if action.starts_with("knobs") {
                let m = rng.below(reg.knobs.len() as u64) as usize;
                let k = &mut reg.knobs[m];
                match rng.below(3) {
                    0 => {
                        k.cooldown_s = if k.cooldown_s == COOLDOWN_S {
                            3
                        } else {
                            COOLDOWN_S
                        }
                    }
                    1 => k.failure_threshold = if k.failure_threshold == 3 { 2 } else { 3 },
                    _ => k.max_concurrency = if k.max_concurrency == 3 { 4 } else { 3 },
                }
            }
            if action == "POST /admin/reload" {
                Ok(())
            } else {
                reg.write()
            }
        };
        if let Err(e) = written {
            lock(&shared.stats).reload_errors.push(format!("{e:#}"));
            continue;
        }
        if action.contains("POST") {
            let client = lock(&shared.client).clone();
            let res = client
                .post(format!("{}/admin/reload", shared.base))
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            match res {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => lock(&shared.stats)
                    .reload_errors
                    .push(format!("POST /admin/reload: {}", r.status())),
                Err(e) => lock(&shared.stats)
                    .reload_errors
                    .push(format!("POST /admin/reload: {}", root(&e))),
            }
        }
        *lock(&shared.stats).reloads.entry(action).or_default() += 1;
    }
}

// ============================================================== the ledger

#[derive(Clone, Debug)]
struct Row {
    seq: i64,
    at_ms: f64,
    machine: String,
    from: String,
    to: String,
    reason: String,
}

async fn fetch_ledger(base: &str) -> Result<Vec<Row>> {
    let client = client()?;
    let mut rows = Vec::new();
    let mut before: Option<i64> = None;
    for _ in 0..10_000 {
        let mut url = format!("{base}/status/events?limit=1000");
        if let Some(b) = before {
            let _ = write!(url, "&before={b}");
        }
        let v: Value = client
            .get(&url)
            .timeout(Duration::from_secs(30))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let events = v["events"]
            .as_array()
            .ok_or_else(|| anyhow!("/status/events: no events array"))?;
        for e in events {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            rows.push(Row {
                seq: e["seq"].as_i64().unwrap_or(-1),
                at_ms: e["at_ms"].as_f64().unwrap_or(0.0),
                machine: s("machine"),
                from: s("from"),
                to: s("to"),
                reason: s("reason"),
            });
        }
        match v["next_before"].as_i64() {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    rows.sort_by_key(|r| r.seq);
    Ok(rows)
}

fn db_rows(db: &Path) -> Result<(i64, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", db.display()))?;
    let (count, max): (i64, Option<i64>) =
        conn.query_row("SELECT COUNT(*), MAX(seq) FROM ledger", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    Ok((count, max.unwrap_or(0)))
}

async fn status_states(base: &str, names: &[String]) -> Result<BTreeMap<String, String>> {
    let v: Value = client()?
        .get(format!("{base}/status"))
        .timeout(Duration::from_secs(10))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(names
        .iter()
        .map(|n| {
            let s = v["machines"][n]["state"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            (n.clone(), s)
        })
        .collect())
}

/// What the restart did to each machine's breaker, read from the second router's log.
struct Restart {
    /// Largest ledger seq written by the killed router.
    boundary_seq: i64,
    kill_ms: f64,
    up_ms: f64,
    /// Machines whose stored verdict the new router ignored (older than max_cooldown).
    ignored: Vec<String>,
}

/// Folds each machine's rows; returns per machine (transitions, final state, breaks).
fn replay(
    rows: &[Row],
    names: &[String],
    restart: Option<&Restart>,
) -> BTreeMap<String, (usize, String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for name in names {
        let mut state = "closed".to_string();
        let mut breaks = Vec::new();
        let mut crossed = restart.is_none();
        let mut n = 0;
        let cross = |state: &mut String| {
            if restart.is_some_and(|r| r.ignored.contains(name)) {
                *state = "closed".into();
            }
        };
        let mut prev: Option<&Row> = None;
        for r in rows.iter().filter(|r| &r.machine == name) {
            if !crossed && restart.is_some_and(|x| r.seq > x.boundary_seq) {
                crossed = true;
                cross(&mut state);
            }
            if r.from != state {
                // What the log alone would not say: a twin row, and the last registry change.
                let twin = prev.filter(|p| {
                    p.from == r.from
                        && p.to == r.to
                        && p.reason == r.reason
                        && r.at_ms - p.at_ms <= 5.0
                });
                let reload = rows
                    .iter()
                    .rfind(|x| x.seq < r.seq && x.machine == "(registry)" && x.from != x.to);
                breaks.push(format!(
                    "seq {}: from {} but the previous row left {} ({}){}{}",
                    r.seq,
                    r.from,
                    state,
                    r.reason,
                    twin.map_or(String::new(), |p| format!(
                        "; same transition as seq {} {:.0} ms before",
                        p.seq,
                        r.at_ms - p.at_ms
                    )),
                    reload.map_or(String::new(), |x| format!(
                        "; {:.1}s after the registry changed (seq {})",
                        (r.at_ms - x.at_ms) / 1000.0,
                        x.seq
                    ))
                ));
            }
            state = r.to.clone();
            prev = Some(r);
            n += 1;
        }
        if !crossed {
            cross(&mut state);
        }
        out.insert(name.clone(), (n, state, breaks));
    }
    out
}

/// Invariant 3: work hits inside each machine's open and half-open intervals.
struct Intervals {
    open_intervals: usize,
    half_open_intervals: usize,
    /// Hits in open intervals that no tolerance covers, and their description.
    violations: Vec<String>,
    worst_open: usize,
    worst_open_tolerated: usize,
    worst_half_open: usize,
    worst_lag_ms: f64,
    /// Probes that ended without a verdict, each letting the next request probe.
    probes_released: usize,
    /// Hits in the very millisecond an open interval began: unordered against it.
    same_ms: usize,
}

/// Per machine, when the router logged that a probe ended without a verdict (client gone,
/// the request's own deadline, a usable 429): README "What trips a breaker" then admits the next request as
/// the probe, so each such line allows one more hit in its half-open interval.
fn probe_releases(dir: &std::path::Path, names: &[String]) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::new(); names.len()];
    for f in ["router.1.log", "router.2.log"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        for l in text
            .lines()
            .filter(|l| l.contains("probe ended without a verdict"))
        {
            let Some(at) = l
                .split_whitespace()
                .next()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            else {
                continue;
            };
            for (i, n) in names.iter().enumerate() {
                if l.split_whitespace().any(|w| w == format!("machine={n}")) {
                    out[i].push(at.as_millisecond() as f64);
                }
            }
        }
    }
    out
}

fn check_intervals(
    rows: &[Row],
    names: &[String],
    hits: &[Vec<f64>],
    releases: &[Vec<f64>],
    restart: Option<&Restart>,
    max_conc: usize,
    end_ms: f64,
) -> Intervals {
    let mut res = Intervals {
        open_intervals: 0,
        half_open_intervals: 0,
        violations: Vec::new(),
        worst_open: 0,
        worst_open_tolerated: 0,
        worst_half_open: 0,
        worst_lag_ms: 0.0,
        probes_released: 0,
        same_ms: 0,
    };
    for (i, name) in names.iter().enumerate() {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.machine == name).collect();
        for (j, r) in mine.iter().enumerate() {
            let shut = matches!(r.to.as_str(), "open" | "forced_open" | "auth_failed");
            let half = r.to == "half_open";
            if !shut && !half {
                continue;
            }
            let mut end = mine.get(j + 1).map_or(end_ms, |n| n.at_ms);
            let spans_kill = restart.is_some_and(|x| {
                r.seq <= x.boundary_seq && mine.get(j + 1).is_none_or(|n| n.seq > x.boundary_seq)
            });
            if spans_kill && restart.is_some_and(|x| x.ignored.contains(name)) {
                // The new router forgot this verdict: the machine was closed from its start.
                end = restart.map_or(end, |x| x.up_ms.min(end));
            }
            let inside: Vec<f64> = hits[i]
                .iter()
                .copied()
                .filter(|&t| t >= r.at_ms && t < end)
                .collect();
            if half {
                res.half_open_intervals += 1;
                res.worst_half_open = res.worst_half_open.max(inside.len());
                let released = releases[i]
                    .iter()
                    .filter(|&&t| t >= r.at_ms && t <= end + 1.0)
                    .count();
                res.probes_released += released;
                let allowed = 1 + usize::from(spans_kill) + released;
                if inside.len() > allowed {
                    res.violations.push(format!(
                        "{name} half_open (seq {}, {:.0} ms long): {} work hits, at most {allowed} allowed; at +{} ms",
                        r.seq,
                        end - r.at_ms,
                        inside.len(),
                        offsets(&inside, r.at_ms)
                    ));
                }
                continue;
            }
            res.open_intervals += 1;
            res.worst_open = res.worst_open.max(inside.len());
            // The ledger keeps whole milliseconds: a hit in the transition's own millisecond
            // cannot be ordered against it (the failures that opened it land there too).
            let (same_ms, inside): (Vec<f64>, Vec<f64>) =
                inside.iter().partition(|&&t| t < r.at_ms + 1.0);
            res.same_ms += same_ms.len();
            // In flight when it opened: just after the open, or (spanning the kill) just
            // before the kill, whose ledger rows may have died with the process.
            let kill_ms = restart.map(|x| x.kill_ms);
            let (early, late): (Vec<f64>, Vec<f64>) = inside.iter().partition(|&&t| {
                t - r.at_ms <= INFLIGHT_WINDOW_MS
                    || (spans_kill
                        && kill_ms.is_some_and(|k| t <= k && k - t <= INFLIGHT_WINDOW_MS))
            });
            for &t in &early {
                if t - r.at_ms <= INFLIGHT_WINDOW_MS {
                    res.worst_lag_ms = res.worst_lag_ms.max(t - r.at_ms);
                }
            }
            res.worst_open_tolerated = res.worst_open_tolerated.max(early.len().min(max_conc));
            let excess = early.len().saturating_sub(max_conc) + late.len();
            if excess > 0 {
                res.violations.push(format!(
                    "{name} open (seq {}, '{}', {:.0} ms long): {} work hits, {} beyond tolerance; at +{} ms",
                    r.seq,
                    r.reason,
                    end - r.at_ms,
                    inside.len(),
                    excess,
                    offsets(&inside, r.at_ms)
                ));
            }
        }
    }
    res
}

fn offsets(ts: &[f64], from: f64) -> String {
    let list: Vec<String> = ts
        .iter()
        .take(12)
        .map(|t| format!("{:.0}", t - from))
        .collect();
    let more = if ts.len() > 12 { ", ..." } else { "" };
    format!("{}{more}", list.join(", "))
}

// ============================================================== the run

async fn run(args: Args) -> Result<bool> {
    let bin = std::fs::canonicalize(&args.bin)
        .with_context(|| format!("the router binary {} (build it first)", args.bin.display()))?;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut master = Rng(seed);
    let run_for = Duration::from_secs_f64(args.minutes * 60.0);
    let dir = tempfile::Builder::new()
        .prefix("labrouter-soak.")
        .tempdir()
        .context("creating the run directory")?;
    let dir_path = dir.path().to_path_buf();
    log(format!(
        "seed {seed}; {:.1} min; run directory {}",
        args.minutes,
        dir_path.display()
    ));

    let names: Vec<String> = ["alpha", "beta", "gamma"].map(String::from).to_vec();
    let mut sims = Vec::new();
    for n in &names {
        let sim = Sim::start(n)
            .await
            .with_context(|| format!("starting sim {n}"))?;
        sim.set_chunks(4);
        sims.push(sim);
    }
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let mut reg = Registry {
        path: dir_path.join("registry.yaml"),
        port,
        state_dir: dir_path.join("state"),
        machines: names
            .iter()
            .zip(&sims)
            .map(|(n, s)| (n.clone(), s.base_url()))
            .collect(),
        knobs: vec![DEFAULT_KNOBS; names.len()],
        extra: Vec::new(),
    };
    probe_optional_keys(&bin, &mut reg).await?;
    let db = reg.state_dir.join("labrouter.db");
    let config = reg.path.clone();
    let reg = Arc::new(Mutex::new(reg));

    let mut router = spawn_router(&bin, &config, &dir_path.join("router.1.log")).await?;
    wait_healthy(&base, &mut router, Duration::from_secs(20)).await?;
    log(format!("router pid {} on {base}", router.pid));

    let started = Instant::now();
    let stop_at = started + run_for;
    let shared = Arc::new(Shared {
        base: base.clone(),
        client: Mutex::new(client()?),
        up: tokio::sync::watch::Sender::new(true),
        epoch: AtomicU64::new(0),
        killed_at: Mutex::new(None),
        stop_at,
        stopping: AtomicBool::new(false),
        sent: AtomicU64::new(0),
        max_requests: args.max_rps * run_for.as_secs().max(1),
        rss_pid: AtomicU32::new(router.pid),
        stats: Mutex::new(Stats::default()),
        huge_owner: AtomicUsize::new(usize::MAX),
    });

    // RSS, every second, of whichever router runs.
    let rss_samples = Arc::new(Mutex::new(Vec::<(f64, u64)>::new()));
    let sampler = {
        let (shared, samples) = (Arc::clone(&shared), Arc::clone(&rss_samples));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if let Some(kb) = rss_kb(shared.rss_pid.load(Ordering::Relaxed)) {
                    lock(&samples).push((started.elapsed().as_secs_f64(), kb));
                }
            }
        })
    };

    let mut tasks = Vec::new();
    for i in 0..args.clients {
        let rng = Rng(master.next() ^ i as u64);
        tasks.push(tokio::spawn(client_loop(Arc::clone(&shared), rng)));
    }
    let mut fault_tasks = Vec::new();
    for i in 0..sims.len() {
        let rng = Rng(master.next());
        fault_tasks.push(tokio::spawn(fault_loop(
            Arc::clone(&shared),
            sims.clone(),
            i,
            rng,
        )));
    }
    let reloader = tokio::spawn(reload_loop(
        Arc::clone(&shared),
        Arc::clone(&reg),
        Rng(master.next()),
    ));

    // Progress lines, every 15 s.
    let progress = {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(15));
            tick.tick().await;
            loop {
                tick.tick().await;
                let st = lock(&shared.stats);
                let (sent, failed) = st
                    .kinds
                    .values()
                    .fold((0, 0), |(s, f), k| (s + k.sent, f + k.failed));
                log(format!(
                    "{:>4.0}s: {sent} answered, {failed} unanswered",
                    started.elapsed().as_secs_f64()
                ));
            }
        })
    };

    // The one SIGKILL, somewhere in the middle.
    let kill_after = run_for.mul_f64(0.4 + master.below(20) as f64 / 100.0);
    tokio::time::sleep(kill_after).await;
    shared.up.send_replace(false);
    let kill_ms = now_ms();
    *lock(&shared.killed_at) = Some(Instant::now());
    shared.epoch.store(1, Ordering::SeqCst);
    router.child.start_kill().context("SIGKILL to the router")?;
    let status = router.child.wait().await?;
    log(format!(
        "SIGKILL sent to the router (pid {}) at {:.1}s: {status}",
        router.pid,
        kill_after.as_secs_f64()
    ));
    let (_, boundary_seq) = db_rows(&db)?;
    let respawned = Instant::now();
    router = spawn_router(&bin, &config, &dir_path.join("router.2.log")).await?;
    shared.rss_pid.store(router.pid, Ordering::Relaxed);
    wait_healthy(&base, &mut router, Duration::from_secs(20)).await?;
    let up_ms = now_ms();
    let restart_took = respawned.elapsed();
    *lock(&shared.client) = client()?;
    shared.up.send_replace(true);
    log(format!(
        "router restarted (pid {}), healthy after {:.2}s",
        router.pid,
        restart_took.as_secs_f64()
    ));

    // Traffic stops at stop_at; in-flight requests end within their deadline.
    for t in tasks {
        let _ = t.await;
    }
    shared.stopping.store(true, Ordering::SeqCst);
    for t in fault_tasks {
        let _ = t.await;
    }
    reloader.abort();
    let _ = reloader.await;
    progress.abort();
    for s in &sims {
        s.set(Fault::Ok);
    }
    let traffic_end_ms = now_ms();
    let run_secs = started.elapsed().as_secs_f64();
    log(format!(
        "traffic stopped after {run_secs:.1}s; faults cleared; reading the ledger"
    ));
    // The ledger writer is asynchronous: let it drain.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let router2_log = std::fs::read_to_string(dir_path.join("router.2.log")).unwrap_or_default();
    let ignored: Vec<String> = names
        .iter()
        .filter(|n| {
            router2_log.lines().any(|l| {
                l.contains("older than max_cooldown") && l.contains(&format!("machine={n}"))
            })
        })
        .cloned()
        .collect();
    let restart = Restart {
        boundary_seq,
        kill_ms,
        up_ms,
        ignored,
    };

    let states = status_states(&base, &names).await?;
    let rows = fetch_ledger(&base).await?;
    let (db_count, _) = db_rows(&db)?;
    let hits: Vec<Vec<f64>> = sims
        .iter()
        .map(|s| s.hit_times().into_iter().map(wall_ms).collect())
        .collect();
    // Reloads toggle max_concurrency between 3 and 4: the most ever in flight to one machine.
    let max_conc = 4usize;

    // ---------------------------------------------------------------- figures
    let mut ok = true;
    let mut verdict = |pass: bool| {
        ok &= pass;
        if pass {
            "PASS"
        } else {
            "FAIL"
        }
    };
    // Every task that records is done: take the figures.
    let st = std::mem::take(&mut *lock(&shared.stats));
    println!(
        "\n=== labrouter soak: {:.1} min, seed {seed} ===",
        args.minutes
    );
    println!(
        "run directory: {}   router: {}",
        dir_path.display(),
        bin.display()
    );
    let extra = lock(&reg).extra.clone();
    println!(
        "registry: connect {CONNECT}, first_byte {FIRST_BYTE}, idle {IDLE}, total {TOTAL_S}s; breaker cooldown {COOLDOWN_S}s, max_cooldown {MAX_COOLDOWN_S}s; optional server keys set: {}",
        if extra.is_empty() {
            "none (this build's check rejects them)".to_string()
        } else {
            extra
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!(
        "\nrequests ({} clients, client deadline {}s = total + {}s):",
        args.clients,
        TOTAL_S + SLACK.as_secs(),
        SLACK.as_secs()
    );
    println!(
        "  {:<12} {:>7} {:>7} {:>9} {:>14} {:>11} {:>15}",
        "kind", "sent", "served", "errored", "broken-stream", "unanswered", "killed-in-flight"
    );
    let mut tot = KindStats::default();
    for (k, s) in &st.kinds {
        println!(
            "  {:<12} {:>7} {:>7} {:>9} {:>14} {:>11} {:>15}",
            k.name(),
            s.sent,
            s.served,
            s.errored,
            s.broken,
            s.failed,
            s.killed
        );
        tot.sent += s.sent;
        tot.served += s.served;
        tot.errored += s.errored;
        tot.broken += s.broken;
        tot.failed += s.failed;
        tot.killed += s.killed;
    }
    println!(
        "  {:<12} {:>7} {:>7} {:>9} {:>14} {:>11} {:>15}",
        "total", tot.sent, tot.served, tot.errored, tot.broken, tot.failed, tot.killed
    );
    println!(
        "  structured errors: {}",
        st.errors
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  served by: {}; huge (>1 MiB) completions passed through: {}; slowest answer {:.2}s",
        st.served_by
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        st.huge_served,
        st.slowest.as_secs_f64()
    );
    for (sim, faults) in &st.faults {
        println!(
            "  faults set on {sim}: {}",
            faults
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let registry_rows = rows.iter().filter(|r| r.machine == "(registry)").count();
    println!(
        "reloads: {} ({}); ledgered as registry rows: {registry_rows}{}",
        st.reloads.values().sum::<u64>(),
        st.reloads
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        if st.reload_errors.is_empty() {
            String::new()
        } else {
            format!("; reload errors: {}", st.reload_errors.join("; "))
        }
    );
    println!(
        "restart: SIGKILL at {:.1}s (ledger seq ≤ {boundary_seq} written by the killed router), healthy again after {:.2}s; verdicts ignored at start: {}",
        kill_after.as_secs_f64(),
        restart_took.as_secs_f64(),
        if restart.ignored.is_empty() {
            "none".to_string()
        } else {
            restart.ignored.join(", ")
        }
    );
    for (i, n) in names.iter().enumerate() {
        let trips = rows
            .iter()
            .filter(|r| &r.machine == n && r.to == "open")
            .count();
        println!(
            "machine {n}: {trips} trips (→ open), {} work hits on its sim ({} in the hit log)",
            sims[i].work_hits(),
            hits[i].len()
        );
    }

    println!("\ninvariants:");
    // 1.
    let pass1 = tot.failed == 0;
    println!(
        "[{}] 1. every request answered before its deadline ({}s): {} of {} answered ({} completions, {} structured errors, {} streams ended by an SSE error event), {} unanswered, {} excused (in flight at the SIGKILL)",
        verdict(pass1),
        TOTAL_S + SLACK.as_secs(),
        tot.served + tot.errored + tot.broken,
        tot.sent - tot.killed,
        tot.served,
        tot.errored,
        tot.broken,
        tot.failed,
        tot.killed
    );
    if !pass1 {
        println!(
            "      unanswered by cause: {}",
            st.failure_kinds
                .iter()
                .map(|(k, v)| format!("{k} ×{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for f in &st.failures {
            println!("      - {f}");
        }
    }

    // 2.
    let mut panics = Vec::new();
    for f in ["router.1.log", "router.2.log"] {
        let text = std::fs::read_to_string(dir_path.join(f)).unwrap_or_default();
        for l in text.lines().filter(|l| l.contains("panicked")) {
            panics.push(format!("{f}: {l}"));
        }
    }
    println!(
        "[{}] 2. panics in the router logs: {}",
        verdict(panics.is_empty()),
        panics.len()
    );
    for p in panics.iter().take(10) {
        println!("      - {p}");
    }

    // 3.
    let releases = probe_releases(&dir_path, &names);
    let iv = check_intervals(
        &rows,
        &names,
        &hits,
        &releases,
        Some(&restart),
        max_conc,
        traffic_end_ms,
    );
    println!(
        "[{}] 3. no work reaches an open machine, at most one (the probe) a half-open one: {} open and {} half-open intervals; worst open interval {} hits ({} tolerated as in flight when it opened: ≤ max_concurrency {max_conc} within {INFLIGHT_WINDOW_MS:.0} ms, latest +{:.1} ms; {} in the millisecond the breaker opened, which the ledger cannot order); worst half-open {} hits ({} probes ended without a verdict, each letting the next request probe); {} intervals over",
        verdict(iv.violations.is_empty()),
        iv.open_intervals,
        iv.half_open_intervals,
        iv.worst_open,
        iv.worst_open_tolerated,
        iv.worst_lag_ms,
        iv.same_ms,
        iv.worst_half_open,
        iv.probes_released,
        iv.violations.len()
    );
    for v in iv.violations.iter().take(15) {
        println!("      - {v}");
    }

    // 4.
    let samples = lock(&rss_samples).clone();
    let (max_at, max_kb) = samples
        .iter()
        .copied()
        .max_by_key(|s| s.1)
        .unwrap_or((0.0, 0));
    let final_kb = rss_kb(router.pid).unwrap_or(0);
    let limit_kb = args.rss_limit_mb * 1000 * 1000 / 1024;
    println!(
        "[{}] 4. router RSS ≤ {} MB: max {:.1} MB (at {max_at:.0}s), final {:.1} MB; {} of {} samples over",
        verdict(max_kb <= limit_kb && final_kb <= limit_kb),
        args.rss_limit_mb,
        max_kb as f64 * 1024.0 / 1e6,
        final_kb as f64 * 1024.0 / 1e6,
        samples.iter().filter(|s| s.1 > limit_kb).count(),
        samples.len()
    );

    // 5.
    let folded = replay(&rows, &names, Some(&restart));
    let mut pass5 = db_count as usize == rows.len();
    let mut lines5 = Vec::new();
    for n in &names {
        let (count, last, breaks) = &folded[n];
        let shown = states.get(n).map_or("?", String::as_str);
        pass5 &= breaks.is_empty() && last == shown;
        lines5.push(format!(
            "      {n}: {count} transitions; ledger replays to {last}, /status says {shown}{}",
            if breaks.is_empty() {
                String::new()
            } else {
                format!("; {} broken links", breaks.len())
            }
        ));
        for b in breaks.iter().take(5) {
            lines5.push(format!("        - {b}"));
        }
    }
    println!(
        "[{}] 5. the ledger replays to /status after faults cleared and traffic stopped ({} rows via /status/events, {db_count} in labrouter.db):",
        verdict(pass5),
        rows.len()
    );
    for l in lines5 {
        println!("{l}");
    }

    // 6. Recovery: healthy sims, so every breaker closes once its cooldown allows a probe.
    let recover_until = Instant::now() + Duration::from_secs(MAX_COOLDOWN_S * 3 + 5);
    let rec_client = client()?;
    let recovery_started = Instant::now();
    let mut final_states = status_states(&base, &names).await?;
    while final_states.values().any(|s| s != "closed") && Instant::now() < recover_until {
        for n in &names {
            if final_states.get(n).is_some_and(|s| s != "closed") {
                let _ = rec_client
                    .post(format!("{base}/v1/chat/completions"))
                    .header("x-labrouter-wait", "5s")
                    .timeout(Duration::from_secs(TOTAL_S) + SLACK)
                    .json(&json!({"model": format!("{n}-m"), "messages": [{"role": "user", "content": "hi"}]}))
                    .send()
                    .await
                    .map(|r| r.bytes());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        final_states = status_states(&base, &names).await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rows_after = fetch_ledger(&base).await?;
    let folded_after = replay(&rows_after, &names, Some(&restart));
    let mut pass6 = true;
    let mut lines6 = Vec::new();
    for n in &names {
        let (count, last, breaks) = &folded_after[n];
        let shown = final_states.get(n).map_or("?", String::as_str);
        // Links broken before traffic stopped are invariant 5's; only new ones count here.
        let new_breaks = &breaks[folded[n].2.len().min(breaks.len())..];
        pass6 &= shown == "closed" && last == shown && new_breaks.is_empty();
        lines6.push(format!(
            "      {n}: {shown} ({count} transitions; ledger replays to {last}; {} new broken links)",
            new_breaks.len()
        ));
        for b in new_breaks.iter().take(5) {
            lines6.push(format!("        - {b}"));
        }
    }
    println!(
        "[{}] 6. with every sim healthy again, every breaker closes (within {}s; took {:.1}s) and the ledger still replays:",
        verdict(pass6),
        MAX_COOLDOWN_S * 3 + 5,
        recovery_started.elapsed().as_secs_f64()
    );
    for l in lines6 {
        println!("{l}");
    }

    sampler.abort();
    let _ = router.child.start_kill();
    let _ = router.child.wait().await;
    for s in &sims {
        s.shutdown();
    }
    println!(
        "\nsoak {}: {}",
        if ok { "passed" } else { "FAILED" },
        if ok && !args.keep {
            "run directory removed".to_string()
        } else {
            format!("logs kept in {}", dir_path.display())
        }
    );
    if ok && !args.keep {
        drop(dir);
    } else {
        let _ = dir.keep();
    }
    Ok(ok)
}
