//! The ledger and the admin endpoints: manual breaker control and what `/status` then
//! shows, the ledger's pages and its refusals, and reloads that are refused.

use std::time::Duration;

use serde_json::{json, Value};

use crate::lab::{chat, get, post, Answer, Lab};

/// The ledger is written off the request path: polls `path` until it lists `n` events.
async fn events_when(t: &Lab, path: &str, n: usize) -> Value {
    for _ in 0..100 {
        let a = t.send(get(path)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let v = a.json();
        if v["events"].as_array().map_or(0, Vec::len) >= n {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} never listed {n} events");
}

#[tokio::test]
async fn forcing_a_breaker_open_shows_in_status() {
    let t = Lab::in_memory("").await;
    let a = t.send(post("/admin/breakers/gpu-box/open", "")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(
        a.json(),
        json!({"machine": "gpu-box", "state": "forced_open"})
    );
    let status = t.send(get("/status")).await;
    assert_eq!(status.status, 200);
    let machines = &status.json()["machines"];
    assert_eq!(machines["gpu-box"]["state"], "forced_open");
    assert_eq!(machines["ubuntu-box"]["state"], "closed");
    assert_eq!(machines["local"]["state"], "closed");

    let a = t.send(post("/admin/breakers/gpu-box/close", "")).await;
    assert_eq!(a.json(), json!({"machine": "gpu-box", "state": "closed"}));
    assert_eq!(
        t.send(get("/status")).await.json()["machines"]["gpu-box"]["state"],
        "closed"
    );
    // A breaker is the router's own: no machine heard of any of it.
    assert_eq!(t.work(), (0, 0, 0));
}

#[tokio::test]
async fn manual_actions_are_ledgered_and_paged() {
    let t = Lab::remembering("").await;
    let note = json!({"by": "alice", "why": "maintenance"}).to_string();
    let a = t.send(post("/admin/breakers/gpu-box/open", note)).await;
    assert_eq!(a.json()["state"], "forced_open");
    let a = t.send(post("/admin/breakers/gpu-box/close", "")).await;
    assert_eq!(a.json()["state"], "closed");

    let v = events_when(&t, "/status/events?machine=gpu-box", 2).await;
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{v}");
    // Newest first.
    assert_eq!(events[0]["to"], "closed");
    assert_eq!(events[1]["from"], "closed");
    assert_eq!(events[1]["to"], "forced_open");
    assert_eq!(events[1]["reason"], "manual open by alice: maintenance");
    assert_eq!(v["next_before"], Value::Null);

    let page = t.send(get("/status/events?machine=gpu-box&limit=1")).await;
    let page = page.json();
    assert_eq!(page["events"].as_array().unwrap().len(), 1);
    assert_eq!(page["events"][0]["seq"], events[0]["seq"]);
    assert_eq!(page["next_before"], events[0]["seq"]);
    let older = format!(
        "/status/events?machine=gpu-box&before={}",
        page["next_before"]
    );
    let older = t.send(get(&older)).await.json();
    assert_eq!(older["events"].as_array().unwrap().len(), 1, "{older}");
    assert_eq!(older["events"][0]["to"], "forced_open");

    for ok in [
        "/status/events?machine=local",
        "/status/events?since=0",
        "/status/events?since=2020-01-01T00:00:00Z",
    ] {
        assert_eq!(t.send(get(ok)).await.status, 200, "{ok}");
    }
    let other = t.send(get("/status/events?machine=local")).await.json();
    assert_eq!(other["events"], json!([]));
}

#[tokio::test]
async fn admin_bodies_that_are_not_objects_are_invalid_json() {
    let t = Lab::in_memory("").await;
    for body in ["[1]", "\"open\"", "{bad", "null", "42"] {
        t.send(post("/admin/breakers/gpu-box/open", body))
            .await
            .error(400, "invalid_json", &["admin body must be a JSON object"]);
    }
    // Refused before the action: the breaker never moved.
    t.untouched();
}

#[tokio::test]
async fn unknown_machines_are_machine_not_found() {
    let t = Lab::in_memory("").await;
    for action in ["open", "close", "reset", "explode"] {
        t.send(post(&format!("/admin/breakers/nas/{action}"), ""))
            .await
            .error(
                404,
                "machine_not_found",
                &["machine 'nas' does not exist", "gpu-box, ubuntu-box, local"],
            );
    }
    t.untouched();
}

#[tokio::test]

async fn an_admin_body_over_max_body_is_request_too_large() {
    let t = Lab::in_memory("").await;
    for len in [70 * 1024, 3 << 20] {
        let body = json!({"by": "alice", "why": "x".repeat(len)}).to_string();
        t.send(post("/admin/breakers/gpu-box/open", body))
            .await
            .error(
                413,
                "request_too_large",
                &["larger than server.max_body", "65536 bytes"],
            );
    }
    t.untouched();
}

#[tokio::test]

async fn a_machine_name_that_is_not_utf8_is_answered_in_the_envelope() {
    let t = Lab::in_memory("").await;
    let a = t.send(post("/admin/breakers/%FF/open", "")).await;
    assert!(a.status.is_client_error(), "{}", a.status);
    let e = &a.json()["error"];
    assert_eq!(e["type"], "invalid_request_error", "{e}");
    assert!(e["message"].as_str().unwrap().contains("machine"), "{e}");
    t.untouched();
}

#[tokio::test]
async fn unknown_actions_are_unknown_action() {
    let t = Lab::in_memory("").await;
    for action in ["explode", "OPEN", "half_open"] {
        t.send(post(&format!("/admin/breakers/gpu-box/{action}"), ""))
            .await
            .error(
                404,
                "unknown_action",
                &[
                    &format!("unknown action '{action}'"),
                    "open, close or reset",
                ],
            );
    }
    t.untouched();
}

#[tokio::test]
async fn events_without_a_ledger_are_no_ledger() {
    let t = Lab::in_memory("").await;
    for path in ["/status/events", "/status/events?machine=gpu-box&limit=5"] {
        t.send(get(path))
            .await
            .error(404, "no_ledger", &["keeps no ledger", "state_dir"]);
    }
}

#[tokio::test]
async fn bad_event_queries_are_invalid_query() {
    let t = Lab::remembering("").await;
    let cases: &[(&str, &[&str])] = &[
        ("/status/events?color=red", &["color"]),
        ("/status/events?limit=many", &["limit: invalid digit"]),
        (
            "/status/events?before=yesterday",
            &["before: invalid digit"],
        ),
        (
            "/status/events?since=yesterday",
            &[
                "since: expected an RFC 3339 time or unix milliseconds",
                "'yesterday'",
            ],
        ),
    ];
    for &(path, says) in cases {
        let a = t.send(get(path)).await;
        let msg = a.error(400, "invalid_query", says);
        if !path.contains("since=") {
            assert!(msg.starts_with("/status/events: "), "{msg}");
            assert!(
                msg.contains("expected machine, since, before, limit"),
                "{msg}"
            );
        }
    }
    // An unknown key is refused before the ledger is looked for.
    let t = Lab::in_memory("").await;
    t.send(get("/status/events?color=red"))
        .await
        .error(400, "invalid_query", &["color"]);
}

#[tokio::test]
async fn a_ledger_that_cannot_be_read_is_ledger_unreadable() {
    let t = Lab::remembering("").await;
    assert_eq!(t.send(get("/status/events")).await.status, 200);
    let db = t.dir.path().join("state").join(labrouter::store::FILE);
    std::fs::remove_file(&db).expect("the ledger file");
    // A 500 is the router's own fault: `server_error`, and no detail beyond the log.
    let msg = t.send(get("/status/events")).await.error(
        500,
        "ledger_unreadable",
        &["ledger could not be read"],
    );
    assert!(!msg.contains(&db.display().to_string()), "{msg}");
}

/// Asserts the lab still serves the registry it started with.
async fn still_serving_the_old_registry(t: &Lab) {
    let ids = |a: Answer| -> Vec<String> {
        a.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    };
    let now = ids(t.send(get("/v1/models")).await);
    assert_eq!(
        now,
        [
            "auto",
            "code",
            "vision",
            "chat",
            "coder-gpu",
            "coder-cpu",
            "vision-gpu",
            "small"
        ]
    );
}

#[tokio::test]
async fn a_rejected_reload_is_registry_rejected() {
    let t = Lab::from_file("").await;
    let good = t.yaml("");
    let path = t.registry_path();

    let ghost = good.replace("chain: [small]", "chain: [ghost]");
    assert_ne!(ghost, good);
    std::fs::write(&path, ghost).unwrap();
    t.send(post("/admin/reload", "")).await.error(
        422,
        "registry_rejected",
        &["registry not reloaded, the old one keeps serving", "ghost"],
    );
    still_serving_the_old_registry(&t).await;

    std::fs::write(&path, "machines: [").unwrap();
    t.send(post("/admin/reload", "")).await.error(
        422,
        "registry_rejected",
        &["old one keeps serving"],
    );
    still_serving_the_old_registry(&t).await;

    let moved = good.replace("listen: 127.0.0.1:0", "listen: 127.0.0.1:8099");
    assert_ne!(moved, good);
    std::fs::write(&path, moved).unwrap();
    t.send(post("/admin/reload", "")).await.error(
        422,
        "registry_rejected",
        &["server.listen", "127.0.0.1:8099", "restart to change it"],
    );
    still_serving_the_old_registry(&t).await;
    t.untouched();

    // The control: a valid file is swapped in.
    let docs = good.replace(
        "routes:\n",
        "routes:\n  - name: docs\n    keywords: [docs]\n    chain: [small]\n",
    );
    std::fs::write(&path, docs).unwrap();
    let a = t.send(post("/admin/reload", "")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let r = &a.json()["reloaded"];
    assert_eq!(r["machines"], json!(["gpu-box", "ubuntu-box", "local"]));
    assert_eq!(r["added"], json!([]));
    assert_ne!(r["from_version"], r["to_version"]);
    let models = t.send(get("/v1/models")).await.json();
    assert_eq!(models["data"][1]["id"], "docs", "{models}");
    let a = t
        .send(post("/v1/chat/completions", chat("auto", "read the docs")))
        .await;
    assert_eq!(a.header("x-labrouter-route"), "docs");
}

#[tokio::test]
async fn a_reload_without_a_registry_file_is_registry_rejected() {
    let t = Lab::in_memory("").await;
    t.send(post("/admin/reload", "")).await.error(
        422,
        "registry_rejected",
        &["started without a registry file"],
    );
    still_serving_the_old_registry(&t).await;
}
