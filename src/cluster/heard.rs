//! What one router tells the others, both ways: a verdict to publish ([`Told`]) and a
//! verdict read back ([`Heard`]), from a message or from a (re)sync. What comes from Redis
//! is outside input: validated, bounded and clamped like any other (README "Safety").

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::breaker::{Adopted, Breaker, Phase, Transitioned};
use crate::outcome::Reason;

/// The largest message or verdict read: anything larger is not ours.
pub const MAX_MESSAGE: usize = 16 * 1024;
/// The largest field of a verdict hash a (re)sync reads out of Redis: a larger one stays
/// there and its share is skipped. Six such fields, JSON-quoted, stay under [`MAX_MESSAGE`]
/// (a reason this router writes is at most a few hundred bytes).
pub const MAX_FIELD: usize = 2048;
/// No cooldown or time left believed beyond this (the registry's own limit).
const SPAN_MAX_MS: f64 = crate::registry::SPAN_MAX.as_millis() as f64;

/// A verdict to publish. `until` is where an open interval ends on this router's clock,
/// turned into the time left only when the message goes out: a message held while Redis
/// was down never lengthens a cooldown.
#[derive(Clone, Debug, PartialEq)]
pub struct Told {
    pub state: Phase,
    pub cooldown: Duration,
    pub until: Option<Instant>,
    pub reason: String,
    pub failures: u32,
}

impl Told {
    /// A transition worth telling: this router's own (not one it adopted), to `open` or
    /// `forced_open`, or to `closed` from an outage. A 401/403 pause is this router's key,
    /// and an unreadable local store is this router's disk: neither is told.
    pub fn of_transition(t: &Transitioned) -> Option<Told> {
        let tr = &t.transition;
        if t.decided_by.is_some() || tr.reason == Reason::StateUnreadable.as_str() {
            return None;
        }
        let told = matches!(
            (tr.from, tr.to),
            (_, Phase::Open | Phase::ForcedOpen)
                | (
                    Phase::Open | Phase::HalfOpen | Phase::ForcedOpen,
                    Phase::Closed
                )
        );
        told.then(|| Told {
            state: tr.to,
            cooldown: t.verdict.cooldown,
            until: tr.cooldown_until,
            reason: tr.reason.clone(),
            failures: tr.failures,
        })
    }

    /// What a breaker shows now, told again (after a message was dropped). `None` for the
    /// phases no router tells.
    pub fn of_breaker(b: &Breaker) -> Option<Told> {
        matches!(b.phase, Phase::Open | Phase::ForcedOpen | Phase::Closed).then(|| Told {
            state: b.phase,
            cooldown: b.cooldown,
            until: b.open_until,
            reason: b.last_reason.clone().unwrap_or_default(),
            failures: b.failures,
        })
    }

    /// Milliseconds left of the open interval at `now` (0 for every other phase).
    pub fn left_ms(&self, now: Instant) -> u64 {
        match (self.state, self.until) {
            (Phase::Open, Some(u)) => millis(u.saturating_duration_since(now)).max(1),
            _ => 0,
        }
    }
}

/// A peer's verdict, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Heard {
    pub share: String,
    pub generation: u64,
    /// The publishing process (empty from a sync read).
    pub instance: String,
    pub adopted: Adopted,
}

impl Heard {
    /// Reads one message (or one verdict of a sync read); says what is wrong otherwise.
    pub fn parse(bytes: &[u8]) -> Result<Heard, String> {
        if bytes.len() > MAX_MESSAGE {
            return Err(format!("{} bytes, more than {MAX_MESSAGE}", bytes.len()));
        }
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let text = |k: &str| v.get(k).and_then(Value::as_str);
        let share = text("m")
            .filter(|s| (1..=2048).contains(&s.len()))
            .ok_or("no machine key (m) of 1 to 2048 bytes")?;
        let generation =
            v.get("g")
                .and_then(Value::as_f64)
                .filter(|g| g.is_finite() && *g >= 1.0 && *g < 9.0e15)
                .ok_or("no generation (g) that is a whole number of 1 or more")? as u64;
        let state = match text("s") {
            Some("open") => Phase::Open,
            Some("forced_open") => Phase::ForcedOpen,
            Some("closed") => Phase::Closed,
            other => {
                return Err(format!(
                    "state (s) is {}, not open, forced_open or closed",
                    other.map_or("missing".into(), |s| format!(
                        "'{}'",
                        crate::text::bounded(s)
                    ))
                ))
            }
        };
        let span = |k: &str| -> Result<Duration, String> {
            let ms = v
                .get(k)
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or(format!("no number of milliseconds of 0 or more ({k})"))?;
            Ok(Duration::from_millis(ms.clamp(0.0, SPAN_MAX_MS) as u64))
        };
        let node = text("n")
            .filter(|n| {
                (1..=64).contains(&n.len())
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            })
            .ok_or("no node name (n) of 1 to 64 letters, digits, '-', '_' or '.'")?;
        Ok(Heard {
            share: share.to_string(),
            generation,
            instance: text("i").map(crate::text::bounded).unwrap_or_default(),
            adopted: Adopted {
                state,
                cooldown: span("c")?,
                left: span("l")?,
                node: Arc::from(node),
                reason: text("r").map(crate::text::bounded).unwrap_or_default(),
                failures: match v.get("f") {
                    None | Some(Value::Null) => 0,
                    Some(f) => f
                        .as_f64()
                        .filter(|f| f.is_finite() && *f >= 0.0)
                        .ok_or("failures (f) is no count of 0 or more")?
                        .min(f64::from(u32::MAX)) as u32,
                },
            },
        })
    }
}

pub fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
