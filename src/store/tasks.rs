//! Tasks in SQLite (docs/api.md "Tasks"): inserted by the writer in the batch that acknowledges
//! them, updated whole on every change, read back for the API, at start and by the scheduler. The
//! callback columns after the insert belong to the deliveries alone ([`CallbackWrite`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use tokio::sync::oneshot;

use crate::outcome::{Delivery, TaskStatus};
use crate::task::{
    endpoint_from, endpoint_name, Accept, AttemptRecord, Callback, Task, TaskError, TaskId,
};

/// A task to insert, acknowledged once its transaction committed.
#[derive(Debug)]
pub struct TaskInsert {
    pub task: Task,
    pub request: Bytes,
    pub idem: Option<Idem>,
    pub ack: oneshot::Sender<Result<Inserted, String>>,
}

/// An Idempotency-Key as stored: a hash of the key (scoped by owner) and the body's
/// fingerprint, never the key or the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idem {
    pub key: String,
    pub fingerprint: String,
}

/// What an insert did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inserted {
    New,
    /// The key was seen with the same body: this task answers it.
    Existing(TaskId),
    /// The key was seen with another body.
    KeyReused,
}

/// Tasks' new states, written whole in one transaction (a task's end and its follow-ups'
/// cascade commit together or not at all); `ack` answers once they are on disk.
#[derive(Debug)]
pub struct TaskWrite {
    pub tasks: Vec<Task>,
    pub ack: Option<oneshot::Sender<()>>,
}

/// How many finished tasks the store keeps, and how many bytes of them (`tasks.max_finished`
/// and `tasks.max_finished_bytes`): past either, the oldest go first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinishedBound {
    pub count: u64,
    pub bytes: u64,
}

/// A callback's delivery after an attempt (docs/api.md "Tasks", "Callbacks"): only the callback
/// columns change, so a delivery never rewrites (or races) the task itself.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbackWrite {
    pub id: TaskId,
    pub state: Delivery,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When the next attempt is due (unix ms); `None` once delivered or failed.
    pub next_ms: Option<i64>,
}

const COLUMNS: &str =
    "seq, id, owner, status, endpoint, route, accept, priority, after, metadata, \
    created_ms, started_ms, finished_ms, deadline_ms, attempts_used, max_attempts, interrupted, \
    attempts, waiting_for, result, error, callback_url, callback_state, callback_attempts, \
    callback_last_error";

/// Inserts `t` unless its key was seen; returns what happened.
pub(super) fn insert(tx: &Transaction<'_>, t: &TaskInsert) -> rusqlite::Result<Inserted> {
    insert_task(tx, &t.task, &t.request, t.idem.as_ref())
}

/// Inserts `task` with its `request` unless `idem` was seen.
fn insert_task(
    tx: &Transaction<'_>,
    task: &Task,
    request: &[u8],
    idem: Option<&Idem>,
) -> rusqlite::Result<Inserted> {
    if let Some(idem) = idem {
        let seen: Option<(String, String)> = tx
            .query_row(
                "SELECT id, idem_fingerprint FROM tasks WHERE owner = ?1 AND idem_key = ?2",
                params![task.owner, idem.key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((id, fingerprint)) = seen {
            return Ok(
                match (fingerprint == idem.fingerprint, id.parse::<TaskId>()) {
                    (true, Ok(id)) => Inserted::Existing(id),
                    _ => Inserted::KeyReused,
                },
            );
        }
    }
    let json = |v: &dyn erased::Json| v.json();
    tx.execute(
        "INSERT INTO tasks (id, owner, status, endpoint, route, accept, priority, after, metadata,
            request, created_ms, started_ms, finished_ms, deadline_ms, attempts_used, max_attempts,
            interrupted, attempts, waiting_for, result, error, callback_url, callback_state,
            callback_attempts, callback_last_error, idem_key, idem_fingerprint)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                 ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
        params![
            task.id.as_str(),
            task.owner,
            task.status.as_str(),
            endpoint_name(task.endpoint),
            task.route,
            task.accept.as_str(),
            task.priority,
            json(&task.after),
            json(&task.metadata),
            // A task that ends at its submit (its parent had failed) keeps no request.
            if task.finished_ms.is_some() {
                &[][..]
            } else {
                request
            },
            task.created_ms,
            task.started_ms,
            task.finished_ms,
            task.deadline_ms,
            task.attempts_used,
            task.max_attempts,
            task.interrupted,
            json(&task.attempts),
            task.waiting_for,
            task.result.as_ref().map(|r| json(r)),
            task.error.as_ref().map(|e| json(e)),
            task.callback.as_ref().map(|c| c.url.clone()),
            task.callback.as_ref().map(|c| c.state.as_str()),
            task.callback.as_ref().map_or(0, |c| c.attempts),
            task.callback.as_ref().and_then(|c| c.last_error.clone()),
            idem.map(|i| i.key.clone()),
            idem.map(|i| i.fingerprint.clone()),
        ],
    )?;
    Ok(Inserted::New)
}

/// Writes every field that changes over a task's life, but the callback's: that one is
/// [`update_callback`]'s, so the scheduler's copy of a task never undoes a delivery. A
/// finished task is never written again (its first end stands, whatever arrives after),
/// and a task that ends drops its request body: only its result is kept.
pub(super) fn update(tx: &Transaction<'_>, task: &Task) -> rusqlite::Result<usize> {
    let json = |v: &dyn erased::Json| v.json();
    tx.execute(
        "UPDATE tasks SET status = ?2, started_ms = ?3, finished_ms = ?4, attempts_used = ?5,
            interrupted = ?6, attempts = ?7, waiting_for = ?8, result = ?9, error = ?10,
            request = CASE WHEN ?4 IS NULL THEN request ELSE x'' END
         WHERE id = ?1 AND finished_ms IS NULL",
        params![
            task.id.as_str(),
            task.status.as_str(),
            task.started_ms,
            task.finished_ms,
            task.attempts_used,
            task.interrupted,
            json(&task.attempts),
            task.waiting_for,
            task.result.as_ref().map(|r| json(r)),
            task.error.as_ref().map(|e| json(e)),
        ],
    )
}

/// Writes a callback's delivery (a task without a callback is left alone).
pub(super) fn update_callback(tx: &Transaction<'_>, c: &CallbackWrite) -> rusqlite::Result<usize> {
    tx.execute(
        "UPDATE tasks SET callback_state = ?2, callback_attempts = ?3, callback_last_error = ?4,
            callback_next_ms = ?5
         WHERE id = ?1 AND callback_url IS NOT NULL",
        params![
            c.id.as_str(),
            c.state.as_str(),
            c.attempts,
            c.last_error,
            c.next_ms
        ],
    )
}

/// Finished tasks that no unfinished follow-up waits on and whose callback is not still
/// being delivered: only these may be pruned (a follow-up reads its parents' answers when
/// it runs, however long it waited; a delivery reads the task it sends).
const PRUNABLE: &str = "finished_ms IS NOT NULL
    AND (callback_state IS NULL OR callback_state != 'pending')
    AND id NOT IN (
    SELECT j.value FROM tasks AS c, json_each(c.after) AS j WHERE c.finished_ms IS NULL)";

/// Deletes finished tasks (and so their keys) that finished before `before_ms`.
pub(super) fn prune(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<usize> {
    tx.execute(
        &format!("DELETE FROM tasks WHERE {PRUNABLE} AND finished_ms < ?1"),
        params![before_ms],
    )
}

/// Deletes the oldest finished tasks until at most `bound` of them, in number and in bytes,
/// are kept (the totals are kept by triggers; see the schema).
pub(super) fn bound(tx: &Transaction<'_>, bound: FinishedBound) -> rusqlite::Result<usize> {
    /// Deleted per statement while over the bound.
    const STEP: i64 = 64;
    let mut gone = 0;
    loop {
        let (count, bytes): (i64, i64) = tx.query_row(
            "SELECT finished, finished_bytes FROM task_totals WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let over_count = count.max(0) as u64 > bound.count;
        let over_bytes = bytes.max(0) as u64 > bound.bytes;
        if !over_count && !over_bytes {
            return Ok(gone);
        }
        let n = if over_count {
            (count.max(0) as u64 - bound.count).min(STEP as u64) as i64
        } else {
            1
        };
        let deleted = tx.execute(
            &format!(
                "DELETE FROM tasks WHERE seq IN (
                    SELECT seq FROM tasks WHERE {PRUNABLE} ORDER BY finished_ms, seq LIMIT ?1)"
            ),
            params![n],
        )?;
        if deleted == 0 {
            // Everything left is a parent some follow-up still waits on.
            return Ok(gone);
        }
        gone += deleted;
    }
}

/// JSON text of the serializable fields; serialization of these types cannot fail.
mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|_| "null".into())
        }
    }
}

pub mod moving;
mod read;

pub use read::*;

#[cfg(test)]
mod tests;
