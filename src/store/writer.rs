//! The writer thread: the one connection that writes, fed over a channel so a breaker
//! decision never waits on disk. Whatever queued up while it wrote goes into the next
//! transaction together.

use std::path::Path;
use std::sync::mpsc;
use std::time::SystemTime;

use rusqlite::Connection;

use super::{answers, counters, ledger, meta, verdict, Counts, KeptAnswer};
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
    /// Keep a machine's answer for its `Idempotency-Key` (SPEC §10).
    Answer(Box<KeptAnswer>),
    /// Delete idempotent answers kept before this (unix ms).
    PruneAnswers {
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
                | Msg::Meta { .. }
                | Msg::Prune { .. }
                | Msg::Answer(_)
                | Msg::PruneAnswers { .. }
                | Msg::Counters { .. } => batch.push(msg),
                Msg::Flush(ack) => acks.push(ack),
                Msg::Stop => stop = true,
            }
        }
        if !batch.is_empty() {
            if let Err(e) = write_batch(&mut conn, &batch) {
                tracing::error!(path = %path.display(), error = %e, rows = batch.len(), "cannot write breaker transitions");
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

/// One transaction for the whole batch; each table's SQL lives with its concept.
fn write_batch(conn: &mut Connection, batch: &[Msg]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
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
            } => ledger::insert_registry(&tx, *at, from, to, reason)?,
            Msg::Meta { key, value } => meta::write(&tx, key, value)?,
            Msg::Counters {
                at_ms,
                boot_ms,
                machines,
            } => counters::write(&tx, *at_ms, *boot_ms, machines)?,
            Msg::Prune { before_ms } => ledger::prune(&tx, *before_ms)?,
            Msg::Answer(a) => answers::write(&tx, a)?,
            Msg::PruneAnswers { before_ms } => answers::prune(&tx, *before_ms)?,
            Msg::Flush(_) | Msg::Stop => {}
        }
    }
    tx.commit()
}
