//! What the newer kinds of work cost through labrouter, against the same machine asked
//! directly in the same run (`scripts/bench.sh` runs it; `BENCH_ONLY=media` alone):
//!
//! - a Responses stream's added time to its first event, and whether events are batched;
//! - a 50-turn conversation continued by `previous_response_id`: the expansion's added time;
//! - a 50 MiB transcription upload: MB/s through labrouter against direct (and the router's
//!   CPU time per upload), and the router's peak RSS with 8 such uploads in flight at once;
//! - a speech stream's added time to its first byte;
//! - image generation along a 3-machine chain whose first machine is down.
//!
//! The machines are small fakes served by this process on loopback (they answer at once,
//! so what is measured is labrouter); labrouter is the release binary given by
//! `--labrouter`, run as its own process so its RSS is its own. Prints a markdown table.

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

#[derive(Debug, Parser)]
#[command(about = "Responses, uploads, speech and images through labrouter against direct")]
struct Args {
    /// The labrouter binary to measure.
    #[arg(long)]
    labrouter: PathBuf,
    /// Base port: fakes at +1 and +2, labrouter at +3 (+4 is never opened: the dead machine).
    #[arg(long, default_value_t = 18300)]
    port: u16,
    /// Requests per streamed measure (directly and through labrouter, taking turns).
    #[arg(long, default_value_t = 200)]
    n: usize,
    /// MiB per upload.
    #[arg(long, default_value_t = 50)]
    upload_mib: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_media: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(table) => {
            println!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_media: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every response id the fakes hand out is new, as a machine's are.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fake machine: Responses (plain and streamed), transcriptions that read the whole
/// upload, speech streamed in chunks, image generation.
fn fake() -> Router {
    Router::new()
        .route("/v1/responses", post(responses))
        .route("/v1/audio/transcriptions", post(transcription))
        .route("/v1/audio/speech", post(speech))
        .route("/v1/images/generations", post(image))
        .layer(DefaultBodyLimit::disable())
}

async fn responses(Json(body): Json<Value>) -> Response {
    let id = format!("resp_{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
    let turns = body["input"].as_array().map_or(1, Vec::len);
    let text = format!("heard {turns} items");
    let done = json!({"id": id, "object": "response", "status": "completed", "model": body["model"],
        "output": [{"type": "message", "id": format!("msg_{id}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}]});
    if body["stream"] != json!(true) {
        return Json(done).into_response();
    }
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
    )];
    for word in ["heard ", "the ", "question"] {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "delta": word}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": done}),
    ));
    let frames = events.into_iter().map(|(name, data)| {
        Ok::<_, std::io::Error>(Bytes::from(format!("event: {name}\ndata: {data}\n\n")))
    });
    sse(Body::from_stream(spaced(frames)), "text/event-stream")
}

async fn transcription(body: Bytes) -> Json<Value> {
    Json(json!({ "text": format!("heard {} bytes", body.len()) }))
}

async fn speech() -> Response {
    let chunks = (0..16).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![0u8; 4096])));
    sse(Body::from_stream(spaced(chunks)), "audio/wav")
}

async fn image() -> Json<Value> {
    Json(
        json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="}]}),
    )
}

/// The first item at once, the rest 2 ms apart, as a machine generating them sends them: a
/// router that held them back would show fewer, larger reads.
fn spaced<T: Send + 'static>(
    items: impl Iterator<Item = T> + Send + 'static,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::iter(items.enumerate()).then(|(i, item)| async move {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        item
    })
}

fn sse(body: Body, content_type: &'static str) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(content_type),
    );
    resp
}

async fn serve_fake(port: u16) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    tokio::spawn(async move { axum::serve(listener, fake()).await });
    Ok(())
}

/// The router under measure, stopped when dropped.
struct Labrouter {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Labrouter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn registry(args: &Args, state: &std::path::Path) -> String {
    let (a, b, r, dead) = (args.port + 1, args.port + 2, args.port + 3, args.port + 4);
    let upload = args.upload_mib + 1;
    format!(
        r#"server:
  listen: 127.0.0.1:{r}
  state_dir: {state}
  max_upload: {upload}MiB
  max_uploads_in_flight: 8
defaults:
  max_concurrency: 4096
  timeouts: {{ connect: 2s, first_byte: 30s, idle: 30s, total: 10m }}
machines:
  fake-a: {{ url: "http://127.0.0.1:{a}/v1" }}
  fake-b: {{ url: "http://127.0.0.1:{b}/v1" }}
  dead:   {{ url: "http://127.0.0.1:{dead}/v1" }}
models:
  chat-a:  {{ machine: fake-a, name: chat }}
  whisper: {{ machine: fake-a, name: whisper, kind: transcribe }}
  tts:     {{ machine: fake-a, name: tts, kind: speech }}
  img-dead: {{ machine: dead, name: img, kind: image }}
  img-a:   {{ machine: fake-a, name: img, kind: image }}
  img-b:   {{ machine: fake-b, name: img, kind: image }}
routes:
  - {{ name: chat, default: true, chain: [chat-a] }}
  - {{ name: listen, chain: [whisper] }}
  - {{ name: speak, chain: [tts] }}
  - {{ name: draw, chain: [img-dead, img-a, img-b] }}
"#,
        state = state.display()
    )
}

async fn start_router(args: &Args, client: &reqwest::Client) -> Result<Labrouter, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = dir.path().join("registry.yaml");
    std::fs::write(&config, registry(args, &dir.path().join("state")))
        .map_err(|e| e.to_string())?;
    let child = Command::new(&args.labrouter)
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", args.labrouter.display()))?;
    let router = Labrouter { child, _dir: dir };
    let health = format!("http://127.0.0.1:{}/healthz", args.port + 3);
    for _ in 0..200 {
        if client.get(&health).send().await.is_ok() {
            return Ok(router);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("labrouter did not answer /healthz within 10 s".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Time to the first body bytes of a POST, and the number of reads it took to get the whole
/// answer (1 read holding every event would mean the events were batched).
async fn first_byte(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> Result<(f64, usize), String> {
    let start = Instant::now();
    let resp = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    let mut stream = resp.bytes_stream();
    let mut first = None;
    let mut reads = 0;
    while let Some(chunk) = stream.next().await {
        chunk.map_err(|e| e.to_string())?;
        first.get_or_insert_with(|| start.elapsed().as_secs_f64() * 1e3);
        reads += 1;
    }
    Ok((first.unwrap_or(f64::NAN), reads))
}

/// Median time to first byte directly and through labrouter, taking turns.
async fn ttfb_pair(
    client: &reqwest::Client,
    n: usize,
    path: &str,
    direct: u16,
    router: u16,
    body: &Value,
) -> Result<(f64, f64), String> {
    let (mut d, mut r) = (Vec::new(), Vec::new());
    for _ in 0..n {
        d.push(
            first_byte(client, &format!("http://127.0.0.1:{direct}{path}"), body)
                .await?
                .0,
        );
        r.push(
            first_byte(client, &format!("http://127.0.0.1:{router}{path}"), body)
                .await?
                .0,
        );
    }
    Ok((median(d), median(r)))
}

fn multipart(mib: usize) -> (String, Bytes) {
    let boundary = "bench-media-boundary-7f3a";
    let mut body = Vec::with_capacity(mib * 1024 * 1024 + 512);
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nlisten\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n").as_bytes(),
    );
    body.extend((0..mib * 1024 * 1024).map(|i| (i % 251) as u8));
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (
        format!("multipart/form-data; boundary={boundary}"),
        Bytes::from(body),
    )
}

async fn upload(
    client: &reqwest::Client,
    url: &str,
    ct: &str,
    body: &Bytes,
) -> Result<f64, String> {
    let start = Instant::now();
    let resp = client
        .post(url)
        .header("content-type", ct)
        .body(body.clone())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() || !text.contains("heard") {
        return Err(format!("{url}: HTTP {status}: {text}"));
    }
    Ok(body.len() as f64 / 1e6 / start.elapsed().as_secs_f64())
}

/// Uploads measured, directly and through labrouter.
const UPLOADS: usize = 15;

/// The CPU time a process has used so far (user and system, `/proc/PID/stat`), in ms.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    // USER_HZ: 100 ticks a second on Linux.
    ticks * 10.0
}

/// A `/proc/PID/status` figure in kB (`VmHWM`: the peak resident set so far).
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

async fn run(args: Args) -> Result<String, String> {
    for port in [args.port + 1, args.port + 2] {
        serve_fake(port).await?;
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let router = start_router(&args, &client).await?;
    let (a, r) = (args.port + 1, args.port + 3);
    let mut rows = Vec::new();

    // Responses stream: time to first event.
    let stream = json!({"model": "chat", "stream": true, "input": "hi"});
    let (d, t) = ttfb_pair(&client, args.n, "/v1/responses", a, r, &stream).await?;
    let (_, reads) = first_byte(
        &client,
        &format!("http://127.0.0.1:{r}/v1/responses"),
        &stream,
    )
    .await?;
    rows.push(row(
        "Responses stream: time to first event",
        d,
        t,
        "added ≤ 0.5 ms",
        t - d <= 0.5,
    ));
    rows.push(format!("| Responses stream: reads for 5 events through labrouter | — | {reads} | > 1 (not batched) | {} |", verdict(reads > 1)));

    // A 50-turn conversation, then its continuation against a fresh question.
    let mut prev: Option<String> = None;
    for turn in 0..50 {
        let mut body = json!({"model": "chat", "input": format!("turn {turn}")});
        if let Some(p) = &prev {
            body["previous_response_id"] = json!(p);
        }
        let v: Value = client
            .post(format!("http://127.0.0.1:{r}/v1/responses"))
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        prev = v["id"].as_str().map(str::to_string);
    }
    let last = prev.ok_or("the conversation has no id")?;
    let (mut fresh, mut expanded) = (Vec::new(), Vec::new());
    let url = format!("http://127.0.0.1:{r}/v1/responses");
    for _ in 0..args.n / 4 {
        let start = Instant::now();
        client
            .post(&url)
            .json(&json!({"model": "chat", "input": "again", "store": false}))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?;
        fresh.push(start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let v: Value = client.post(&url).json(&json!({"model": "chat", "input": "again", "store": false, "previous_response_id": last})).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        expanded.push(start.elapsed().as_secs_f64() * 1e3);
        let text = v["output"][0]["content"][0]["text"].as_str().unwrap_or("");
        if text != "heard 101 items" {
            return Err(format!(
                "the 51st turn was not expanded to 101 items: {text}"
            ));
        }
    }
    let (f, e) = (median(fresh), median(expanded));
    rows.push(format!("| Responses: turn 51 of a kept conversation (101 items expanded) against a fresh one | {f:.3} ms | {e:.3} ms | report | +{:.3} ms |", e - f));

    // Uploads, directly and through labrouter in turn; the router's CPU time for them too,
    // a figure the load of a shared machine moves less than its speed.
    let (ct, body) = multipart(args.upload_mib);
    let pid = router.child.id();
    let direct = format!("http://127.0.0.1:{a}/v1/audio/transcriptions");
    let through = format!("http://127.0.0.1:{r}/v1/audio/transcriptions");
    let (mut d, mut t) = (Vec::new(), Vec::new());
    let cpu_before = cpu_ms(pid);
    for _ in 0..UPLOADS {
        d.push(upload(&client, &direct, &ct, &body).await?);
        t.push(upload(&client, &through, &ct, &body).await?);
    }
    let cpu = (cpu_ms(pid) - cpu_before) / UPLOADS as f64;
    let (d, t) = (median(d), median(t));
    rows.push(format!(
        "| {} MiB transcription upload, MB/s (the router's CPU: {cpu:.0} ms per upload) | {d:.0} | {t:.0} ({:.2}×) | ≥ 0.8× | {} |",
        args.upload_mib,
        t / d,
        verdict(t / d >= 0.8)
    ));
    let before = status_kb(pid, "VmRSS:");
    let eight = (0..8).map(|_| upload(&client, &through, &ct, &body));
    for done in futures_util::future::join_all(eight).await {
        done?;
    }
    let peak = status_kb(pid, "VmHWM:") as f64 / 1024.0;
    let goal = 8.0 * body.len() as f64 / 1048576.0 + 30.0;
    rows.push(format!("| Router peak RSS, 8 uploads in flight (RSS before: {:.0} MB) | — | {peak:.0} MB | ≤ {goal:.0} MB | {} |", before as f64 / 1024.0, verdict(peak <= goal)));

    // Speech.
    let speak = json!({"model": "speak", "input": "hello", "voice": "a"});
    let (d, t) = ttfb_pair(&client, args.n, "/v1/audio/speech", a, r, &speak).await?;
    rows.push(row(
        "Speech stream: time to first byte",
        d,
        t,
        "added ≤ 0.5 ms",
        t - d <= 0.5,
    ));

    // Images along a chain whose first machine is down.
    let draw = json!({"model": "draw", "prompt": "a fox"});
    let direct_draw = json!({"model": "img", "prompt": "a fox"});
    let first = first_byte(
        &client,
        &format!("http://127.0.0.1:{r}/v1/images/generations"),
        &draw,
    )
    .await?
    .0;
    let (mut d, mut t) = (Vec::new(), Vec::new());
    for _ in 0..args.n / 2 {
        d.push(
            first_byte(
                &client,
                &format!("http://127.0.0.1:{a}/v1/images/generations"),
                &direct_draw,
            )
            .await?
            .0,
        );
        t.push(
            first_byte(
                &client,
                &format!("http://127.0.0.1:{r}/v1/images/generations"),
                &draw,
            )
            .await?
            .0,
        );
    }
    let (d, t) = (median(d), median(t));
    rows.push(format!("| Image generation, 3-machine chain, first down (first request: {first:.2} ms) | {d:.3} ms | {t:.3} ms | report | +{:.3} ms |", t - d));
    drop(router);
    Ok(format!(
        "| measure | direct | through labrouter | goal | verdict |\n|---|---|---|---|---|\n{}",
        rows.join("\n")
    ))
}

fn row(what: &str, direct: f64, through: f64, goal: &str, met: bool) -> String {
    format!(
        "| {what} | {direct:.3} ms | {through:.3} ms (+{:.3}) | {goal} | {} |",
        through - direct,
        verdict(met)
    )
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}
