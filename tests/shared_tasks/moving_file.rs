//! The export files of the moving tests (`moving`): tasks in every status with every field
//! set somewhere, as export lines, and an export file read back.

use std::path::Path;

use serde_json::{json, Value};

const T0: i64 = 1_796_000_000_000;

pub fn at(s: i64) -> String {
    jiff::Timestamp::from_millisecond(T0 + s * 1000)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn id(n: u32) -> String {
    format!("tsk_0123456789abcdefghjkm{n:05}")
}

pub fn digest(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

/// A task line with every field, `status` and what goes with it.
pub fn line(n: u32, status: &str) -> Value {
    let finished = matches!(status, "succeeded" | "failed" | "cancelled" | "expired");
    let mut t = json!({
        "id": id(n), "status": status, "owner": if n.is_multiple_of(2) { "" } else { "0f0e" },
        "endpoint": "chat/completions", "route": "main", "accept": "chain",
        "priority": n as i64 - 3, "after": [], "metadata": {"job": format!("n{n}")},
        "created_ms": T0 + i64::from(n), "started_ms": null, "finished_ms": null,
        "deadline_ms": T0 + 86_400_000, "attempts_used": 0, "max_attempts": 3,
        "interrupted": 0, "attempts": [], "waiting_for": null,
        "request": {"model": "auto", "messages": [{"role": "user", "content": format!("task {n}")}]},
        "result": null, "error": null, "callback": null, "idempotency": null,
    });
    if finished {
        t["request"] = Value::Null;
        t["started_ms"] = json!(T0 + 2000);
        t["finished_ms"] = json!(T0 + 9000);
    }
    t
}

/// Tasks in every status, with every field that can be set set somewhere.
pub fn sample() -> Vec<Value> {
    let skipped =
        json!({"at": at(3), "target": "m@box", "outcome": "skipped", "reason": "circuit_open"});
    let failed = json!({"at": at(4), "target": "m@box", "outcome": "failed", "reason": "http_5xx",
        "detail": "502 from box", "charged": true});
    let interrupted = json!({"at": at(5), "target": "", "outcome": "interrupted", "reason": null,
        "detail": "the router stopped while this task was running"});
    let mut out = Vec::new();
    let mut t = line(1, "succeeded");
    t["attempts"] = json!([skipped]);
    t["result"] = json!({"status": 200, "target": "m@box",
        "body": {"choices": [{"message": {"role": "assistant", "content": "done"}}]}});
    t["callback"] = json!({"url": "http://127.0.0.1:9/done", "state": "delivered", "attempts": 1, "last_error": null});
    t["idempotency"] = json!({"key": digest('a'), "fingerprint": digest('b')});
    out.push(t);
    let mut t = line(2, "failed");
    t["attempts"] = json!([failed, failed]);
    t["attempts_used"] = json!(2);
    t["max_attempts"] = json!(2);
    t["error"] = json!({"type": "task_error", "code": "attempts_exhausted", "message": "no machine served it",
        "upstream": {"error": {"message": "bad"}}});
    t["callback"] = json!({"url": "http://127.0.0.1:9/done", "state": "failed", "attempts": 7, "last_error": "connect refused"});
    out.push(t);
    let mut t = line(3, "cancelled");
    t["error"] =
        json!({"type": "task_error", "code": "cancelled", "message": "cancelled by its owner"});
    out.push(t);
    let mut t = line(4, "expired");
    t["error"] = json!({"type": "task_error", "code": "deadline_exceeded", "message": "its deadline passed"});
    out.push(t);
    let mut t = line(5, "queued");
    t["callback"] = json!({"url": "http://127.0.0.1:9/done", "state": "pending", "attempts": 0, "last_error": null});
    t["idempotency"] = json!({"key": digest('c'), "fingerprint": digest('d')});
    out.push(t);
    let mut t = line(6, "waiting");
    t["attempts"] = json!([skipped]);
    t["waiting_for"] = json!("every target of route 'main' is open");
    t["accept"] = json!("same_model");
    out.push(t);
    let mut t = line(7, "blocked");
    t["after"] = json!([id(5)]);
    out.push(t);
    let mut t = line(8, "running");
    t["started_ms"] = json!(T0 + 2000);
    t["attempts"] = json!([failed, interrupted]);
    t["attempts_used"] = json!(1);
    t["interrupted"] = json!(1);
    out.push(t);
    out
}

/// An export file of `tasks`, as text.
pub fn file_of(tasks: &[Value]) -> String {
    let mut text =
        json!({"format": "labrouter-tasks", "version": 1, "from": "local", "count": tasks.len()})
            .to_string();
    for t in tasks {
        text.push('\n');
        text.push_str(&t.to_string());
    }
    text.push('\n');
    text.push_str(&json!({"end": "labrouter-tasks", "count": tasks.len()}).to_string());
    text.push('\n');
    text
}

/// The task lines of an export file (no header, no trailer), and its header.
pub fn tasks_in(path: &Path) -> (Value, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "{text}");
    let header: Value = serde_json::from_str(lines[0]).unwrap();
    let trailer: Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    assert_eq!(trailer["count"], header["count"], "{text}");
    let tasks = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l.to_string())
        .collect();
    (header, tasks)
}

pub fn values(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
