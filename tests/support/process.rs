//! The router as a child process: the real binary, started on a registry file, binding
//! port 0 and logging the address it got (`--log-format json`), so no port is guessed.
//! Real time is unavoidable with a real process; every wait is a poll with a deadline.

#![allow(dead_code)] // each test binary uses a different part of it

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub struct Router {
    pub child: Child,
    pub base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Router {
    /// Starts `labrouter serve --config` and waits for the "labrouter serving" line that
    /// names the port it bound.
    pub async fn start(config: &Path) -> Router {
        Router::start_with(config, &[]).await
    }

    /// [`Router::start`] with `env` set (a Redis URL, say).
    pub async fn start_with(config: &Path, env: &[(&str, String)]) -> Router {
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
        // Drains the log for the child's whole life (a full pipe would block it).
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
            child,
            base: String::new(),
            log,
        };
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(listen)) => router.base = format!("http://{listen}"),
            _ => panic!("the router did not start:\n{}", router.logs()),
        }
        router
    }

    /// SIGKILL: no drain, no flush, no chance to say goodbye.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("reaped");
        assert!(!status.success(), "killed, not exited: {status}");
    }

    /// SIGTERM, as systemd stops a service; then waits (at most `limit`) for the exit.
    pub async fn terminate(&mut self, limit: Duration) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running {limit:?} after SIGTERM:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The most resident memory the process has used so far, in bytes (Linux `VmHWM`).
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status (Linux)");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status");
        kb * 1024
    }

    pub fn logs(&self) -> String {
        self.log.lock().unwrap().join("\n")
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

/// Polls `done` every 20 ms until it holds; after `limit`, panics with `what` and the
/// router's log.
pub async fn until<F, Fut>(router: &Router, what: &str, limit: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(
            Instant::now() < deadline,
            "timed out waiting: {what}\n{}",
            router.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn get(client: &reqwest::Client, url: String) -> Value {
    let resp = client.get(&url).send().await.expect(&url);
    assert_eq!(resp.status(), 200, "GET {url}");
    resp.json().await.unwrap()
}

/// Task `id` once it finished (or as it is after 20 s). Short `?wait=`s in a loop: a wait
/// that lands between a task's end and its commit can miss the end and hold to its limit.
pub async fn finished(client: &reqwest::Client, base: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = get(client, format!("{base}/v1/tasks/{id}?wait=1s")).await;
        let unfinished = ["blocked", "queued", "waiting", "running"];
        if !unfinished.contains(&t["status"].as_str().unwrap_or("")) || Instant::now() > deadline {
            return t;
        }
    }
}
