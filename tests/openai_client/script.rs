//! A Python client script as a child process: it prints `PAUSE what` when it wants the
//! test to change the lab (a machine going away between two turns), waits for `go` on its
//! stdin, and ends with one JSON line of what it read. The Python is the venv
//! `scripts/test.sh` makes; without it the test fails, saying how to get it.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The longest a script may run: a hung client fails the test instead of holding CI.
const LIMIT: Duration = Duration::from_secs(120);

/// The Python with the `openai` and `openai-agents` packages: `LABROUTER_TEST_PYTHON`,
/// else the venv `scripts/test.sh` makes.
fn python() -> String {
    if let Ok(p) = std::env::var("LABROUTER_TEST_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-venv/bin/python");
    assert!(
        std::path::Path::new(venv).exists(),
        "the openai and openai-agents Python packages are missing: run scripts/test.sh \
         (it makes {venv}), or set LABROUTER_TEST_PYTHON"
    );
    venv.to_string()
}

/// Runs `tests/openai_client/{script}` with `args`; at each `PAUSE what` line calls
/// `pause(what)`, then lets the script go on. Returns the JSON of its last line.
pub async fn run(script: &str, args: &[&str], mut pause: impl FnMut(&str)) -> Value {
    let path = format!(
        "{}/tests/openai_client/{script}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut child = tokio::process::Command::new(python())
        .arg(&path)
        .args(args)
        // Only loopback: an outside address the client might try (telemetry, tracing)
        // goes to a proxy that is not there, and fails here instead of leaving the machine.
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("OPENAI_API_KEY", "not-a-real-key")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let talk = async {
        let mut last = String::new();
        while let Some(line) = lines.next_line().await.expect("stdout reads") {
            match line.strip_prefix("PAUSE ") {
                Some(what) => {
                    pause(what);
                    stdin.write_all(b"go\n").await.expect("stdin writes");
                    stdin.flush().await.expect("stdin flushes");
                }
                None => last = line,
            }
        }
        (last, child.wait().await.expect("python exits"))
    };
    let Ok((last, status)) = tokio::time::timeout(LIMIT, talk).await else {
        panic!("{script} {args:?}: still running after {LIMIT:?}");
    };
    let stderr = errors.await.unwrap_or_default();
    assert!(
        status.success(),
        "{script} {args:?} failed ({status}):\n{stderr}\n{last}"
    );
    serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("{e}: {last}\n{stderr}"))
}
