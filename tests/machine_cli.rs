//! `labrouter machine add` and `labrouter check --live` as a user runs them: the real binary
//! as a child process, against simulated machines served in-process on 127.0.0.1, and a
//! registry in a temporary directory. The wire is the witness: each sim counts what it was
//! asked, and the file's bytes are compared (or hashed) before and after. `add.rs` has
//! `machine add`, `live.rs` has `check --live`; this file, how a test runs the binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "machine_cli/add.rs"]
mod add;
#[path = "machine_cli/live.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use labrouter::sim::Sim;
use sha2::{Digest, Sha256};

/// How a `labrouter` run ended.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `labrouter ARGS`, run to its end (at most 30 s), the CLI's variables scrubbed.
async fn labrouter(args: &[&str]) -> Ran {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(args)
        .env_remove("LABROUTER_CONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the labrouter binary starts");
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("labrouter ended within 30 s")
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `text` written to a fresh temporary directory as registry.yaml.
fn written(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn hash(path: &Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

/// The names in `dir` (a refused add leaves no temporary file behind).
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// An Ollama sim listing `models`.
async fn ollama(name: &str, models: &[&str]) -> Sim {
    let sim = Sim::start_ollama(name).await.unwrap();
    sim.set_models(models);
    sim
}
