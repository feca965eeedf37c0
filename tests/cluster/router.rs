//! One router: the real `labrouter` binary as a child process (`--log-format json serve
//! --config FILE`), bound to port 0 and found by its "labrouter serving" log line; and what a
//! client does with it: a chat request, `/status`, `/metrics`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

/// A running router process.
pub struct Router {
    /// Its `cluster.node`.
    pub node: String,
    pub base: String,
    child: Child,
    /// Every line of its log, drained by a thread for the child's whole life.
    log: Arc<Mutex<Vec<String>>>,
}

impl Router {
    /// Starts `labrouter serve --config` with `env` set and waits for the line that names the
    /// port it bound.
    pub async fn start(node: &str, config: &Path, env: &[(&str, String)]) -> Router {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_labrouter"));
        cmd.args(["--log-format", "json", "serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .env_remove("LABROUTER_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the labrouter binary starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(listen) = serving(&line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(listen);
                    }
                }
                kept.lock().unwrap().push(line);
            }
        });
        let mut router = Router {
            node: node.to_string(),
            base: String::new(),
            child,
            log,
        };
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(listen)) => router.base = format!("http://{listen}"),
            _ => panic!("router {node} did not start:\n{}", router.logs()),
        }
        router
    }

    /// SIGKILL: its lease, if it holds one, is left to expire.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("reaped");
        assert!(!status.success(), "killed, not exited: {status}");
    }

    /// The most memory the process has held at once (`VmHWM`, bytes): a bound on what any
    /// read ever cost it, whatever it freed since.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status of a running router");
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no VmHWM in /proc/{}/status", self.child.id()));
        kib * 1024
    }

    /// How many lines of its log contain every one of `parts`.
    pub fn count_lines(&self, parts: &[&str]) -> usize {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .count()
    }

    /// Still running (it did not panic its way out)?
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Its log, one JSON object per line.
    pub fn logs(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The last `n` lines of its log, for a failure message.
    pub fn tail(&self, n: usize) -> String {
        let log = self.log.lock().unwrap();
        let from = log.len().saturating_sub(n);
        format!(
            "--- {} log (last {n} lines) ---\n{}",
            self.node,
            log[from..].join("\n")
        )
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the JSON log line `labrouter serving`, if this is that line.
fn serving(line: &str) -> Option<String> {
    let v: Value = serde_json::from_str(line).ok()?;
    let fields = v.get("fields")?;
    (fields.get("message")?.as_str()? == "labrouter serving")
        .then(|| fields.get("listen")?.as_str().map(str::to_string))
        .flatten()
}

// === what a client sees ===

/// One chat request's answer, as the client saw it.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status; 0 when the router did not answer at all (`error` says why).
    pub status: u16,
    /// `x-labrouter-target`: `model@machine` that served it.
    pub target: String,
    /// `x-labrouter-skipped`: `model@machine=reason,...` passed over.
    pub skipped: String,
    pub took: Duration,
    #[expect(dead_code, reason = "read through Debug, in failure messages")]
    pub error: Option<String>,
}

impl Reply {
    pub fn served_by(&self, target: &str) -> bool {
        self.status == 200 && self.target == target
    }

    /// Whether `target` was skipped for `reason` (`circuit_open`, `probe_in_flight`).
    pub fn skipped_for(&self, target: &str, reason: &str) -> bool {
        self.skipped
            .split(',')
            .any(|s| s.trim() == format!("{target}={reason}"))
    }
}

/// POSTs a chat completion to `base` for `route` (a route name as `model`).
pub async fn ask(client: &reqwest::Client, base: &str, route: &str) -> Reply {
    let started = Instant::now();
    let body = json!({"model": route, "messages": [{"role": "user", "content": "hello"}]});
    let sent = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await;
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    match sent {
        Ok(resp) => {
            let (target, skipped) = (
                header(&resp, "x-labrouter-target"),
                header(&resp, "x-labrouter-skipped"),
            );
            let status = resp.status().as_u16();
            let body = resp.bytes().await;
            Reply {
                status,
                target,
                skipped,
                took: started.elapsed(),
                error: body.err().map(|e| e.to_string()),
            }
        }
        Err(e) => Reply {
            status: 0,
            target: String::new(),
            skipped: String::new(),
            took: started.elapsed(),
            error: Some(e.to_string()),
        },
    }
}

/// GET `/status` as JSON.
pub async fn status(client: &reqwest::Client, base: &str) -> Value {
    let resp = client
        .get(format!("{base}/status"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {base}/status: {e}"));
    assert_eq!(resp.status(), 200, "GET {base}/status");
    resp.json().await.unwrap()
}

/// GET `/metrics` (Prometheus text).
pub async fn metrics(client: &reqwest::Client, base: &str) -> String {
    let resp = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {base}/metrics: {e}"));
    assert_eq!(resp.status(), 200, "GET {base}/metrics");
    resp.text().await.unwrap()
}

/// The sum of the samples of metric `name` whose labels include every `k="v"` in `labels`
/// (0 when there is none).
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((m, rest)) => (m, rest),
                None => (series, ""),
            };
            let wanted = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            wanted.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}
