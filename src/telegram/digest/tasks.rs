//! The digest's tasks paragraph (docs/api.md "Tasks"): what finished, what waited out an outage and
//! for how long, what failed or expired.

use std::time::Duration;

use super::super::text::{bold, escape};
use jiff::Timestamp;

use super::Input;
use crate::outcome::words::rounded as human;
use crate::outcome::{TaskCode, TaskStatus};
use crate::task::AttemptRecord;

/// How many failed or expired tasks the digest names.
pub const FAILED_SHOWN: usize = 5;

/// The last 24 h of tasks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tasks {
    /// Finished in the last 24 h, by (terminal) status.
    pub finished: Vec<(TaskStatus, u64)>,
    /// Succeeded in the last 24 h and may have waited (see [`outage_wait`]).
    pub succeeded: Vec<Succeeded>,
    /// Failed or expired in the last 24 h, newest first, at most [`FAILED_SHOWN`].
    pub failed: Vec<FailedTask>,
    /// Tasks not finished now (blocked, queued, waiting or running).
    pub unfinished: u64,
}

/// A task that succeeded: its times (unix ms) and attempt records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Succeeded {
    pub created_ms: i64,
    /// Its first walk.
    pub started_ms: Option<i64>,
    pub finished_ms: i64,
    pub attempts: Vec<AttemptRecord>,
}

/// A task that failed or expired.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedTask {
    pub id: String,
    pub status: TaskStatus,
    pub code: Option<TaskCode>,
}

/// How many tasks waited out an outage, and the longest wait.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Waits {
    pub waited: u64,
    pub longest: Duration,
}

impl Tasks {
    /// Whether there is anything to say.
    pub fn is_empty(&self) -> bool {
        self.finished.iter().all(|(_, n)| *n == 0) && self.unfinished == 0
    }
}

/// When some machine's breaker was not closed, by the ledger: `(from, to)` in unix ms,
/// an outage still on running to `now`.
pub fn down_spans(input: &Input<'_>) -> Vec<(i64, i64)> {
    let now = input.now.as_millisecond();
    let mut spans = Vec::new();
    for m in input.machines {
        let mut since: Option<i64> = None;
        for r in input.rows.iter().filter(|r| r.machine == m.name) {
            match (since, r.to.is_down()) {
                (None, true) => since = Some(r.at_ms),
                (Some(s), false) => {
                    spans.push((s, r.at_ms));
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            spans.push((s, now));
        }
    }
    spans
}

/// How long task `t` waited out an outage; `None` if it did not. It did when either
///
/// - a walk of its chain found nothing to serve it and used none of its attempts: every
///   target it accepts was skipped by a breaker, or failed the way a down machine fails,
///   and it became `waiting`. The records of one walk share their `at` (to the second):
///   such a walk has no record `charged` and none `interrupted` (a restart, not an
///   outage), and comes at least a second before its finish (a walk in the finishing
///   second is the one that served it, and its skips are a fallback, not a wait); or
/// - it sat `queued` a second or more before its first walk while some breaker of the lab
///   was not closed (`down`, from [`down_spans`]): tasks behind a held-back one are not
///   walked at all until a breaker changes. A queue wait with every breaker closed is busy
///   slots, not an outage.
///
/// The wait runs from its submit (a queued wait) or its first held walk to its finish.
pub fn outage_wait(t: &Succeeded, down: &[(i64, i64)]) -> Option<Duration> {
    let queued = t
        .started_ms
        .filter(|&s| s - t.created_ms >= 1000)
        .filter(|&s| down.iter().any(|&(a, b)| a < s && b > t.created_ms))
        .map(|_| t.created_ms);
    let finished_s = t.finished_ms.div_euclid(1000);
    let mut held = None;
    let mut i = 0;
    while i < t.attempts.len() && queued.is_none() {
        let at = &t.attempts[i].at;
        let walk = t.attempts[i..].iter().take_while(|r| r.at == *at).count();
        let records = &t.attempts[i..i + walk];
        i += walk;
        let Ok(ts) = at.parse::<Timestamp>() else {
            continue;
        };
        let held_back = records
            .iter()
            .all(|r| !r.charged && r.outcome != crate::outcome::AttemptOutcome::Interrupted);
        if held_back && ts.as_second() < finished_s {
            held = Some(ts.as_millisecond());
            break;
        }
    }
    let from = queued.or(held)?;
    Some(Duration::from_millis(
        t.finished_ms.saturating_sub(from).max(0) as u64,
    ))
}

/// The day's waits out of outages.
pub fn waits(input: &Input<'_>) -> Waits {
    let Some(tasks) = input.tasks else {
        return Waits::default();
    };
    let down = down_spans(input);
    let mut w = Waits::default();
    for wait in tasks.succeeded.iter().filter_map(|t| outage_wait(t, &down)) {
        w.waited += 1;
        w.longest = w.longest.max(wait);
    }
    w
}

pub(super) fn tasks_paragraph(t: &Tasks, w: Waits) -> String {
    let total: u64 = t.finished.iter().map(|(_, n)| n).sum();
    let by: Vec<String> = TaskStatus::ALL
        .iter()
        .filter_map(|s| {
            let n: u64 = t
                .finished
                .iter()
                .filter(|(x, _)| x == s)
                .map(|(_, n)| n)
                .sum();
            (n > 0).then(|| format!("{n} {s}"))
        })
        .collect();
    let mut head = if total == 0 {
        format!("🗂 {}: none finished in the last 24 h", bold("Tasks"))
    } else {
        format!(
            "🗂 {}: {total} finished in the last 24 h ({})",
            bold("Tasks"),
            by.join(", ")
        )
    };
    if t.unfinished > 0 {
        head.push_str(&format!("; {} not finished yet", t.unfinished));
    }
    head.push('.');
    let mut lines = vec![head];
    if w.waited > 0 {
        lines.push(format!(
            "• {} waited out an outage, the longest for {}",
            w.waited,
            human(w.longest)
        ));
    }
    if !t.failed.is_empty() {
        let named: Vec<String> = t
            .failed
            .iter()
            .take(FAILED_SHOWN)
            .map(|f| match f.code {
                Some(c) => format!("{} ({}, {})", escape(&f.id), f.status, c.as_str()),
                None => format!("{} ({})", escape(&f.id), f.status),
            })
            .collect();
        let bad: u64 = t
            .finished
            .iter()
            .filter(|(s, _)| matches!(s, TaskStatus::Failed | TaskStatus::Expired))
            .map(|(_, n)| n)
            .sum();
        let more = bad.saturating_sub(named.len() as u64);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        lines.push(format!("• failed or expired: {}{tail}", named.join("; ")));
    }
    lines.join("\n")
}
