//! The official `openai` Python SDK (from PyPI) through labrouter to simulated machines,
//! for the media endpoints: `images.generate`, `images.edit` with a file,
//! `audio.transcriptions.create` with a file, `audio.speech.create` streamed to a file, and
//! rerank by plain HTTP — each with the GPU box (first in every chain) failing in its own
//! way, so the CPU box serves. The wire is the witness: the failing machine was tried once,
//! the next one served once, and an upload's bytes reached both identical but for the
//! model labrouter names.
//!
//! `scripts/test.sh` installs the SDK into the venv it makes and names its Python in
//! `LABROUTER_TEST_PYTHON`; without it this test fails, saying how to get it: a test that
//! skipped could not fail. Real time (not the paused clock): the client is another process,
//! and no answer waits on a timer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::{json, Value};

/// The bytes of every file check.py uploads (its `FILE`): NUL and 0xFF among them.
fn file() -> Vec<u8> {
    let mut f = b"\x89PNG\r\n\x1a\n".to_vec();
    for _ in 0..4 {
        f.extend(0..=255u8);
    }
    f
}

/// The Python with the `openai` package: `LABROUTER_TEST_PYTHON`, else the venv
/// `scripts/test.sh` makes.
fn python() -> String {
    if let Ok(p) = std::env::var("LABROUTER_TEST_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-venv/bin/python");
    assert!(
        std::path::Path::new(venv).exists(),
        "the openai Python SDK is missing: run scripts/test.sh (it makes {venv}), or set LABROUTER_TEST_PYTHON"
    );
    venv.to_string()
}

/// Two machines, each with a model of every media kind; every chain is GPU box, then CPU box.
struct Lab {
    gpu: Sim,
    cpu: Sim,
    base: String,
}

impl Lab {
    async fn start() -> Lab {
        let (gpu, cpu) = (
            Sim::start("gpu-box").await.unwrap(),
            Sim::start("ubuntu-box").await.unwrap(),
        );
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
machines:
  gpu-box: {{ url: "{g}" }}
  ubuntu-box: {{ url: "{c}" }}
models:
  small: {{ machine: ubuntu-box, name: "qwen3:4b" }}
  sdxl-gpu: {{ machine: gpu-box, name: sdxl-turbo, kind: image }}
  sdxl-cpu: {{ machine: ubuntu-box, name: sd-cpu, kind: image }}
  whisper-gpu: {{ machine: gpu-box, name: whisper-large-v3, kind: transcribe }}
  whisper-cpu: {{ machine: ubuntu-box, name: whisper-small, kind: transcribe }}
  tts-gpu: {{ machine: gpu-box, name: kokoro, kind: speech }}
  tts-cpu: {{ machine: ubuntu-box, name: piper, kind: speech }}
  rerank-gpu: {{ machine: gpu-box, name: bge-reranker-large, kind: rerank }}
  rerank-cpu: {{ machine: ubuntu-box, name: bge-reranker-base, kind: rerank }}
routes:
  - {{ name: chat, default: true, chain: [small] }}
  - {{ name: draw, chain: [sdxl-gpu, sdxl-cpu] }}
  - {{ name: listen, chain: [whisper-gpu, whisper-cpu] }}
  - {{ name: speak, chain: [tts-gpu, tts-cpu] }}
  - {{ name: rank, chain: [rerank-gpu, rerank-cpu] }}
"#,
            g = gpu.base_url(),
            c = cpu.base_url()
        );
        let registry = Registry::parse(&yaml, "media.yaml").unwrap();
        let svc = Arc::new(Service::in_memory(registry, None).unwrap());
        let (base, _) = support::serve(svc).await;
        Lab { gpu, cpu, base }
    }

    /// Runs one scenario of tests/media_client/check.py through labrouter; what the SDK read.
    async fn sdk(&self, scenario: &str) -> Value {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/media_client/check.py");
        let dir = tempfile::tempdir().unwrap();
        let base = format!("{}/v1", self.base);
        let out = tokio::process::Command::new(python())
            .args([script, &base, scenario, dir.path().to_str().unwrap()])
            .kill_on_drop(true)
            .output()
            .await
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{scenario}: the openai SDK failed ({}):\n{stderr}\n{stdout}",
            out.status
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// The GPU box was tried once on `path` and the CPU box served once; nothing else
    /// reached either.
    fn assert_failed_over(&self, path: &str) {
        assert_eq!(self.gpu.hits(path), 1, "the GPU box was tried on {path}");
        assert_eq!(self.cpu.hits(path), 1, "the CPU box served {path}");
        assert_eq!((self.gpu.work_hits(), self.cpu.work_hits()), (1, 1));
    }

    /// The bodies both machines received.
    fn bodies(&self) -> (Vec<u8>, Vec<u8>) {
        (
            self.gpu.last_body().unwrap().to_vec(),
            self.cpu.last_body().unwrap().to_vec(),
        )
    }
}

/// Where `needle` occurs in `hay`.
fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// Each machine received the upload's file once, byte for byte, and the same body but for
/// the model part, which names each machine's own model.
fn assert_upload_identical(gpu: &[u8], cpu: &[u8], gpu_model: &str, cpu_model: &str) {
    let file = file();
    assert_eq!(
        find_all(gpu, &file).len(),
        1,
        "the file reached the GPU box whole"
    );
    assert_eq!(
        find_all(cpu, &file).len(),
        1,
        "the file reached the CPU box whole"
    );
    let part = |m: &str| format!("name=\"model\"\r\n\r\n{m}\r\n");
    let at = find_all(gpu, part(gpu_model).as_bytes());
    assert_eq!(at.len(), 1, "one model part, naming the GPU box's model");
    let mut expected = gpu[..at[0]].to_vec();
    expected.extend_from_slice(part(cpu_model).as_bytes());
    expected.extend_from_slice(&gpu[at[0] + part(gpu_model).len()..]);
    assert!(
        expected == cpu,
        "the CPU box got the GPU box's body but for the model:\n{}\n---\n{}",
        String::from_utf8_lossy(gpu),
        String::from_utf8_lossy(cpu)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_generate_reaches_the_cpu_box_past_a_gpu_box_answering_500() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let seen = lab.sdk("generate").await;
    assert_eq!(
        seen,
        json!({"count": 2, "png_ok": true, "revised_prompt": "a fox on a bench"})
    );
    lab.assert_failed_over("/v1/images/generations");
    let (gpu, cpu) = lab.bodies();
    let (gpu, cpu): (Value, Value) = (
        serde_json::from_slice(&gpu).unwrap(),
        serde_json::from_slice(&cpu).unwrap(),
    );
    assert_eq!(
        (&gpu["model"], &cpu["model"]),
        (&json!("sdxl-turbo"), &json!("sd-cpu"))
    );
    assert_eq!(cpu["n"], 2);
    assert_eq!(cpu["response_format"], "b64_json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_edit_sends_the_same_file_to_the_cpu_box_after_the_gpu_box_resets() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Reset);
    let seen = lab.sdk("edit").await;
    assert_eq!(
        seen,
        json!({"count": 1, "png_ok": true, "revised_prompt": "add a hat"})
    );
    lab.assert_failed_over("/v1/images/edits");
    let (gpu, cpu) = lab.bodies();
    assert_upload_identical(&gpu, &cpu, "sdxl-turbo", "sd-cpu");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcription_of_a_file_reaches_the_cpu_box_after_the_gpu_box_answers_503() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Status {
        code: 503,
        retry_after: None,
    });
    let seen = lab.sdk("transcribe").await;
    assert_eq!(seen, json!({"text": "ok from ubuntu-box"}));
    lab.assert_failed_over("/v1/audio/transcriptions");
    let (gpu, cpu) = lab.bodies();
    assert_upload_identical(&gpu, &cpu, "whisper-large-v3", "whisper-small");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_streams_to_a_file_from_the_cpu_box_when_the_gpu_box_cuts_before_any_byte() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::CutAfter(0));
    lab.cpu.set_chunks(5);
    let seen = lab.sdk("speech").await;
    assert_eq!(
        seen,
        json!({"content_type": "audio/wav", "bytes": 44 + 5 * 1600, "wav_ok": true})
    );
    lab.assert_failed_over("/v1/audio/speech");
    let (gpu, cpu) = lab.bodies();
    let (gpu, cpu): (Value, Value) = (
        serde_json::from_slice(&gpu).unwrap(),
        serde_json::from_slice(&cpu).unwrap(),
    );
    assert_eq!(
        (&gpu["model"], &cpu["model"]),
        (&json!("kokoro"), &json!("piper"))
    );
    assert_eq!(cpu["input"], "hello lab");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_by_plain_http_reaches_the_cpu_box_past_a_malformed_gpu_box() {
    let lab = Lab::start().await;
    lab.gpu.set(Fault::Malformed);
    let seen = lab.sdk("rerank").await;
    assert_eq!(seen["status"], 200, "{seen}");
    assert_eq!(seen["model"], "bge-reranker-base");
    assert_eq!(
        seen["results"],
        json!([{"index": 2, "relevance_score": 1.0}, {"index": 1, "relevance_score": 0.5}])
    );
    lab.assert_failed_over("/v1/rerank");
}
