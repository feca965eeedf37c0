//! A machine's verdict: the part of its breaker worth remembering, in wall-clock time.

use std::time::{Duration, SystemTime};

use rusqlite::{params, Connection, Row};
use tokio::time::Instant;

use super::{from_ms, ms, phase_from};
use crate::breaker::{Breaker, Phase, Policy};

/// What is stored per machine (SPEC §3.6).
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub state: Phase,
    pub failures: u32,
    pub opened_at: Option<SystemTime>,
    pub cooldown: Duration,
    pub open_until: Option<SystemTime>,
    pub last_reason: Option<String>,
    pub last_retry_after: Option<Duration>,
}

/// A verdict read back at start.
#[derive(Clone, Debug, PartialEq)]
pub enum Restored {
    Found {
        verdict: Verdict,
        written: SystemTime,
    },
    /// The row (or the whole file, machine `*`) could not be read: fail closed.
    Unreadable(String),
}

impl Verdict {
    /// The verdict of a breaker, with tokio instants turned into wall-clock times.
    pub fn of(b: &Breaker, now: Instant, wall: SystemTime) -> Verdict {
        let to_wall = |t: Instant| {
            if t >= now {
                wall + (t - now)
            } else {
                wall - (now - t)
            }
        };
        Verdict {
            state: b.phase,
            failures: b.failures,
            opened_at: b.opened_at.map(to_wall),
            cooldown: b.cooldown,
            open_until: b.open_until.map(to_wall),
            last_reason: b.last_reason.clone(),
            last_retry_after: b.last_retry_after,
        }
    }

    /// The breaker this verdict seeds, on tokio's clock. A half-open verdict comes back
    /// without its probe: that lease died with the old process.
    pub fn to_breaker(&self, policy: &Policy, now: Instant, wall: SystemTime) -> Breaker {
        let to_instant = |t: SystemTime| match t.duration_since(wall) {
            Ok(ahead) => crate::clock::after(now, ahead),
            Err(e) => now.checked_sub(e.duration()).unwrap_or(now),
        };
        let mut b = Breaker::new(policy);
        b.phase = self.state;
        b.failures = self.failures;
        b.cooldown = self.cooldown.clamp(policy.cooldown, policy.max_cooldown);
        b.opened_at = self.opened_at.map(to_instant);
        // A stored time is outside input: an open breaker waits at most max_cooldown more.
        let latest = crate::clock::after(now, policy.max_cooldown);
        b.open_until = match self.state {
            Phase::Open => Some(self.open_until.map_or(now, to_instant).min(latest)),
            _ => None,
        };
        b.last_reason = self.last_reason.as_deref().map(crate::text::bounded);
        b.last_retry_after = self
            .last_retry_after
            .map(|d| d.min(crate::upstream::classify::RETRY_AFTER_MAX));
        b
    }
}

pub(super) fn upsert(
    conn: &Connection,
    machine: &str,
    v: &Verdict,
    registry_version: &str,
    at: SystemTime,
) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT INTO verdicts (machine, state, failures, opened_at_ms, cooldown_ms, open_until_ms,
                               last_reason, last_retry_after_ms, registry_version, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (machine) DO UPDATE SET state = ?2, failures = ?3, opened_at_ms = ?4,
             cooldown_ms = ?5, open_until_ms = ?6, last_reason = ?7, last_retry_after_ms = ?8,
             registry_version = ?9, updated_at_ms = ?10",
        params![
            machine,
            v.state.as_str(),
            v.failures,
            v.opened_at.map(ms),
            v.cooldown.as_millis() as i64,
            v.open_until.map(ms),
            v.last_reason,
            v.last_retry_after.map(|d| d.as_millis() as i64),
            registry_version,
            ms(at),
        ],
    )
}

pub(super) fn read_verdicts(conn: &Connection) -> rusqlite::Result<Vec<(String, Restored)>> {
    let mut stmt = conn.prepare(
        "SELECT machine, state, failures, opened_at_ms, cooldown_ms, open_until_ms, last_reason,
                last_retry_after_ms, updated_at_ms FROM verdicts",
    )?;
    let rows = stmt.query_map([], |r| {
        let machine: String = r.get(0)?;
        Ok((machine, read_row(r)))
    })?;
    rows.collect()
}

/// One row; any value out of shape makes the verdict unreadable rather than healthy.
fn read_row(r: &Row<'_>) -> Restored {
    let read = || -> Result<Restored, String> {
        let state: String = r.get(1).map_err(|e| e.to_string())?;
        let state = phase_from(&state).ok_or_else(|| format!("unknown state '{state}'"))?;
        let failures: i64 = r.get(2).map_err(|e| e.to_string())?;
        let cooldown: i64 = r.get(4).map_err(|e| e.to_string())?;
        if failures < 0 || cooldown < 0 {
            return Err("negative count or cooldown".into());
        }
        let opt_ms = |i: usize| r.get::<_, Option<i64>>(i).map_err(|e| e.to_string());
        let verdict = Verdict {
            state,
            failures: failures.min(u32::MAX as i64) as u32,
            opened_at: opt_ms(3)?.map(from_ms),
            cooldown: Duration::from_millis(cooldown as u64),
            open_until: opt_ms(5)?.map(from_ms),
            last_reason: r.get(6).map_err(|e| e.to_string())?,
            last_retry_after: opt_ms(7)?.map(|m| Duration::from_millis(m.max(0) as u64)),
        };
        let written: i64 = r.get(8).map_err(|e| e.to_string())?;
        Ok(Restored::Found {
            verdict,
            written: from_ms(written),
        })
    };
    read().unwrap_or_else(Restored::Unreadable)
}
