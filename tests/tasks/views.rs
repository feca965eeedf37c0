//! Tasks seen everywhere (docs/api.md "Tasks"): `/status.tasks`, `/metrics`, `labrouter status`'s line
//! and the daily digest, all read from one lab whose chat route goes down and comes back.

use std::time::Duration;

use jiff::Timestamp;
use labrouter::outcome::{Phase, TaskStatus};
use labrouter::status::{table, View};
use labrouter::telegram::digest::{self, Host, Input, MachineNow};
use serde_json::{json, Value};

use crate::lab::Lab;

async fn status(lab: &Lab) -> Value {
    let resp = lab.get("/status").await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

async fn tasks(lab: &Lab) -> Value {
    status(lab).await["tasks"].clone()
}

fn counts(t: &Value) -> [u64; 8] {
    [
        "queued",
        "waiting",
        "running",
        "blocked",
        "succeeded_24h",
        "failed_24h",
        "expired_24h",
        "cancelled_24h",
    ]
    .map(|k| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}")))
}

fn id(task: &Value) -> String {
    task["id"].as_str().unwrap().to_string()
}

#[tokio::test(start_paused = true)]
async fn status_metrics_the_cli_and_the_digest_count_the_tasks() {
    let lab = Lab::start("").await;
    let t = tasks(&lab).await;
    assert_eq!(counts(&t), [0; 8], "{t}");
    assert_eq!(t["oldest_waiting"], Value::Null);
    assert_eq!(t["oldest_waiting_s"], Value::Null);
    assert_eq!(t["recent_failures"], json!([]));

    // Served at once on the code route.
    lab.submit("fix this bug", json!({})).await;
    lab.settle(Duration::from_secs(1), Duration::from_secs(60))
        .await;

    // The chat route's only machine is opened by hand: its tasks wait. The first is walked
    // and held back; the others wait behind it, unwalked, whether they were routed before
    // or after it was held back; one of them has 30 s to live, and one is cancelled.
    let resp = lab
        .post(
            "/admin/breakers/local/open",
            json!({"by": "test", "why": "tasks seen everywhere"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let head = id(&lab.submit("hello one", json!({})).await);
    let behind = id(&lab.submit("hello two", json!({})).await);
    let doomed = id(&lab.submit("hello three", json!({"deadline": "30s"})).await);
    let dropped = id(&lab.submit("hello four", json!({})).await);
    let resp = lab
        .post(&format!("/v1/tasks/{dropped}/cancel"), json!({}))
        .await;
    assert_eq!(resp.status(), 200);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let t = tasks(&lab).await;
    assert_eq!(counts(&t), [0, 3, 0, 0, 1, 0, 0, 1], "{t}");
    assert_eq!(t["oldest_waiting"]["id"], head.as_str(), "{t}");
    assert!(
        t["oldest_waiting"]["waiting_for"]
            .as_str()
            .unwrap()
            .contains("held back"),
        "{t}"
    );
    assert!(t["oldest_waiting"]["since"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    assert!(t["oldest_waiting_s"].is_u64(), "{t}");
    assert_eq!(t["recent_failures"], json!([]), "a cancel is no failure");

    // `/metrics`: the gauges as the queue has them now, the wait histogram described.
    let text = lab.get("/metrics").await.text().await.unwrap();
    let has = |needle: &str| text.lines().any(|l| l.starts_with(needle));
    for line in [
        r#"labrouter_tasks{status="queued"} 0"#,
        r#"labrouter_tasks{status="waiting"} 3"#,
        r#"labrouter_tasks{status="running"} 0"#,
        r#"labrouter_tasks{status="blocked"} 0"#,
        "# HELP labrouter_tasks ",
        "# TYPE labrouter_task_wait_seconds histogram",
        "# HELP labrouter_task_wait_seconds ",
        r#"labrouter_task_wait_seconds_bucket{le="86400"}"#,
        "labrouter_task_wait_seconds_count ",
    ] {
        assert!(has(line), "/metrics lacks {line}:\n{text}");
    }

    // Its deadline passes while it waits: expired, and listed as the last failure.
    tokio::time::sleep(Duration::from_secs(31)).await;
    let t = tasks(&lab).await;
    assert_eq!(counts(&t), [0, 2, 0, 0, 1, 0, 1, 1], "{t}");
    let f = &t["recent_failures"][0];
    assert_eq!(f["id"], doomed.as_str(), "{t}");
    assert_eq!(f["status"], "expired");
    assert_eq!(f["code"], "deadline_exceeded");
    assert!(f["message"].as_str().unwrap().contains("deadline"));

    // The outage ends 32 s after the tasks came: stored times follow the paused clock, so
    // the digest counts these waits (a second or more) with no real sleep.
    let resp = lab
        .post("/admin/breakers/local/close", json!({"by": "test"}))
        .await;
    assert_eq!(resp.status(), 200);
    lab.settle(Duration::from_secs(1), Duration::from_secs(120))
        .await;
    let wire = status(&lab).await;
    let t = &wire["tasks"];
    assert_eq!(counts(t), [0, 0, 0, 0, 3, 0, 1, 1], "{t}");
    assert_eq!(t["oldest_waiting"], Value::Null);
    assert_eq!(t["oldest_waiting_s"], Value::Null);

    // `labrouter status` reads the same JSON.
    let view: View = serde_json::from_value(wire.clone()).unwrap();
    let printed = table(&view);
    assert!(
        printed.ends_with(
            "\ntasks: 0 queued, 0 waiting, 0 running, 0 blocked; \
             last 24 h: 3 succeeded, 0 failed, 1 expired, 1 cancelled\n"
        ),
        "{printed}"
    );

    // The digest, from the store: finished by status, the two that waited the outage out
    // (the head held back by a walk, the one waiting behind it), the one that expired.
    assert!(lab.svc.store().unwrap().flush(Duration::from_secs(5)));
    let path = lab.dir.path().join(labrouter::store::FILE);
    let now = Timestamp::now();
    let stored = labrouter::telegram::read_store(&path, now).unwrap();
    let day = stored.tasks.as_ref().expect("the store has tasks");
    assert_eq!(
        day.finished,
        vec![
            (TaskStatus::Succeeded, 3),
            (TaskStatus::Cancelled, 1),
            (TaskStatus::Expired, 1)
        ]
    );
    assert_eq!(day.unfinished, 0);
    let failed: Vec<&str> = day.failed.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(failed, [doomed.as_str()]);
    let machines: Vec<MachineNow> = ["gpu-box", "ubuntu-box", "local"]
        .iter()
        .map(|m| MachineNow {
            name: m.to_string(),
            state: Phase::Closed,
            counters: None,
        })
        .collect();
    let host = Host::default();
    let input = Input {
        now,
        tz: &jiff::tz::TimeZone::UTC,
        rows: &stored.rows,
        samples: &stored.samples,
        month_trips: Some(&stored.month_trips),
        machines: &machines,
        host: &host,
        tasks: stored.tasks.as_ref(),
    };
    let waits = digest::waits(&input);
    assert_eq!(waits.waited, 2, "{head} and {behind}: {waits:?}");
    assert!(waits.longest >= Duration::from_secs(1), "{waits:?}");
    let text = digest::render(&input).join("\n");
    assert!(
        text.contains("5 finished in the last 24 h (3 succeeded, 1 cancelled, 1 expired)"),
        "{text}"
    );
    assert!(text.contains("• 2 waited out an outage"), "{text}");
    assert!(
        text.contains(&format!(
            "• failed or expired: {doomed} (expired, deadline_exceeded)"
        )),
        "{text}"
    );
    lab.stop().await;
}

/// A router without a store has no task queue: no `tasks` key, no task gauges set.
#[tokio::test(start_paused = true)]
async fn a_router_without_a_store_shows_no_tasks_block() {
    let t = crate::support::TestLab::start().await;
    let wire: Value = t
        .client
        .get(format!("{}/status", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(wire.get("machines").is_some());
    assert!(wire.get("tasks").is_none(), "{wire}");
    let view: View = serde_json::from_value(wire).unwrap();
    assert!(!table(&view).contains("tasks:"));
}
