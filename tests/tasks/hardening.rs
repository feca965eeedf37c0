//! The task layer under hostile input and restarts: each test protects one promise an
//! audit found broken, counted on the wire, on the paused clock.

use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::lab::Lab;

fn id(t: &Value) -> String {
    t["id"].as_str().unwrap().to_string()
}

async fn finished(lab: &Lab, id: &str) -> Value {
    let resp = lab.get(&format!("/v1/tasks/{id}?wait=10m")).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// Runs SQL on the lab's store file, as another process (or a kill at the wrong moment)
/// would leave it.
fn edit_store(dir: &tempfile::TempDir, sql: &str) {
    let conn = rusqlite::Connection::open(dir.path().join("labrouter.db")).unwrap();
    conn.execute_batch(sql).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_over_max_request_body_once_filled_fails_naming_its_size() {
    let lab = Lab::start("").await;
    let text = "y".repeat(20_000);
    lab.gpu.set_text(Some(&text));
    let parent = lab.submit("fix this bug", json!({})).await;
    assert_eq!(finished(&lab, &id(&parent)).await["status"], "succeeded");
    // 5,000 placeholders fit the lab's 64 KiB; filled in they would be 100 MB.
    let request = json!({"model": "auto", "messages": [
        {"role": "user", "content": "{{after.0}}".repeat(5_000)}]});
    let request_len = serde_json::to_vec(&request).unwrap().len();
    let child = lab
        .post(
            "/v1/tasks",
            json!({"after": [id(&parent)], "request": request}),
        )
        .await;
    assert_eq!(child.status(), 202);
    let child: Value = child.json().await.unwrap();
    let done = finished(&lab, &id(&child)).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["code"], "invalid_request");
    let message = done["error"]["message"].as_str().unwrap();
    let filled = request_len + 5_000 * (20_000 - "{{after.0}}".len());
    assert!(
        message.contains(&filled.to_string()) && message.contains("tasks.max_request_body"),
        "{message}"
    );
    assert_eq!(lab.work(), (1, 0, 0), "the follow-up reached no machine");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_of_a_cancelled_parent_is_cancelled_after_a_restart_not_run() {
    let lab = Lab::start("").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Refuse);
    }
    let parent = lab.submit("fix this bug", json!({})).await;
    let child = lab
        .submit("then review it", json!({"after": [id(&parent)]}))
        .await;
    assert_eq!(child["status"], "blocked");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (gpu, cpu, local, dir) = lab.crash().await;
    // The parent's end committed, its follow-up's cascade not: a kill between the two.
    edit_store(
        &dir,
        &format!(
            "UPDATE tasks SET status = 'cancelled', finished_ms = created_ms + 1000 WHERE id = '{}'",
            id(&parent)
        ),
    );
    for s in [&gpu, &cpu, &local] {
        s.set(Fault::Ok);
    }
    let lab = Lab::on(gpu, cpu, local, dir, "").await;
    let done = finished(&lab, &id(&child)).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(done["error"]["code"], "dependency_failed", "{done}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        lab.work(),
        (0, 0, 0),
        "a doomed follow-up never reaches a machine"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_parent_is_kept_while_a_follow_up_waits_on_it_whatever_tasks_keep() {
    let lab = Lab::start("").await;
    lab.gpu.set_text(Some("the first answer"));
    let first = lab.submit("fix this bug", json!({})).await;
    assert_eq!(finished(&lab, &id(&first)).await["status"], "succeeded");
    // The second parent waits: the vision route's one machine is down.
    lab.gpu.set(Fault::Refuse);
    let second = lab
        .post(
            "/v1/tasks",
            json!({"route": "vision", "request": {"model": "auto", "messages": [{"role": "user", "content": "look"}]}}),
        )
        .await;
    assert_eq!(second.status(), 202);
    let second: Value = second.json().await.unwrap();
    let child = lab
        .submit(
            "summarise: {{after.0}}",
            json!({"after": [id(&first), id(&second)]}),
        )
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    // tasks.keep passes for every finished task: the first parent is still needed.
    lab.svc.store().unwrap().prune_tasks(Duration::ZERO);
    lab.svc.store().unwrap().flush(Duration::from_secs(5));
    lab.gpu.set(Fault::Ok);
    let done = finished(&lab, &id(&child)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let sent: Value = serde_json::from_slice(&lab.local.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["messages"][0]["content"],
        "summarise: the first answer"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_finished_task_keeps_its_result_but_not_its_request() {
    let lab = Lab::start("").await;
    let t = lab.submit("fix this bug", json!({})).await;
    assert_eq!(t["request"]["messages"][0]["content"], "fix this bug");
    let done = finished(&lab, &id(&t)).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["request"], Value::Null, "{done}");
    assert!(done["result"]["body"]["choices"].is_array(), "{done}");
    let store = lab.svc.store().unwrap();
    store.flush(Duration::from_secs(5));
    let tid: labrouter::tasks::TaskId = id(&t).parse().unwrap();
    let kept = store
        .read(move |c| labrouter::store::tasks::request(c, &tid))
        .unwrap();
    assert!(
        kept.is_none_or(|b| b.is_empty()),
        "the body is gone from disk"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn finished_tasks_are_bounded_in_number_the_oldest_pruned_first() {
    let lab = Lab::start("  max_finished: 5\n").await;
    let mut ids = Vec::new();
    for n in 0..12 {
        let t = lab.submit(&format!("fix bug {n}"), json!({})).await;
        assert_eq!(finished(&lab, &id(&t)).await["status"], "succeeded");
        ids.push(id(&t));
    }
    lab.svc.store().unwrap().flush(Duration::from_secs(5));
    let list: Value = lab.get("/v1/tasks?limit=100").await.json().await.unwrap();
    let listed: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let newest: Vec<&str> = ids.iter().rev().take(5).map(String::as_str).collect();
    assert_eq!(listed, newest, "the five newest are kept");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_idempotent_resend_on_a_full_queue_gets_its_task_not_429() {
    let lab = Lab::start("  max_queued: 1\n").await;
    lab.gpu.set(Fault::Hang);
    let body = json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "fix this bug"}]}});
    let send = || {
        lab.client
            .post(format!("{}/v1/tasks", lab.base))
            .header("idempotency-key", "nightly-1")
            .json(&body)
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    let again = send().await.unwrap();
    assert_eq!(
        again.status(),
        200,
        "the queue is full, but this is its task"
    );
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn one_key_cannot_fill_the_queue_for_everyone() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_QUOTA_KEYS", "key-one,key-two") };
    let lab = Lab::start_full(
        "  max_queued_per_key: 2\n",
        "",
        "  api_keys_env: LABROUTER_TEST_QUOTA_KEYS\n",
    )
    .await;
    lab.gpu.set(Fault::Hang);
    let body = json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "fix this bug"}]}});
    let send = |key: &'static str| {
        lab.client
            .post(format!("{}/v1/tasks", lab.base))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    for _ in 0..2 {
        assert_eq!(send("key-one").await.unwrap().status(), 202);
    }
    let third = send("key-one").await.unwrap();
    assert_eq!(third.status(), 429);
    let v: Value = third.json().await.unwrap();
    assert_eq!(v["error"]["code"], "queue_full");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tasks.max_queued_per_key"),
        "{v}"
    );
    assert_eq!(send("key-two").await.unwrap().status(), 202, "another key");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn status_shows_each_key_only_its_own_task_ids_and_messages() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_STATUS_KEYS", "key-one,key-two") };
    let lab = Lab::start_full("", "", "  api_keys_env: LABROUTER_TEST_STATUS_KEYS\n").await;
    lab.local.set(Fault::Refuse);
    let sent = lab
        .client
        .post(format!("{}/v1/tasks", lab.base))
        .bearer_auth("key-one")
        .json(&json!({"deadline": "30s", "request": {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    let t: Value = sent.json().await.unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let lab = &lab;
    let status = |key: &'static str| async move {
        let v: Value = lab
            .client
            .get(format!("{}/status", lab.base))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["tasks"].clone()
    };
    let mine = status("key-one").await;
    assert_eq!(mine["waiting"], 1, "{mine}");
    assert_eq!(mine["oldest_waiting"]["id"], t["id"], "{mine}");
    let theirs = status("key-two").await;
    assert_eq!(theirs["waiting"], 1, "counts are the router's: {theirs}");
    assert_eq!(theirs["oldest_waiting"], Value::Null, "{theirs}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let mine = status("key-one").await;
    assert_eq!(mine["recent_failures"][0]["id"], t["id"], "{mine}");
    let theirs = status("key-two").await;
    assert_eq!(theirs["expired_24h"], 1, "{theirs}");
    assert_eq!(theirs["recent_failures"], json!([]), "{theirs}");
}
