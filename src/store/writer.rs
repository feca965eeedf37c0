//! The writer thread: the one connection that writes, fed over a channel so a breaker
//! decision never waits on disk. Whatever queued up while it wrote goes into the next
//! transaction together.

use std::path::Path;
use std::sync::mpsc;
use std::time::SystemTime;

use rusqlite::Connection;

use super::responses::{self, KeptResponse};
use super::tasks::{CallbackWrite, FinishedBound, Inserted, TaskInsert, TaskWrite};
use super::{answers, counters, ledger, meta, tasks, verdict, Counts, KeptAnswer};
use crate::breaker::Transitioned;

/// What the writer thread is asked to do.
#[derive(Debug)]
pub enum Msg {
    Transition(Box<Transitioned>),
    /// A registry reload, applied or rejected: a ledger row for machine `(registry)`.
    Registry {
        at: SystemTime,
        from: String,
        to: String,
        reason: String,
    },
    /// The link to the other routers went down or came back (README "Several routers"): a ledger
    /// row for machine `(cluster)`.
    Cluster {
        at: SystemTime,
        from: String,
        to: String,
        reason: String,
    },
    /// Remember a small value across restarts (Telegram: when the last digest went out).
    Meta {
        key: String,
        value: String,
    },
    /// The live counters of every machine, for the digest's per-day counts; `boot_ms`
    /// names the process (counters restart at zero with it).
    Counters {
        at_ms: i64,
        boot_ms: i64,
        machines: Vec<Counts>,
    },
    /// Delete ledger rows older than this (unix ms): `server.keep_ledger`.
    Prune {
        before_ms: i64,
    },
    /// A submitted task: inserted (or found by its key) and acknowledged after the commit.
    TaskInsert(Box<TaskInsert>),
    /// Tasks' new states, in one transaction; acknowledged after the commit when asked.
    TaskWrite(Box<TaskWrite>),
    /// Keep at most this many finished tasks (`tasks.max_finished`, `max_finished_bytes`).
    TaskBound(FinishedBound),
    /// A callback's delivery after an attempt (only the callback columns).
    TaskCallback(Box<CallbackWrite>),
    /// Delete tasks finished before this (unix ms): `tasks.keep`.
    TaskPrune {
        before_ms: i64,
    },
    /// Keep a machine's answer for its `Idempotency-Key` (docs/api.md "Tasks").
    Answer(Box<KeptAnswer>),
    /// Delete idempotent answers kept before this (unix ms).
    PruneAnswers {
        before_ms: i64,
    },
    /// Keep a Response for its conversation.
    Response(Box<KeptResponse>),
    /// Forget a kept Response (`DELETE /v1/responses/{id}`).
    ForgetResponse {
        owner: String,
        id: String,
    },
    /// Delete Responses kept before this (unix ms): `server.keep_responses`.
    PruneResponses {
        before_ms: i64,
    },
    /// Answer on this channel once everything sent before is on disk.
    Flush(mpsc::Sender<()>),
    Stop,
}

/// Runs until [`Msg::Stop`] or until every sender is gone.
pub(super) fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Msg>, path: &Path) {
    let mut batch: Vec<Msg> = Vec::new();
    let mut acks: Vec<mpsc::Sender<()>> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut stop = false;
        // Whatever queued up meanwhile goes into the same transaction.
        for msg in std::iter::once(first).chain(rx.try_iter()) {
            match msg {
                Msg::Transition(_)
                | Msg::Registry { .. }
                | Msg::Cluster { .. }
                | Msg::Meta { .. }
                | Msg::Prune { .. }
                | Msg::Counters { .. }
                | Msg::TaskInsert(_)
                | Msg::TaskWrite(_)
                | Msg::TaskBound(_)
                | Msg::TaskCallback(_)
                | Msg::TaskPrune { .. }
                | Msg::Answer(_)
                | Msg::PruneAnswers { .. }
                | Msg::Response(_)
                | Msg::ForgetResponse { .. }
                | Msg::PruneResponses { .. } => batch.push(msg),
                Msg::Flush(ack) => acks.push(ack),
                Msg::Stop => stop = true,
            }
        }
        if !batch.is_empty() {
            // Group commit: every submit queued meanwhile shares this one transaction, and
            // is acknowledged only once it committed.
            match write_batch(&mut conn, &batch) {
                Ok(inserted) => acknowledge(&mut batch, Ok(inserted)),
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, rows = batch.len(), "cannot write to the state store");
                    acknowledge(&mut batch, Err(e.to_string()));
                }
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        if stop {
            break;
        }
    }
}

/// Answers every task message of a written batch: inserts with what they did, writes that
/// asked for it with their commit. A failed batch answers each insert with the error.
fn acknowledge(batch: &mut [Msg], outcome: Result<Vec<Inserted>, String>) {
    let mut inserted = match &outcome {
        Ok(v) => v.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    for msg in batch.iter_mut() {
        match msg {
            Msg::TaskInsert(t) => {
                let (tx, _) = tokio::sync::oneshot::channel();
                let ack = std::mem::replace(&mut t.ack, tx);
                let answer = match &outcome {
                    Ok(_) => inserted
                        .next()
                        .ok_or_else(|| "no insert outcome".to_string()),
                    Err(e) => Err(e.clone()),
                };
                let _ = ack.send(answer);
            }
            Msg::TaskWrite(w) => {
                if let (Some(ack), true) = (w.ack.take(), outcome.is_ok()) {
                    let _ = ack.send(());
                }
            }
            _ => {}
        }
    }
}

/// One transaction for the whole batch; each table's SQL lives with its concept. Returns
/// what each task insert did, in order.
fn write_batch(conn: &mut Connection, batch: &[Msg]) -> rusqlite::Result<Vec<Inserted>> {
    let tx = conn.transaction()?;
    let mut inserted = Vec::new();
    for msg in batch {
        match msg {
            Msg::Transition(t) => {
                ledger::insert_transition(&tx, t)?;
                verdict::upsert(&tx, &t.machine, &t.verdict, &t.registry_version, t.at)?;
            }
            Msg::Registry {
                at,
                from,
                to,
                reason,
            } => ledger::insert_note(&tx, *at, ledger::REGISTRY_ROW, from, to, reason)?,
            Msg::Cluster {
                at,
                from,
                to,
                reason,
            } => ledger::insert_note(&tx, *at, ledger::CLUSTER_ROW, from, to, reason)?,
            Msg::Meta { key, value } => meta::write(&tx, key, value)?,
            Msg::Counters {
                at_ms,
                boot_ms,
                machines,
            } => counters::write(&tx, *at_ms, *boot_ms, machines)?,
            Msg::Prune { before_ms } => ledger::prune(&tx, *before_ms)?,
            Msg::TaskInsert(t) => inserted.push(tasks::insert(&tx, t)?),
            Msg::TaskWrite(w) => {
                for task in &w.tasks {
                    tasks::update(&tx, task)?;
                }
            }
            Msg::TaskBound(b) => {
                let gone = tasks::bound(&tx, *b)?;
                if gone > 0 {
                    tracing::debug!(tasks = gone, "oldest finished tasks pruned (tasks.max_finished, tasks.max_finished_bytes)");
                }
            }
            Msg::TaskCallback(c) => {
                tasks::update_callback(&tx, c)?;
            }
            Msg::TaskPrune { before_ms } => {
                let gone = tasks::prune(&tx, *before_ms)?;
                if gone > 0 {
                    tracing::info!(tasks = gone, "finished tasks older than tasks.keep pruned");
                }
            }
            Msg::Answer(a) => answers::write(&tx, a)?,
            Msg::PruneAnswers { before_ms } => answers::prune(&tx, *before_ms)?,
            Msg::Response(r) => responses::write(&tx, r)?,
            Msg::ForgetResponse { owner, id } => responses::forget(&tx, owner, id)?,
            Msg::PruneResponses { before_ms } => responses::prune(&tx, *before_ms)?,
            Msg::Flush(_) | Msg::Stop => {}
        }
    }
    tx.commit()?;
    Ok(inserted)
}
