//! `Idempotency-Key` on the wire (docs/api.md "Tasks"): one generation per key, counted at the machine;
//! replays marked `idempotent-replayed: true` for 24 h; the router's own failures not kept.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::{json, Value};

use crate::support::{header, registry_yaml_with, serve, TestLab};

const DAY: Duration = Duration::from_secs(86_400);

fn chat(text: &str) -> Value {
    json!({"model": "small", "messages": [{"role": "user", "content": text}]})
}

/// POSTs `body` as a chat completion to `base` with `Idempotency-Key: key`.
async fn send(
    client: &reqwest::Client,
    base: &str,
    bearer: Option<&str>,
    key: &str,
    body: &Value,
) -> reqwest::Response {
    let mut req = client
        .post(format!("{base}/v1/chat/completions"))
        .header("idempotency-key", key)
        .json(body);
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    req.send().await.expect("router answered")
}

async fn keyed(t: &TestLab, key: &str, body: &Value) -> reqwest::Response {
    send(&t.client, &t.base, None, key, body).await
}

fn replayed(resp: &reqwest::Response) -> bool {
    header(resp, "idempotent-replayed") == "true"
}

/// Waits (on the paused clock, 10 ms at a time) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// Lets requests on their way reach the router (a paused second, 10 ms at a time).
async fn settle() {
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `n` copies of the same keyed request, sent at once; answered (status, replayed, body).
async fn concurrently(t: &TestLab, n: usize, key: &str, body: &Value) -> Vec<(u16, bool, String)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, base) = (t.client.clone(), t.base.clone());
            let (key, body) = (key.to_string(), body.clone());
            tokio::spawn(async move {
                let resp = send(&client, &base, None, &key, &body).await;
                let (status, again) = (resp.status().as_u16(), replayed(&resp));
                (status, again, resp.text().await.unwrap())
            })
        })
        .collect();
    until("the first reached the machine", || t.local.work_hits() == 1).await;
    settle().await;
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn twenty_identical_keyed_requests_at_once_reach_the_machine_once() {
    let t = TestLab::start().await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let body = chat("hello");
    let answers = concurrently(&t, 20, "k-twenty", &body).await;
    assert_eq!(t.work(), (0, 0, 1), "one generation");
    assert!(answers.iter().all(|(s, _, _)| *s == 200), "{answers:?}");
    assert!(
        answers.iter().all(|(_, _, b)| *b == answers[0].2),
        "one answer"
    );
    assert!(answers[0].2.contains("ok from local"));
    let replays = answers.iter().filter(|(_, r, _)| *r).count();
    assert_eq!(replays, 19, "all but the one that generated it");
    // Once finished, a replay reaches no machine.
    let resp = keyed(&t, "k-twenty", &body).await;
    assert_eq!(resp.status(), 200);
    assert!(replayed(&resp));
    assert_eq!(resp.text().await.unwrap(), answers[0].2);
    assert_eq!(t.work(), (0, 0, 1));
    // Another key is another request.
    let resp = keyed(&t, "k-other", &body).await;
    assert!(!replayed(&resp));
    assert_eq!(t.work(), (0, 0, 2));
}

#[tokio::test(start_paused = true)]
async fn the_same_key_with_another_body_is_422_in_flight_and_after() {
    let t = TestLab::start().await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let first = {
        let (client, base) = (t.client.clone(), t.base.clone());
        tokio::spawn(async move { send(&client, &base, None, "k-body", &chat("hello")).await })
    };
    until("the first reached the machine", || t.local.work_hits() == 1).await;
    let resp = keyed(&t, "k-body", &chat("something else")).await;
    assert_eq!(resp.status(), 422, "while the first is in flight");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "idempotency_key_reused");
    assert!(
        !first.is_finished(),
        "answered without waiting for the first"
    );
    assert_eq!(first.await.unwrap().status(), 200);
    let resp = keyed(&t, "k-body", &chat("something else")).await;
    assert_eq!(resp.status(), 422, "after it finished");
    // The same request on another endpoint is another request too.
    let resp = t
        .client
        .post(format!("{}/v1/completions", t.base))
        .header("idempotency-key", "k-body")
        .json(&chat("hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn an_answer_is_replayed_for_24_hours_then_generated_again() {
    let t = TestLab::start().await;
    let body = chat("hello");
    assert!(!replayed(&keyed(&t, "k-day", &body).await));
    tokio::time::sleep(DAY - Duration::from_secs(60)).await;
    let resp = keyed(&t, "k-day", &body).await;
    assert!(replayed(&resp), "still within 24 h");
    assert_eq!(t.work(), (0, 0, 1));
    tokio::time::sleep(Duration::from_secs(61)).await;
    let resp = keyed(&t, "k-day", &body).await;
    assert_eq!(resp.status(), 200);
    assert!(!replayed(&resp), "24 h later: a new generation");
    assert_eq!(t.work(), (0, 0, 2));
    assert!(
        replayed(&keyed(&t, "k-day", &body).await),
        "and that one is kept"
    );
    assert_eq!(t.work(), (0, 0, 2));
}

#[tokio::test(start_paused = true)]
async fn a_router_side_failure_is_not_kept_so_a_retry_succeeds() {
    let t = TestLab::start().await;
    let body = chat("hello");
    t.local.set(Fault::Refuse);
    let resp = keyed(&t, "k-outage", &body).await;
    assert!(resp.status().is_server_error(), "{}", resp.status());
    assert!(!replayed(&resp));
    t.local.set(Fault::Ok);
    let resp = keyed(&t, "k-outage", &body).await;
    assert_eq!(resp.status(), 200, "the failure was not kept");
    assert!(!replayed(&resp));
    assert_eq!(t.work(), (0, 0, 1));
    assert!(replayed(&keyed(&t, "k-outage", &body).await));
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_machines_400_passed_through_is_replayed() {
    let t = TestLab::start().await;
    let body = chat("hello");
    t.local.set(Fault::Status {
        code: 400,
        retry_after: None,
    });
    let resp = keyed(&t, "k-400", &body).await;
    assert_eq!(resp.status(), 400);
    assert!(!replayed(&resp));
    let skipped = header(&resp, "x-labrouter-skipped");
    assert!(!skipped.is_empty());
    let first = resp.text().await.unwrap();
    assert!(
        first.contains("simulated"),
        "the machine's own answer: {first}"
    );
    t.local.set(Fault::Ok);
    let resp = keyed(&t, "k-400", &body).await;
    assert_eq!(resp.status(), 400, "the machine's answer, kept");
    assert!(replayed(&resp));
    assert_eq!(header(&resp, "x-labrouter-route"), "small");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        skipped,
        "its headers kept too"
    );
    assert!(header(&resp, "content-type").starts_with("application/json"));
    assert_eq!(resp.text().await.unwrap(), first);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_goes_away_does_not_cancel_the_keyed_generation() {
    let t = TestLab::start().await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let body = chat("hello");
    let gone = {
        let (client, base, body) = (t.client.clone(), t.base.clone(), body.clone());
        tokio::spawn(async move { send(&client, &base, None, "k-gone", &body).await })
    };
    until("the request reached the machine", || {
        t.local.work_hits() == 1
    })
    .await;
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    // The generation finishes without its client, and is kept.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let resp = keyed(&t, "k-gone", &body).await;
    assert_eq!(resp.status(), 200);
    assert!(replayed(&resp));
    assert!(resp.text().await.unwrap().contains("ok from local"));
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn keys_belong_to_the_api_key_that_sent_them() {
    let var = "LABROUTER_E2E_IDEMPOTENCY_KEYS";
    // SAFETY of set_var: this variable is read by this test alone.
    std::env::set_var(var, "k-one, k-two");
    let t = TestLab::start_custom(&format!("  api_keys_env: {var}\n"), "").await;
    let body = chat("hello");
    let as_key = |bearer: &'static str| send(&t.client, &t.base, Some(bearer), "shared", &body);
    assert!(!replayed(&as_key("k-one").await));
    assert!(
        !replayed(&as_key("k-two").await),
        "another owner, another answer"
    );
    assert_eq!(t.work(), (0, 0, 2));
    assert!(replayed(&as_key("k-one").await));
    assert!(replayed(&as_key("k-two").await));
    assert_eq!(t.work(), (0, 0, 2));
}

#[tokio::test(start_paused = true)]
async fn answers_over_1_mib_are_served_but_not_replayed() {
    let t = TestLab::start().await;
    let body = chat("hello");
    let mib = 1 << 20;
    t.local.set(Fault::Huge(mib));
    let resp = keyed(&t, "k-mib", &body).await;
    assert_eq!(resp.bytes().await.unwrap().len(), mib);
    let resp = keyed(&t, "k-mib", &body).await;
    assert!(replayed(&resp), "1 MiB is kept");
    assert_eq!(resp.bytes().await.unwrap().len(), mib);
    assert_eq!(t.work(), (0, 0, 1));
    t.local.set(Fault::Huge(mib + 1));
    for _ in 0..2 {
        let resp = keyed(&t, "k-over", &body).await;
        assert_eq!(resp.status(), 200);
        assert!(!replayed(&resp));
        assert_eq!(resp.bytes().await.unwrap().len(), mib + 1, "served whole");
    }
    assert_eq!(t.work(), (0, 0, 3), "not kept: generated twice");
}

#[tokio::test(start_paused = true)]
async fn a_streamed_request_an_empty_key_and_a_256_character_key_are_400() {
    let t = TestLab::start().await;
    let code = |v: Value| v["error"]["code"].as_str().unwrap_or("").to_string();
    let streamed =
        json!({"model": "small", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let resp = keyed(&t, "k-stream", &streamed).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(code(v.clone()), "idempotency_key_on_stream");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("non-streamed"));
    for key in [String::new(), "k".repeat(256)] {
        let resp = keyed(&t, &key, &chat("hello")).await;
        assert_eq!(resp.status(), 400, "key of {} characters", key.len());
        assert_eq!(code(resp.json().await.unwrap()), "invalid_idempotency_key");
    }
    assert_eq!(t.work(), (0, 0, 0), "none reached a machine");
    let resp = keyed(&t, &"k".repeat(255), &chat("hello")).await;
    assert_eq!(resp.status(), 200, "255 characters is a key");
}

/// A lab as [`TestLab::start`], whose service keeps its answers in a store under `dir`.
async fn remembering(sims: Option<(&Sim, &Sim, &Sim)>, dir: &std::path::Path) -> TestLab {
    let (gpu, cpu, local) = match sims {
        Some((g, c, l)) => (g.clone(), c.clone(), l.clone()),
        None => (
            Sim::start("gpu-box").await.unwrap(),
            Sim::start("ubuntu-box").await.unwrap(),
            Sim::start("local").await.unwrap(),
        ),
    };
    let state = format!("  state_dir: {}\n", dir.display());
    let yaml = registry_yaml_with(&gpu, &cpu, &local, &state, "");
    let registry = Registry::parse(&yaml, "test.yaml").unwrap();
    let svc = Arc::new(Service::remembering(registry, None).unwrap());
    let (base, lab) = serve(Arc::clone(&svc)).await;
    TestLab {
        gpu,
        cpu,
        local,
        svc,
        lab,
        base,
        client: reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    }
}

#[tokio::test(start_paused = true)]
async fn with_a_store_answers_are_kept_on_disk_across_a_restart_for_24_hours() {
    let dir = tempfile::tempdir().unwrap();
    let t = remembering(None, dir.path()).await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let body = chat("hello");
    let answers = concurrently(&t, 5, "k-disk", &body).await;
    assert_eq!(t.work(), (0, 0, 1));
    assert_eq!(answers.iter().filter(|(_, r, _)| *r).count(), 4);
    t.local.set(Fault::Ok);
    assert!(replayed(&keyed(&t, "k-disk", &body).await));
    // Another service on the same state_dir: the answer was on disk.
    let again = remembering(Some((&t.gpu, &t.cpu, &t.local)), dir.path()).await;
    let resp = keyed(&again, "k-disk", &body).await;
    assert!(replayed(&resp), "replayed from the store");
    assert_eq!(resp.text().await.unwrap(), answers[0].2);
    assert_eq!(keyed(&again, "k-disk", &chat("other")).await.status(), 422);
    assert_eq!(t.work(), (0, 0, 1));
    // 24 h later the stored answer is ignored.
    tokio::time::sleep(DAY + Duration::from_secs(1)).await;
    let resp = keyed(&t, "k-disk", &body).await;
    assert!(!replayed(&resp));
    assert_eq!(t.work(), (0, 0, 2));
    assert!(
        replayed(&keyed(&again, "k-disk", &body).await),
        "the new one"
    );
    assert_eq!(t.work(), (0, 0, 2));
}
