//! What the queue's scripts answer, as the router's types: a finish, a cancel, a page of
//! the list; an answer that is not one of them is a spoiled task, never a guess.

use super::{QueueError, Spoiled};
use crate::outcome::TaskStatus;
use crate::task::{Task, TaskId};

/// What a finish did: written (this router's end is the task's), or dropped because the
/// task had already ended (`Dropped(status)`) or is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Written,
    Dropped(TaskStatus),
    Missing,
}

/// What a cancel did.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Cancelled from this status (`running`: its router stops at its next renew).
    From(TaskStatus),
    /// It had already ended so.
    AlreadyEnded(TaskStatus),
    /// No such task of this owner.
    Missing,
}

/// A page of the list, newest first.
#[derive(Debug, Default)]
pub struct Page {
    pub tasks: Vec<Task>,
    /// Where the next page starts, if the list goes on.
    pub next_before: Option<String>,
}

pub(super) fn spoiled(id: &str, why: String) -> QueueError {
    QueueError::Spoiled(Spoiled {
        id: crate::text::bounded(id),
        why: crate::text::bounded(&why),
    })
}

pub(super) fn ended(n: i64, s: &str, id: &TaskId) -> Result<Ended, QueueError> {
    match (n, s) {
        (1, _) => Ok(Ended::Written),
        (_, "") => Ok(Ended::Missing),
        (_, s) => s
            .parse::<TaskStatus>()
            .map(Ended::Dropped)
            .map_err(|e| spoiled(id.as_str(), e.to_string())),
    }
}

/// A list's flat answer cut into its tasks: each starts with `=` (9 fields) or `!` (3).
pub(super) fn split(flat: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let mut rest = flat;
    while let Some(first) = rest.first() {
        let n = if first == "!" { 3 } else { 9 }.min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}
