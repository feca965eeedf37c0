//! `labrouter machine add`: what it writes, byte for byte, and what it refuses, leaving the
//! file's hash as it was.

use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::json;

use super::{files_in, hash, labrouter, ollama, support, written};

/// The registry up to the end of its `machines:` entries: comments at column 0 and
/// indented, blank lines, inline comments, a commented-out entry. `{GPU}` is a sim's URL.
const HEAD: &str = "\
# My lab. Hand-written; keep these comments.

server:
  listen: 127.0.0.1:0     # loopback only
  max_body: 1MiB

defaults:
  max_concurrency: 4
{DEFAULTS}
machines:                 # one breaker each
  # The GPU box, Ollama.
  gpu:
    url: {GPU}
    api: ollama

  #   old-box:            # retired
  #     url: http://old-box.local:8080/v1
";

/// From the end of the machines to the end of the models.
const MIDDLE: &str = "
# ---- what runs where ----
models:   # logical name -> machine and backend name
  coder:  { machine: gpu, name: \"qwen3-coder:30b\" }   # the big one

  small:  { machine: gpu, name: \"qwen3:4b\" }
";

/// The rest of the file.
const TAIL: &str = "
routes:
  - name: code
    keywords: [code]
    chain: [coder, small]
  - name: chat
    default: true
    chain: [small]

# telegram:
#   token_env: TELEGRAM_BOT_TOKEN
";

/// The whole registry with the GPU box at `gpu` and `defaults` added under `defaults:`.
fn registry(gpu: &Sim, defaults: &str) -> String {
    let head = HEAD
        .replace("{GPU}", &gpu.base_url())
        .replace("{DEFAULTS}", defaults);
    format!("{head}{MIDDLE}{TAIL}")
}

#[tokio::test]
async fn machine_add_keeps_every_byte_and_a_router_serves_the_new_models() {
    let gpu = ollama("gpu", &["qwen3-coder:30b", "qwen3:4b"]).await;
    let box2 = ollama("box2", &["qwen3-coder:30b", "nomic-embed-text:latest"]).await;
    let old = registry(&gpu, "");
    let (dir, path) = written(&old);
    let ran = labrouter(&[
        "machine",
        "add",
        "box2",
        &box2.root_url(),
        "--config",
        path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let url = box2.base_url();
    assert!(
        ran.stdout.contains(&format!(
            "machine box2 at {url}: Ollama 0.13.5 (api: ollama), 2 models"
        )),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("  nomic-embed-text:latest -> model nomic-embed-text-box2 (kind: embed)"),
        "{}",
        ran.stdout
    );

    // The old bytes, untouched, around the two blocks added at the ends of the sections.
    let head = HEAD
        .replace("{GPU}", &gpu.base_url())
        .replace("{DEFAULTS}", "");
    let machine = format!("  box2:\n    url: {url}\n    api: ollama\n");
    let models = "  qwen3-coder-30b-box2: { machine: box2, name: \"qwen3-coder:30b\" }\n  nomic-embed-text-box2: { machine: box2, name: \"nomic-embed-text:latest\", kind: embed }\n";
    let new = std::fs::read_to_string(&path).unwrap();
    assert!(new.starts_with(&head));
    assert_eq!(new, format!("{head}{machine}{MIDDLE}{models}{TAIL}"));
    assert_eq!(
        (
            box2.hits("/api/version"),
            box2.hits("/api/tags"),
            box2.work_hits()
        ),
        (1, 1, 0)
    );
    assert_eq!(files_in(dir.path()), ["registry.yaml"]);

    let check = labrouter(&["check", path.to_str().unwrap()]).await;
    assert_eq!(check.code, Some(0), "{check:?}");
    assert!(
        check
            .stdout
            .contains(": ok: 2 machines, 4 models, 2 routes"),
        "{check:?}"
    );

    // A router on the new file sends the new models to the new machine.
    let svc = Arc::new(Service::in_memory(Registry::load(&path).unwrap(), None).unwrap());
    let (base, _fleet) = support::serve(svc).await;
    let client = reqwest::Client::new();
    let chat =
        json!({"model": "qwen3-coder-30b-box2", "messages": [{"role": "user", "content": "hi"}]});
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        support::header(&resp, "x-labrouter-target"),
        "qwen3-coder-30b-box2@box2"
    );
    let embed = json!({"model": "nomic-embed-text-box2", "input": "hi"});
    let resp = client
        .post(format!("{base}/v1/embeddings"))
        .json(&embed)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        (
            box2.hits("/v1/chat/completions"),
            box2.hits("/v1/embeddings")
        ),
        (1, 1)
    );
    assert_eq!(gpu.work_hits(), 0);
}

#[tokio::test]
async fn an_openai_machine_with_a_key_is_added_with_the_variable_name_only() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    let cpu = Sim::start("cpu").await.unwrap();
    cpu.set_models(&["qwen3:4b"]);
    let (_dir, path) = written(&registry(&gpu, ""));
    let ran = labrouter(&[
        "machine",
        "add",
        "cpu",
        &cpu.base_url(),
        "--config",
        path.to_str().unwrap(),
        "--api-key-env",
        "LABROUTER_TEST_UNSET_KEY_VAR",
    ])
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout
            .contains("an OpenAI-compatible server (api: openai), 1 model"),
        "{ran:?}"
    );
    assert!(
        ran.stderr
            .contains("LABROUTER_TEST_UNSET_KEY_VAR is not set here"),
        "{ran:?}"
    );
    // qwen3:4b was the small model's alone; the note says a request must now name which.
    let note = "note: qwen3:4b named model small alone; now qwen3-4b-cpu has it too";
    assert!(ran.stderr.contains(note), "{ran:?}");
    let new = std::fs::read_to_string(&path).unwrap();
    let entry = format!(
        "  cpu:\n    url: {}\n    api_key_env: LABROUTER_TEST_UNSET_KEY_VAR\n",
        cpu.base_url()
    );
    assert!(new.contains(&entry), "{new}");
    // Its one model's entry name is taken by nothing, so it is the plain slug.
    assert!(
        new.contains("  qwen3-4b-cpu: { machine: cpu, name: \"qwen3:4b\" }\n"),
        "{new}"
    );
    assert_eq!((cpu.hits("/api/version"), cpu.hits("/v1/models")), (1, 1));
}

/// Runs `machine add NAME URL` on `text` and asserts it was refused: exit 1, one line on
/// stderr saying `says`, the file's bytes (hashed) as they were, no file left beside it.
async fn refused(text: &str, name: &str, url: &str, says: &str) {
    let (dir, path) = written(text);
    let before = hash(&path);
    let ran = labrouter(&[
        "machine",
        "add",
        name,
        url,
        "--config",
        path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stderr.contains(says), "expected {says:?} in {ran:?}");
    assert!(
        ran.stderr.contains("registry.yaml: not changed: "),
        "{ran:?}"
    );
    assert_eq!(ran.stderr.trim_end().lines().count(), 1, "{ran:?}");
    assert_eq!(hash(&path), before, "the file changed");
    assert_eq!(files_in(dir.path()), ["registry.yaml"]);
}

#[tokio::test]
async fn a_machine_that_exists_is_refused_before_it_is_asked() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    refused(
        &registry(&gpu, ""),
        "gpu",
        &gpu.root_url(),
        "machine 'gpu' already exists",
    )
    .await;
    assert_eq!(gpu.hits("/api/version") + gpu.hits("/api/tags"), 0);
}

#[tokio::test]
async fn a_machine_that_does_not_answer_is_refused() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    let down = ollama("down", &["qwen3:4b"]).await;
    down.set(Fault::Refuse);
    let says = "does not answer as a model server: cannot connect: ";
    refused(&registry(&gpu, ""), "down", &down.root_url(), says).await;
}

#[tokio::test]
async fn a_result_that_would_not_validate_is_refused_and_says_why() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    let box2 = ollama("box2", &["llama3.2:3b"]).await;
    // Valid as it is (the GPU box sets its own max_concurrency), but a new machine would
    // inherit task_slots 2 with max_concurrency 1.
    let text = registry(&gpu, "  task_slots: 2\n")
        .replace(
            "defaults:\n  max_concurrency: 4",
            "defaults:\n  max_concurrency: 1",
        )
        .replace(
            "    api: ollama\n",
            "    api: ollama\n    max_concurrency: 4\n",
        );
    assert!(Registry::parse(&text, "r.yaml").is_ok());
    let says = "the result would not pass check: ";
    refused(&text, "box2", &box2.root_url(), says).await;
    assert_eq!(box2.hits("/api/tags"), 1, "it was asked, then refused");
}

#[tokio::test]
async fn a_one_line_machines_section_is_refused_with_a_clear_message() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    let box2 = ollama("box2", &["llama3.2:3b"]).await;
    let text = format!(
        "machines: {{ gpu: {{ url: \"{}\" }} }}\nmodels:\n  small: {{ machine: gpu, name: \"qwen3:4b\" }}\nroutes:\n  - name: chat\n    chain: [small]\n",
        gpu.base_url()
    );
    refused(
        &text,
        "box2",
        &box2.root_url(),
        "line 1: `machines:` is written in flow style",
    )
    .await;
    assert_eq!(box2.hits("/api/version"), 0);
}
