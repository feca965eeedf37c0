//! One task's walk decided on its own, as the shared queue runs it (README "Several
//! routers", the shared queue): the task is claimed from Redis with nothing else of the
//! queue around it, so what its walk's end means is decided from the task alone — the same
//! words and rules as [`super::Queue::walked`] (served, refused, parked, an attempt used or
//! not, backoff), pure: it takes the wall time and returns what to write.
//!
//! What differs from the local queue: there is no group to park with, so a task held back
//! by every breaker is given back `waiting` and looked at again when the soonest cooldown
//! ends, when woken (a breaker changed, a walk served), or after [`WAIT_POLL`] at most (a
//! bounded poll of the queue, never of a machine: the walk goes through the breakers, and
//! the pool probes once, §12).

use std::time::{Duration, SystemTime};

use super::walked::{backoff, deadline_passed, failed_for, held_back_for, unprepared};
use super::{error, finish, push_records, Tried, WalkEnd};
use crate::outcome::{TaskCode, TaskStatus};
use crate::task::Task;

/// A waiting task is looked at again after this at most. A breaker change (this router's,
/// or another's verdict adopted) and a walk that served wake waiting tasks sooner.
pub const WAIT_POLL: Duration = Duration::from_secs(10);
/// A task held back only by busy slots is looked at again after this.
pub const BUSY_AGAIN: Duration = Duration::from_millis(500);

/// What to do with a task after its walk.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// It ended (its status is final): write its end; the first end written wins.
    End,
    /// Give it back unfinished (`queued` or `waiting`), due again after this.
    Again(Duration),
    /// Every machine it accepts is busy (slots, not breakers): give it back `queued`, due
    /// again after [`BUSY_AGAIN`], and claim nothing more until a walk ends.
    Busy,
}

/// Whether `task` is past its deadline at `wall`: it expires without a walk.
pub fn expire_if_due(task: &mut Task, wall: SystemTime) -> bool {
    if crate::store::ms(wall) < task.deadline_ms {
        return false;
    }
    expired(task, wall);
    true
}

/// What the end of `task`'s walk does to it, at `wall`.
pub fn walked(task: &mut Task, end: WalkEnd, wall: SystemTime) -> Next {
    match end {
        WalkEnd::Served(result, tried) => {
            push_records(task, tried.records);
            task.result = Some(result);
            finish(task, TaskStatus::Succeeded, None, wall);
            Next::End
        }
        WalkEnd::Refused(err, tried) => {
            push_records(task, tried.records);
            finish(task, TaskStatus::Failed, Some(err), wall);
            Next::End
        }
        WalkEnd::Unprepared(code, why) => {
            finish(task, unprepared(code), Some(error(code, &why)), wall);
            Next::End
        }
        WalkEnd::Unserved(tried) if tried.expired => {
            push_records(task, tried.records);
            expired(task, wall)
        }
        WalkEnd::Unserved(tried) if !tried.sent => held_back(task, tried),
        WalkEnd::Unserved(tried) => failed(task, tried, wall),
    }
}

fn expired(task: &mut Task, wall: SystemTime) -> Next {
    finish(task, TaskStatus::Expired, Some(deadline_passed()), wall);
    Next::End
}

/// Nothing was sent: held back by a breaker, the task waits (no attempt used); held back
/// only by slots, it stays queued.
fn held_back(task: &mut Task, tried: Tried) -> Next {
    task.waiting_for = Some(held_back_for(&tried));
    if !tried.by_breaker {
        task.status = TaskStatus::Queued;
        return Next::Busy;
    }
    let was = task.status;
    task.status = TaskStatus::Waiting;
    if was != TaskStatus::Waiting {
        push_records(task, tried.records);
    }
    let again = tried.soonest.unwrap_or(WAIT_POLL).min(WAIT_POLL);
    Next::Again(again.max(Duration::from_millis(50)))
}

/// Something was sent and nothing served: an attempt used or not, then a backoff, or the
/// end when the attempts are used up.
fn failed(task: &mut Task, mut tried: Tried, wall: SystemTime) -> Next {
    if let Some(last) = tried.records.last_mut() {
        last.charged = tried.charged;
    }
    push_records(task, tried.records);
    if !tried.charged {
        task.status = TaskStatus::Waiting;
        task.waiting_for = Some(failed_for(task, false, backoff(1)));
        return Next::Again(backoff(1));
    }
    task.attempts_used += 1;
    if task.attempts_used >= task.max_attempts {
        let why = format!("all {} attempts failed; see attempts", task.attempts_used);
        let err = error(TaskCode::AttemptsExhausted, &why);
        finish(task, TaskStatus::Failed, Some(err), wall);
        return Next::End;
    }
    let wait = backoff(task.attempts_used);
    task.status = TaskStatus::Queued;
    task.waiting_for = Some(failed_for(task, true, wait));
    Next::Again(wait)
}

#[cfg(test)]
mod tests;
