//! A task as the shared queue keeps it in Redis, and read back: outside input (SPEC §7), so
//! every field is parsed strictly and bounded, and a value that is wrong is an error naming
//! the task and the field, never a panic nor a task made up.
//!
//! The router writes `doc` (the task without its request and result, nor its interrupted
//! attempts) and `result`; the scripts write the status and what only they see happen: a
//! lease that lapsed (`lapses`, each one an `interrupted` attempt), a start, an end by
//! cancel or by a second interruption. Reading merges the two.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::outcome::{AttemptOutcome, TaskCode, TaskStatus};
use crate::task::{
    endpoint_from, endpoint_name, Accept, AttemptRecord, Callback, Task, TaskError, TaskId,
    TaskResult, MS_MAX,
};

/// The task in `doc`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    id: TaskId,
    owner: String,
    status: TaskStatus,
    endpoint: String,
    route: Option<String>,
    accept: Accept,
    priority: i32,
    after: Vec<TaskId>,
    metadata: BTreeMap<String, String>,
    created_ms: i64,
    started_ms: Option<i64>,
    finished_ms: Option<i64>,
    deadline_ms: i64,
    attempts_used: u32,
    max_attempts: u32,
    attempts: Vec<AttemptRecord>,
    waiting_for: Option<String>,
    error: Option<TaskError>,
    callback: Option<Callback>,
}

/// Any one field of a task read back at most: a request, or a result that holds an
/// upstream answer, and room for the rest.
pub fn max_value(reg: &crate::registry::Registry) -> usize {
    reg.tasks.max_request_body.max(reg.server.max_upstream_body) + (64 << 10)
}

/// `task` as `doc` (its interrupted attempts are the scripts' `lapses`).
pub(super) fn doc(task: &Task) -> String {
    let d = Doc {
        id: task.id.clone(),
        owner: task.owner.clone(),
        status: task.status,
        endpoint: endpoint_name(task.endpoint).to_string(),
        route: task.route.clone(),
        accept: task.accept,
        priority: task.priority,
        after: task.after.clone(),
        metadata: task.metadata.clone(),
        created_ms: task.created_ms,
        started_ms: task.started_ms,
        finished_ms: task.finished_ms,
        deadline_ms: task.deadline_ms,
        attempts_used: task.attempts_used,
        max_attempts: task.max_attempts,
        attempts: task
            .attempts
            .iter()
            .filter(|r| r.outcome != AttemptOutcome::Interrupted)
            .cloned()
            .collect(),
        waiting_for: task.waiting_for.clone(),
        error: task.error.clone(),
        callback: task.callback.clone(),
    };
    // A Doc of plain strings, numbers and maps always serializes.
    serde_json::to_string(&d).unwrap_or_default()
}

/// `task`'s result as the `result` field ('' = none).
pub(super) fn result(task: &Task) -> String {
    task.result
        .as_ref()
        .and_then(|r| serde_json::to_string(r).ok())
        .unwrap_or_default()
}

/// One task as a script returned it: `=`, id, status, doc, lapses, started_ms, ended_ms,
/// ended_by, seq, and, when read whole, result and req.
#[derive(Debug)]
pub struct Fetched {
    pub task: Task,
    /// The request body while the task is unfinished (read whole only).
    pub request: Option<Bytes>,
}

/// A value read back that cannot be a task: which, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("task {id} in Redis cannot be used: {why}")]
pub struct Spoiled {
    pub id: String,
    pub why: String,
}

/// Reads one task from a script's answer (`fields`, from `=` or `!` on).
pub(super) fn fetched(fields: &[String]) -> Result<Fetched, Spoiled> {
    let id = fields.get(1).map_or("(none)", String::as_str);
    let spoiled = |why: String| Spoiled {
        id: crate::text::bounded(id),
        why: crate::text::bounded(&why),
    };
    match fields.first().map(String::as_str) {
        Some("=") if fields.len() == 9 || fields.len() == 11 => {}
        Some("!") => return Err(spoiled(fields.get(2).cloned().unwrap_or_default())),
        _ => return Err(spoiled(format!("{} fields, not a task", fields.len()))),
    }
    read(fields).map_err(spoiled)
}

fn read(f: &[String]) -> Result<Fetched, String> {
    let id: TaskId = f[1].parse()?;
    let status: TaskStatus = f[2].parse().map_err(|e| format!("status: {e}"))?;
    let d: Doc = serde_json::from_str(&f[3]).map_err(|e| format!("doc: {e}"))?;
    if d.id != id {
        return Err(format!("doc: it names another task, {}", d.id));
    }
    let mut task = checked(d)?;
    task.status = status;
    task.seq = whole(&f[8], "seq")?.unwrap_or(0);
    task.started_ms = task.started_ms.or(whole(&f[5], "started_ms")?);
    for at in lapses(&f[4])? {
        task.interrupted += 1;
        task.attempts.push(lapse(at));
    }
    task.attempts.sort_by(|a, b| a.at.cmp(&b.at));
    ended(&mut task, whole(&f[6], "ended_ms")?, &f[7]);
    let mut out = Fetched {
        task,
        request: None,
    };
    if let (Some(res), Some(req)) = (f.get(9), f.get(10)) {
        if !res.is_empty() {
            let r: TaskResult = serde_json::from_str(res).map_err(|e| format!("result: {e}"))?;
            out.task.result = Some(r);
        }
        out.request = (!req.is_empty()).then(|| Bytes::from(req.clone()));
    }
    Ok(out)
}

/// The doc as a task, its values checked against what a task can hold ([`Task::checked`]).
fn checked(d: Doc) -> Result<Task, String> {
    let endpoint = endpoint_from(&d.endpoint)
        .ok_or_else(|| format!("doc: endpoint '{}' is no task endpoint", d.endpoint))?;
    let task = Task {
        seq: 0,
        id: d.id,
        owner: d.owner,
        status: d.status,
        endpoint,
        route: d.route,
        accept: d.accept,
        priority: d.priority,
        after: d.after,
        metadata: d.metadata,
        created_ms: d.created_ms,
        started_ms: d.started_ms,
        finished_ms: d.finished_ms,
        deadline_ms: d.deadline_ms,
        attempts_used: d.attempts_used,
        max_attempts: d.max_attempts,
        interrupted: 0,
        attempts: d.attempts,
        waiting_for: d.waiting_for,
        result: None,
        error: d.error,
        callback: d.callback,
    };
    task.checked().map_err(|why| format!("doc: {why}"))?;
    Ok(task)
}

/// A whole number a script wrote ('' = none), in range.
fn whole(s: &str, what: &str) -> Result<Option<i64>, String> {
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<i64>() {
        Ok(n) if (0..=MS_MAX).contains(&n) => Ok(Some(n)),
        _ => Err(format!("{what}: '{}' is no whole number in range", s)),
    }
}

/// The Redis times of the leases that lapsed (at most two: the second fails the task).
fn lapses(s: &str) -> Result<Vec<i64>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let all: Vec<&str> = s.split(',').collect();
    if all.len() > 2 {
        return Err("lapses: more than two".into());
    }
    all.into_iter()
        .map(|t| whole(t, "lapses").map(Option::unwrap_or_default))
        .collect()
}

/// The attempt a lapsed lease records.
fn lapse(at_ms: i64) -> AttemptRecord {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms.max(0) as u64);
    AttemptRecord {
        at: crate::clock::rfc3339(at),
        target: String::new(),
        outcome: AttemptOutcome::Interrupted,
        reason: None,
        detail: Some(crate::task::INTERRUPTED.into()),
        charged: false,
    }
}

/// An error object of the task's own, as the queue makes them (`task_error`).
fn error(code: TaskCode, message: &str) -> TaskError {
    TaskError {
        kind: "task_error".into(),
        code,
        message: message.to_string(),
        upstream: None,
    }
}

/// A follow-up cancelled by its parent's end (`ended_by` `after:{parent}:{status}`), in the
/// local queue's words.
fn follow_ended(what: &str) -> TaskError {
    let (parent, status) = what.split_once(':').unwrap_or((what, ""));
    let named = parent
        .parse::<TaskId>()
        .ok()
        .zip(status.parse::<TaskStatus>().ok());
    let why = match named {
        Some((p, s)) => format!("a task it follows, {p}, ended {s}"),
        None => "a task it follows did not succeed".to_string(),
    };
    error(TaskCode::DependencyFailed, &why)
}

/// An end the scripts wrote (a cancel, a second lapse, a parent's end) over a doc that
/// was not told.
fn ended(task: &mut Task, ended_ms: Option<i64>, by: &str) {
    if !task.status.is_finished() {
        return;
    }
    task.finished_ms = task.finished_ms.or(ended_ms);
    task.waiting_for = None;
    let err = match by {
        "cancel" => error(TaskCode::Cancelled, "cancelled by its owner"),
        "deadline" => error(
            TaskCode::DeadlineExceeded,
            "its deadline passed before it finished",
        ),
        "interrupted" => error(
            TaskCode::Interrupted,
            "the router running it stopped twice while it was running; it is not run a third time",
        ),
        by => match by.strip_prefix("after:").map(follow_ended) {
            Some(err) => err,
            None => return,
        },
    };
    task.error = Some(err);
    task.result = None;
}
