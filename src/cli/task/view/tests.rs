//! What `labrouter task` prints, from task objects shaped as the router answers them.

use serde_json::{json, Value};

use super::*;

fn task(extra: Value) -> TaskView {
    let mut t = json!({
        "id": "tsk_01jf0000000000000000000000", "object": "task", "status": "queued",
        "endpoint": "chat/completions", "route": null, "accept": "chain", "priority": 0,
        "after": [], "metadata": {}, "created_at": "2026-11-30T14:02:11Z",
        "started_at": null, "finished_at": null, "deadline": "2026-12-01T14:02:11Z",
        "attempts_used": 0, "max_attempts": 3, "waiting_for": null,
        "error": null, "callback": null
    });
    for (k, v) in extra.as_object().unwrap() {
        t[k] = v.clone();
    }
    serde_json::from_value(t).unwrap()
}

fn succeeded() -> TaskView {
    task(json!({
        "status": "succeeded", "route": "code", "attempts_used": 0,
        "started_at": "2026-11-30T14:02:12Z", "finished_at": "2026-11-30T14:02:13Z",
        "attempts": [],
        "result": {"status": 200, "target": "coder-gpu@gpu-box", "body": {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok from gpu-box"},
                         "finish_reason": "stop"}]}}
    }))
}

#[test]
fn answer_text_reads_chat_parts_and_completions() {
    let chat = json!({"choices": [{"message": {"content": "hello"}}]});
    assert_eq!(answer_text(&chat).as_deref(), Some("hello"));
    let parts = json!({"choices": [{"message": {"content": [
        {"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]}}]});
    assert_eq!(answer_text(&parts).as_deref(), Some("ab"));
    let cmpl = json!({"choices": [{"text": "done", "finish_reason": "stop"}]});
    assert_eq!(answer_text(&cmpl).as_deref(), Some("done"));
    assert_eq!(answer_text(&json!({"data": [{"embedding": [0.1]}]})), None);
    assert_eq!(answer_text(&json!({"choices": []})), None);
    let embed = Served {
        status: 200,
        target: "small@local".into(),
        body: json!({"data": [{"embedding": [0.1]}, {"embedding": [0.2]}]}),
    };
    assert_eq!(result_text(&embed), "(2 embeddings; --json shows them)");
}

#[test]
fn the_status_line_says_what_the_status_is_about() {
    assert_eq!(
        status_line(&task(json!({}))),
        "tsk_01jf0000000000000000000000  queued"
    );
    let waiting = task(json!({"status": "waiting",
        "waiting_for": "every target it accepts is held back: coder-gpu@gpu-box circuit_open"}));
    assert_eq!(
        status_line(&waiting),
        "tsk_01jf0000000000000000000000  waiting: every target it accepts is held back: coder-gpu@gpu-box circuit_open"
    );
    assert_eq!(
        status_line(&succeeded()),
        "tsk_01jf0000000000000000000000  succeeded: served by coder-gpu@gpu-box"
    );
    let cancelled = task(
        json!({"status": "cancelled", "error": {"type": "task_error",
        "code": "dependency_failed", "message": "tsk_a was cancelled"}}),
    );
    assert_eq!(
        status_line(&cancelled),
        "tsk_01jf0000000000000000000000  cancelled: dependency_failed: tsk_a was cancelled"
    );
    let by_hand = task(
        json!({"status": "cancelled", "error": {"type": "task_error",
        "code": "cancelled", "message": "cancelled by its owner"}}),
    );
    assert_eq!(
        status_line(&by_hand),
        "tsk_01jf0000000000000000000000  cancelled: cancelled by its owner"
    );
    let blocked = task(json!({"status": "blocked", "after": ["tsk_a", "tsk_b"]}));
    assert_eq!(
        status_line(&blocked),
        "tsk_01jf0000000000000000000000  blocked: after tsk_a, tsk_b"
    );
}

#[test]
fn the_summary_shows_route_attempts_tries_and_the_answer() {
    let s = summary(&succeeded());
    assert_eq!(
        s,
        "task       tsk_01jf0000000000000000000000
status     succeeded
route      code (priority 0)
attempts   0 of 3 used
created    2026-11-30T14:02:11Z
started    2026-11-30T14:02:12Z
finished   2026-11-30T14:02:13Z
deadline   2026-12-01T14:02:11Z
served by  coder-gpu@gpu-box (HTTP 200)
answer:
ok from gpu-box
"
    );
    let failed = task(json!({
        "status": "failed", "attempts_used": 3, "after": ["tsk_a"],
        "attempts": [
            {"at": "2026-11-30T14:02:12Z", "target": "coder-gpu@gpu-box", "outcome": "failed",
             "reason": "upstream_5xx", "detail": "HTTP 500", "charged": true}],
        "error": {"type": "task_error", "code": "attempts_exhausted", "message": "3 attempts failed"},
        "callback": {"url": "http://127.0.0.1:9000/done", "state": "pending", "attempts": 1,
                     "last_error": "HTTP 503"}
    }));
    let s = summary(&failed);
    assert!(s.contains("route      by content (priority 0)\n"), "{s}");
    assert!(s.contains("attempts   3 of 3 used\n"), "{s}");
    assert!(s.contains("after      tsk_a\n"), "{s}");
    assert!(
        s.contains("callback   http://127.0.0.1:9000/done pending (1 attempt): HTTP 503\n"),
        "{s}"
    );
    assert!(
        s.contains("error      attempts_exhausted: 3 attempts failed\n"),
        "{s}"
    );
    assert!(
        s.contains("tries:\n  2026-11-30T14:02:12Z  coder-gpu@gpu-box  failed  upstream_5xx (HTTP 500)  [attempt used]\n"),
        "{s}"
    );
    assert!(!s.contains("answer:"), "{s}");
}

#[test]
fn the_summary_lists_only_the_latest_tries() {
    let tries: Vec<Value> = (0..20)
        .map(|i| {
            json!({"at": format!("t{i:02}"), "target": "small@local", "outcome": "skipped",
                        "reason": "circuit_open"})
        })
        .collect();
    let s = summary(&task(json!({"status": "waiting", "attempts": tries,
        "waiting_for": "every target it accepts is held back"})));
    assert!(
        s.contains("waiting    every target it accepts is held back\n"),
        "{s}"
    );
    assert!(s.contains("  (12 earlier; --json lists them)\n"), "{s}");
    assert!(!s.contains("t11"), "{s}");
    assert!(
        s.contains("  t12  small@local  skipped  circuit_open\n"),
        "{s}"
    );
    assert!(s.contains("t19"), "{s}");
}

#[test]
fn the_table_aligns_columns_and_says_what_holds_each_task() {
    let waiting = task(
        json!({"id": "tsk_02jf0000000000000000000000", "status": "waiting",
        "route": "chat", "waiting_for": format!("held back{}", " and on".repeat(30))}),
    );
    let blocked = task(
        json!({"id": "tsk_03jf0000000000000000000000", "status": "blocked",
        "after": ["tsk_02jf0000000000000000000000"]}),
    );
    let cancelled = task(
        json!({"id": "tsk_04jf0000000000000000000000", "status": "cancelled",
        "error": {"type": "task_error", "code": "cancelled", "message": "cancelled\nby its owner"}}),
    );
    let out = table(&[succeeded(), waiting, blocked, cancelled]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "ID                              STATUS     ROUTE  ATTEMPTS  CREATED               WAITING FOR / ERROR"
    );
    assert_eq!(
        lines[1],
        "tsk_01jf0000000000000000000000  succeeded  code   0/3       2026-11-30T14:02:11Z  -"
    );
    assert!(lines[2].starts_with("tsk_02jf0000000000000000000000  waiting    chat   0/3       2026-11-30T14:02:11Z  held back and on"));
    assert!(
        lines[2].ends_with('…'),
        "long reasons are cut: {}",
        lines[2]
    );
    assert_eq!(
        lines[3],
        "tsk_03jf0000000000000000000000  blocked    -      0/3       2026-11-30T14:02:11Z  after tsk_02jf0000000000000000000000"
    );
    assert_eq!(
        lines[4],
        "tsk_04jf0000000000000000000000  cancelled  -      0/3       2026-11-30T14:02:11Z  cancelled: cancelled by its owner"
    );
    assert_eq!(lines.len(), 5);
    assert_eq!(
        table(&[]),
        "ID  STATUS  ROUTE  ATTEMPTS  CREATED  WAITING FOR / ERROR\n"
    );
}
