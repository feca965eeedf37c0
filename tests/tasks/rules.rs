//! docs/api.md "Tasks"'s rules, one test each, counted on the wire.

use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::lab::Lab;

async fn finished(lab: &Lab, id: &str) -> Value {
    let resp = lab.get(&format!("/v1/tasks/{id}?wait=10m")).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_task_runs_and_its_answer_is_kept_whole() {
    let lab = Lab::start("").await;
    let t = lab
        .submit(
            "fix this bug",
            json!({"metadata": {"job": "nightly"}, "priority": 5}),
        )
        .await;
    assert!(t["id"].as_str().unwrap().starts_with("tsk_"));
    assert_eq!(t["object"], "task");
    assert_eq!(t["request"]["messages"][0]["content"], "fix this bug");
    assert_eq!(t["metadata"]["job"], "nightly");
    let id = t["id"].as_str().unwrap();
    let done = finished(&lab, id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["result"]["status"], 200);
    assert_eq!(done["result"]["target"], "coder-gpu@gpu-box");
    assert_eq!(
        done["result"]["body"]["choices"][0]["message"]["content"],
        "ok from gpu-box"
    );
    // Finished, it keeps its result and drops its request: `null`, not absent.
    assert_eq!(done["request"], Value::Null);
    assert!(done.as_object().unwrap().contains_key("request"));
    assert!(done["started_at"].is_string() && done["finished_at"].is_string());
    assert_eq!(lab.work(), (1, 0, 0));
    // The list shows summaries: no request, no result.
    let list: Value = lab.get("/v1/tasks").await.json().await.unwrap();
    assert_eq!(list["data"][0]["id"], id);
    assert!(list["data"][0].get("request").is_none() && list["data"][0].get("result").is_none());
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_gets_its_parents_text_as_a_json_string_and_runs_after_it() {
    let lab = Lab::start("").await;
    let tricky = "line \"one\"\n\tline two — ünïcode ✓ {{after.0}} \\ end";
    lab.gpu.set_text(Some(tricky));
    let parent = lab.submit("write code for this function", json!({})).await;
    let pid = parent["id"].as_str().unwrap().to_string();
    let child = lab
        .post(
            "/v1/tasks",
            json!({"after": [pid], "request": {"model": "auto", "messages": [
                {"role": "user", "content": "review this code: {{after.0}}"}]}}),
        )
        .await;
    assert_eq!(child.status(), 202);
    let child: Value = child.json().await.unwrap();
    let cid = child["id"].as_str().unwrap();
    let done = finished(&lab, cid).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let sent: Value = serde_json::from_slice(&lab.gpu.last_body().unwrap()).unwrap();
    assert_eq!(
        sent["messages"][0]["content"],
        format!("review this code: {tricky}"),
        "the parent's text, whole, as a JSON string; its own placeholder not expanded"
    );
    assert_eq!(lab.work().0, 2);
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_parent_cancels_its_follow_ups_and_theirs_before_they_reach_a_machine() {
    let lab = Lab::start("").await;
    // The request is at fault: every machine refuses it.
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Status {
            code: 400,
            retry_after: None,
        });
    }
    let parent = lab.submit("fix this bug", json!({})).await;
    let pid = parent["id"].as_str().unwrap().to_string();
    let child = lab.submit("then this", json!({"after": [pid]})).await;
    let cid = child["id"].as_str().unwrap().to_string();
    assert_eq!(child["status"], "blocked");
    let grandchild = lab.submit("and this", json!({"after": [cid]})).await;
    let gid = grandchild["id"].as_str().unwrap().to_string();
    let p = finished(&lab, &pid).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["error"]["code"], "request_rejected");
    for id in [&cid, &gid] {
        let t = finished(&lab, id).await;
        assert_eq!(t["status"], "cancelled", "{t}");
        assert_eq!(t["error"]["code"], "dependency_failed");
    }
    assert_eq!(
        lab.work(),
        (1, 0, 0),
        "the parent's one try; no follow-up request reached a machine"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn attempts_are_used_only_on_machines_that_stay_up_and_then_the_task_fails() {
    let lab = Lab::start("  max_attempts: 3\n").await;
    // A single-target route: the vision route's one machine answers 500 and its breaker
    // opens at the third; only failures on a machine that stayed closed cost attempts.
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let t = lab
        .post(
            "/v1/tasks",
            json!({"route": "vision", "request": {"model": "auto", "messages": [{"role": "user", "content": "look"}]}}),
        )
        .await;
    assert_eq!(t.status(), 202);
    let t: Value = t.json().await.unwrap();
    let id = t["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let now = lab.task(&id).await;
    assert_eq!(
        now["attempts_used"], 2,
        "two failures on a closed machine; the third opened the breaker: {now}"
    );
    assert_eq!(now["status"], "waiting", "{now}");
    assert_eq!(lab.work().0, 3);
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn bad_submits_are_refused_and_change_nothing() {
    let lab = Lab::start("").await;
    let msg = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            json!({"request": {"model": "auto", "messages": msg, "stream": true}}),
            "stream",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "after": ["tsk_00000000000000000000000000"]}),
            "after[0]",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "after": ["nope"]}),
            "after[0]",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "deadline": "yesterday"}),
            "deadline",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "deadline": "2001-01-01T00:00:00Z"}),
            "has passed",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "priority": 1000}),
            "priority",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "metadata": {"k": "x".repeat(600)}}),
            "metadata",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "callback": {"url": "http://evil.example/hook"}}),
            "callback_allow",
        ),
        (
            json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "{{after.0}}"}]}}),
            "after.0",
        ),
        (
            json!({"request": {"model": "auto", "messages": msg}, "route": "nope"}),
            "route",
        ),
        (json!({"request": "hi"}), "request"),
        (
            json!({"request": {"model": "auto", "messages": msg}, "colour": "red"}),
            "colour",
        ),
    ];
    for (body, says) in cases {
        let resp = lab.post("/v1/tasks", body.clone()).await;
        assert_eq!(resp.status(), 400, "{body}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "invalid_task", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{v} should say {says}"
        );
    }
    let list: Value = lab.get("/v1/tasks").await.json().await.unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 0, "no task created");
    assert_eq!(lab.work(), (0, 0, 0));
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn twenty_concurrent_submits_with_one_key_make_one_task() {
    let lab = Lab::start("").await;
    let body = json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "fix this bug"}]}});
    let sends = (0..20).map(|_| {
        lab.client
            .post(format!("{}/v1/tasks", lab.base))
            .header("idempotency-key", "nightly-42")
            .json(&body)
            .send()
    });
    let answers = futures_util::future::join_all(sends).await;
    let mut ids = std::collections::HashSet::new();
    let mut replayed = 0;
    for a in answers {
        let a = a.unwrap();
        assert!(matches!(a.status().as_u16(), 200 | 202), "{}", a.status());
        if a.headers().get("idempotent-replayed").is_some() {
            assert_eq!(a.status(), 200);
            replayed += 1;
        }
        let v: Value = a.json().await.unwrap();
        ids.insert(v["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 1, "one task");
    assert_eq!(replayed, 19);
    let other = lab
        .client
        .post(format!("{}/v1/tasks", lab.base))
        .header("idempotency-key", "nightly-42")
        .json(&json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "something else"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 422);
    let id = ids.into_iter().next().unwrap();
    finished(&lab, &id).await;
    assert_eq!(lab.work(), (1, 0, 0), "one task, one request");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deadline_expires_a_waiting_task_and_cancel_aborts_a_running_one() {
    let lab = Lab::start("").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Hang);
    }
    let t = lab.submit("fix this bug", json!({"deadline": "5m"})).await;
    let id = t["id"].as_str().unwrap().to_string();
    let done = finished(&lab, &id).await;
    assert_eq!(done["status"], "expired", "{done}");
    assert_eq!(done["error"]["code"], "deadline_exceeded");

    // A slow generation, cancelled while it runs: its attempt is aborted, the breaker
    // hears nothing of it.
    let lab2 = Lab::start("").await;
    lab2.gpu.set(Fault::SlowFirstByte(Duration::from_secs(300)));
    let t = lab2.submit("fix this bug", json!({})).await;
    let id = t["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(lab2.task(&id).await["status"], "running");
    let c = lab2
        .post(&format!("/v1/tasks/{id}/cancel"), json!({}))
        .await;
    assert_eq!(c.status(), 200);
    let c: Value = c.json().await.unwrap();
    assert_eq!(c["status"], "cancelled");
    assert_eq!(lab2.phase("gpu-box"), "closed");
    let f = lab2.svc.fleet();
    let gpu = f
        .machines
        .snapshot(f.registry.machine_index("gpu-box").unwrap());
    assert_eq!(gpu.breaker.failures, 0, "a cancel is no failure");
    let again = lab2
        .post(&format!("/v1/tasks/{id}/cancel"), json!({}))
        .await;
    assert_eq!(again.status(), 409);
    lab.stop().await;
    lab2.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_429_queue_full() {
    let lab = Lab::start("  max_queued: 2\n").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Hang);
    }
    lab.submit("a", json!({})).await;
    lab.submit("b", json!({})).await;
    let third = lab
        .post(
            "/v1/tasks",
            json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "c"}]}}),
        )
        .await;
    assert_eq!(third.status(), 429);
    let v: Value = third.json().await.unwrap();
    assert_eq!(v["error"]["code"], "queue_full");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn acknowledged_tasks_survive_a_crash_and_finish_once() {
    let lab = Lab::start("").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Hang);
    }
    let mut ids = Vec::new();
    for i in 0..20 {
        let t = lab.submit(&format!("fix bug {i}"), json!({})).await;
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (gpu, cpu, local, dir) = lab.crash().await;
    for s in [&gpu, &cpu, &local] {
        s.set(Fault::Ok);
        s.reset_counts();
    }
    let lab = Lab::on(gpu, cpu, local, dir, "").await;
    lab.settle(Duration::from_secs(1), Duration::from_secs(3600))
        .await;
    assert_eq!(
        lab.statuses(&ids).await,
        vec![(labrouter::outcome::TaskStatus::Succeeded, 20)]
    );
    let w = lab.work();
    assert_eq!(w.0 + w.1 + w.2, 20, "each task ran once after the restart");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn higher_priority_runs_first_and_max_running_bounds_the_tasks_in_flight() {
    let lab = Lab::start("  max_running: 1\n").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::SlowFirstByte(Duration::from_secs(10)));
    }
    let first = lab.submit("fix bug a", json!({})).await;
    let low = lab.submit("fix bug b", json!({"priority": -5})).await;
    let high = lab.submit("fix bug c", json!({"priority": 50})).await;
    let id = |t: &Value| t["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        lab.svc.tasks().unwrap().counts().running,
        1,
        "max_running: 1"
    );
    assert_eq!(lab.task(&id(&first)).await["status"], "running");
    // The first finishes at 10 s; the high-priority task, submitted last, goes next.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(lab.task(&id(&first)).await["status"], "succeeded");
    assert_eq!(lab.task(&id(&high)).await["status"], "running");
    assert_eq!(lab.task(&id(&low)).await["status"], "queued");
    assert_eq!(lab.svc.tasks().unwrap().counts().running, 1);
    lab.settle(Duration::from_secs(1), Duration::from_secs(120))
        .await;
    assert_eq!(lab.work().0 + lab.work().1 + lab.work().2, 3);
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn tasks_leave_a_machine_one_slot_for_interactive_requests() {
    // Two slots on every machine and two task slots: tasks still take only one.
    let lab = Lab::start_with("", "  max_concurrency: 2\n  task_slots: 2\n").await;
    lab.gpu.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let vision = |text: &str| json!({"route": "vision", "request": {"model": "auto", "messages": [{"role": "user", "content": text}]}});
    for i in 0..3 {
        let r = lab.post("/v1/tasks", vision(&format!("look {i}"))).await;
        assert_eq!(r.status(), 202);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        lab.svc.tasks().unwrap().counts().running,
        1,
        "one of gpu-box's two slots is left to interactive requests"
    );
    lab.gpu.set(Fault::Ok);
    let resp = lab
        .client
        .post(format!("{}/v1/chat/completions", lab.base))
        .header("x-labrouter-route", "vision")
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "now"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        200,
        "the interactive request was not kept waiting"
    );
    assert_eq!(
        resp.headers()["x-labrouter-target"].to_str().unwrap(),
        "vision-gpu@gpu-box"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_task_interrupted_twice_is_failed_rather_than_run_a_third_time() {
    let lab = Lab::start("").await;
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::SlowFirstByte(Duration::from_secs(600)));
    }
    let t = lab.submit("fix this bug", json!({})).await;
    let id = t["id"].as_str().unwrap().to_string();
    lab.running_on_disk(&id, 0).await;
    lab.sent(1).await;
    let (gpu, cpu, local, dir) = lab.crash().await;
    let lab = Lab::on(gpu, cpu, local, dir, "").await;
    lab.running_on_disk(&id, 1).await;
    lab.sent(2).await;
    let again = lab.task(&id).await;
    assert_eq!(again["status"], "running", "queued again once: {again}");
    assert!(
        again["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["outcome"] == "interrupted"),
        "{again}"
    );
    let (gpu, cpu, local, dir) = lab.crash().await;
    let lab = Lab::on(gpu, cpu, local, dir, "").await;
    let done = lab.task(&id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "interrupted");
    assert_eq!(
        lab.work(),
        (2, 0, 0),
        "it ran twice and was not sent a third time"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_parent_without_text_cancels_the_follow_ups_that_use_it() {
    let lab = Lab::start("").await;
    let parent = lab
        .post(
            "/v1/tasks",
            json!({"endpoint": "embeddings", "request": {"model": "small", "input": "vectors"}}),
        )
        .await;
    assert_eq!(parent.status(), 202);
    let parent: Value = parent.json().await.unwrap();
    let pid = parent["id"].as_str().unwrap().to_string();
    let child = lab
        .submit("summarise: {{after.0}}", json!({"after": [pid]}))
        .await;
    let done = finished(&lab, child["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(done["error"]["code"], "dependency_unusable");
    assert_eq!(lab.work(), (0, 0, 1), "only the parent reached a machine");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn same_model_waits_for_its_model_where_chain_degrades() {
    let lab = Lab::start("").await;
    lab.gpu.set(Fault::Refuse);
    let chain = lab.submit("fix this bug", json!({})).await;
    let same = lab
        .submit("fix this bug too", json!({"accept": "same_model"}))
        .await;
    let done = finished(&lab, chain["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["result"]["target"], "coder-cpu@ubuntu-box", "degraded");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let waiting = lab.task(same["id"].as_str().unwrap()).await;
    assert_eq!(
        waiting["status"], "waiting",
        "only qwen3-coder:30b will do: {waiting}"
    );
    lab.gpu.set(Fault::Ok);
    let done = finished(&lab, same["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["result"]["target"], "coder-gpu@gpu-box");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn tasks_belong_to_the_key_that_submitted_them() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_TASK_KEYS", "key-one,key-two") };
    let lab = Lab::start_full("", "", "  api_keys_env: LABROUTER_TEST_TASK_KEYS\n").await;
    let send = |key: &'static str, req: reqwest::RequestBuilder| req.bearer_auth(key).send();
    let t = send(
        "key-one",
        lab.client.post(format!("{}/v1/tasks", lab.base)).json(
            &json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "mine"}]}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(t.status(), 202);
    let t: Value = t.json().await.unwrap();
    let id = t["id"].as_str().unwrap();
    let mine = send(
        "key-one",
        lab.client.get(format!("{}/v1/tasks/{id}", lab.base)),
    )
    .await
    .unwrap();
    assert_eq!(mine.status(), 200);
    let theirs = send(
        "key-two",
        lab.client.get(format!("{}/v1/tasks/{id}", lab.base)),
    )
    .await
    .unwrap();
    assert_eq!(theirs.status(), 404, "another key does not see it");
    let list: Value = send("key-two", lab.client.get(format!("{}/v1/tasks", lab.base)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 0);
    let cancel = send(
        "key-two",
        lab.client
            .post(format!("{}/v1/tasks/{id}/cancel", lab.base)),
    )
    .await
    .unwrap();
    assert_eq!(cancel.status(), 404, "nor cancel it");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_probe_role_rotates_among_waiting_tasks() {
    let lab = Lab::start("").await;
    // The vision route has one machine: open its breaker with three failures.
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let vision = |text: &str| json!({"route": "vision", "max_attempts": 10, "request": {"model": "auto", "messages": [{"role": "user", "content": text}]}});
    let a = lab.post("/v1/tasks", vision("task a")).await;
    assert_eq!(a.status(), 202);
    let b = lab.post("/v1/tasks", vision("task b")).await;
    assert_eq!(b.status(), 202);
    let sent = |lab: &Lab| -> String {
        let v: Value = serde_json::from_slice(&lab.gpu.last_body().unwrap()).unwrap();
        v["messages"][0]["content"].as_str().unwrap().to_string()
    };
    // Both wait behind the open breaker; each cooldown's end sends one probe, and a
    // task whose probe failed goes behind the other.
    let mut probes = Vec::new();
    let mut seen = lab.gpu.work_hits();
    for _ in 0..(40 * 60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = lab.gpu.work_hits();
        if now > seen && lab.phase("gpu-box") == "open" && seen >= 3 {
            probes.push(sent(&lab));
        }
        seen = now;
        if probes.len() == 4 {
            break;
        }
    }
    assert_eq!(probes.len(), 4, "one probe per cooldown: {probes:?}");
    assert_ne!(probes[0], probes[1], "the probe role rotates: {probes:?}");
    assert_ne!(probes[1], probes[2], "{probes:?}");
    assert_ne!(probes[2], probes[3], "{probes:?}");
    lab.stop().await;
}
