//! Tasks against the real binary, where only a process can show it: memory a follow-up
//! could allocate, SIGTERM's drain, and the state directory's size on disk. The machines
//! are simulated in this process (`labrouter::sim::Sim`) and counted on the wire; each
//! figure is asserted as a bound, never as a timing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/process.rs"]
mod process;

use std::path::Path;
use std::time::Duration;

use labrouter::sim::{Fault, Sim};
use serde_json::{json, Value};

use process::{finished, get, until, Router};

/// A lab of one machine behind one route, its state in `dir`; `server` and `tasks` are
/// YAML lines under those keys.
fn registry(sim: &Sim, dir: &Path, server: &str, tasks: &str) -> std::path::PathBuf {
    let yaml = format!(
        r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
{server}defaults:
  timeouts: {{ connect: 2s, first_byte: 60s, idle: 30s, total: 10m }}
  breaker: {{ failure_threshold: 3, cooldown: 1s, backoff: 1.0, max_cooldown: 1s, success_threshold: 1 }}
tasks:
  max_running: 4
{tasks}machines:
  box: {{ url: "{url}" }}
models:
  m: {{ machine: box, name: box-model }}
routes:
  - {{ name: main, default: true, chain: [m] }}
"#,
        state = dir.join("state").display(),
        url = sim.base_url(),
    );
    let config = dir.join("registry.yaml");
    std::fs::write(&config, yaml).unwrap();
    config
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(25))
        .build()
        .unwrap()
}

async fn submit(client: &reqwest::Client, base: &str, body: &Value) -> Value {
    let resp = client
        .post(format!("{base}/v1/tasks"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202, "submit");
    resp.json().await.unwrap()
}

fn chat(text: &str) -> Value {
    json!({"request": {"model": "auto", "messages": [{"role": "user", "content": text}]}})
}

fn id(task: &Value) -> String {
    task["id"].as_str().unwrap().to_string()
}

/// The bytes of every file under `dir` (the SQLite file, its WAL and shared memory).
fn size_on_disk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_that_would_fill_past_its_budget_allocates_nothing_and_fails_naming_the_size() {
    let sim = Sim::start("box").await.unwrap();
    // The parent's answer: 10 KB of text. A follow-up of just under 1 MiB that names it
    // 90,000 times would be 900 MB filled in.
    let text = "x".repeat(10_000);
    sim.set_text(Some(&text));
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start(&registry(&sim, dir.path(), "", "")).await;
    let client = client();
    let parent = submit(&client, &router.base, &chat("write it")).await;
    let p = finished(&client, &router.base, &id(&parent)).await;
    assert_eq!(p["status"], "succeeded", "{p}");
    let content = "{{after.0}}".repeat(90_000);
    let mut body = chat(&content);
    body["after"] = json!([id(&parent)]);
    let request_len = serde_json::to_vec(&body["request"]).unwrap().len();
    let child = submit(&client, &router.base, &body).await;
    let c = finished(&client, &router.base, &id(&child)).await;
    let (status, error) = (&c["status"], &c["error"]);
    assert_eq!(status, "failed", "{error}");
    assert_eq!(error["code"], "invalid_request", "{error}");
    let filled = request_len + 90_000 * (text.len() - "{{after.0}}".len());
    let message = c["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&filled.to_string()) && message.contains("tasks.max_request_body"),
        "names the size it would have and the setting: {message}"
    );
    assert_eq!(sim.work_hits(), 1, "the follow-up reached no machine");
    let peak = router.peak_rss();
    assert!(
        peak < 256 << 20,
        "the router's peak resident memory was {} MB",
        peak >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_running_task_finish_and_it_is_not_run_again() {
    let sim = Sim::start("box").await.unwrap();
    sim.set(Fault::SlowFirstByte(Duration::from_millis(800)));
    let dir = tempfile::tempdir().unwrap();
    let config = registry(&sim, dir.path(), "  shutdown_grace: 20s\n", "");
    let mut router = Router::start(&config).await;
    let client = client();
    let task = submit(&client, &router.base, &chat("a long one")).await;
    until(
        &router,
        "the task reached the machine",
        Duration::from_secs(10),
        || {
            let hits = sim.work_hits();
            async move { hits == 1 }
        },
    )
    .await;
    let status = router.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "SIGTERM drains and exits 0: {status}");
    let router = Router::start(&config).await;
    let t = finished(&client, &router.base, &id(&task)).await;
    assert_eq!(t["status"], "succeeded", "it finished before the exit: {t}");
    let interrupted = t["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["outcome"] == "interrupted");
    assert!(!interrupted, "a drain is no interruption: {t}");
    assert_eq!(
        sim.work_hits(),
        1,
        "it was not sent again after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sigterms_past_the_grace_queue_a_long_task_again_without_counting_interruptions() {
    let sim = Sim::start("box").await.unwrap();
    sim.set(Fault::SlowFirstByte(Duration::from_secs(60)));
    let dir = tempfile::tempdir().unwrap();
    let config = registry(&sim, dir.path(), "  shutdown_grace: 1s\n", "");
    let client = client();
    let mut router = Router::start(&config).await;
    let task = submit(&client, &router.base, &chat("a very long one")).await;
    for round in 1..=2u64 {
        until(
            &router,
            "the task reached the machine",
            Duration::from_secs(10),
            || {
                let hits = sim.work_hits();
                async move { hits == round }
            },
        )
        .await;
        let status = router.terminate(Duration::from_secs(20)).await;
        assert!(
            status.success(),
            "SIGTERM exits 0 after the grace: {status}"
        );
        if round == 2 {
            sim.set(Fault::Ok);
        }
        router = Router::start(&config).await;
        let t = get(&client, format!("{}/v1/tasks/{}", router.base, id(&task))).await;
        assert!(
            ["queued", "running", "succeeded"].contains(&t["status"].as_str().unwrap()),
            "round {round}: back in the queue, not failed: {t}"
        );
    }
    let t = finished(&client, &router.base, &id(&task)).await;
    assert_eq!(t["status"], "succeeded", "two restarts are no crash: {t}");
    let interrupted = t["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["outcome"] == "interrupted")
        .count();
    assert_eq!(interrupted, 0, "{t}");
    assert_eq!(sim.work_hits(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_do_not_grow_the_state_directory_without_bound() {
    let sim = Sim::start("box").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = registry(&sim, dir.path(), "", "  max_finished_bytes: 4MiB\n");
    let router = Router::start(&config).await;
    let client = client();
    // 120 tasks of 900 KB each, one after the other: 108 MB of requests in all.
    let padding = "p".repeat(900_000);
    let mut last = String::new();
    for n in 0..120 {
        let t = submit(&client, &router.base, &chat(&format!("{n} {padding}"))).await;
        last = id(&t);
        let t = finished(&client, &router.base, &last).await;
        assert_eq!(t["status"], "succeeded", "{t}");
    }
    let t = get(&client, format!("{}/v1/tasks/{last}", router.base)).await;
    assert_eq!(
        t["request"],
        Value::Null,
        "a finished task keeps no request: {t}"
    );
    assert!(
        t["result"]["body"]["choices"].is_array(),
        "but its result: {t}"
    );
    let size = size_on_disk(&dir.path().join("state"));
    assert!(
        size < 24 << 20,
        "the state directory holds {} MB after 108 MB of finished requests",
        size >> 20
    );
    assert_eq!(sim.work_hits(), 120);
}
