//! `labrouter replay TRACE.json` (docs/api.md "Command line"): the pure breaker run on a recorded
//! trace.
//!
//! A trace is a breaker policy and a list of timed events per machine. Each machine gets
//! its own [`Breaker`], driven through the same [`Breaker::step`] the server uses, so a
//! trace shows exactly what the live router would have decided. Every admitted request
//! joins its machine's FIFO of outstanding calls; `success`, `failure` and `cancel` complete
//! the oldest of them. The [`Receipt`] holds only times relative to the trace's start, so
//! it (and its SHA-256) is byte-identical on every run.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::breaker::{Breaker, Decision, Event, Failure, FailureKind, Policy, Ticket, Transition};
use crate::outcome::words;
use crate::registry::{policy, DURATION_MAX};

/// Why a trace could not be replayed; the Display names the field or event at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Malformed JSON, or an unknown top-level key: serde's message has line and column.
    #[error("invalid trace: {0}")]
    Json(#[from] serde_json::Error),
    #[error("breaker.{field}: {message}")]
    Policy { field: String, message: String },
    #[error("events[{index}]: {message}")]
    Event { index: usize, message: String },
}

const EVENT_KEYS: [&str; 5] = ["at_ms", "machine", "event", "reason", "retry_after_ms"];

/// The receipt: what happened, plus a hash of it so two runs can be compared at a glance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Receipt {
    #[serde(flatten)]
    pub run: Run,
    /// Lowercase hex SHA-256 of the compact JSON of `run`.
    pub sha256: String,
}

/// Everything the replay decided, in a fixed key order (BTreeMaps order the machines).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Run {
    pub transitions: Vec<TransitionRow>,
    pub rejections: Vec<RejectionRow>,
    /// Admitted requests per machine (calls that would have reached it).
    pub remote_attempts: BTreeMap<String, u64>,
    /// Requests skipped without any network, per machine.
    pub local_rejections: BTreeMap<String, u64>,
    #[serde(rename = "final")]
    pub final_states: BTreeMap<String, FinalState>,
}

/// One phase change, as the ledger (README "What it remembers") would record it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransitionRow {
    pub index: usize,
    pub at_ms: u64,
    pub machine: String,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub failures: u32,
    pub cooldown_until_ms: Option<u128>,
    pub remote_attempted: bool,
}

/// One request the breaker turned away, and when the machine may admit again if known.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RejectionRow {
    pub index: usize,
    pub at_ms: u64,
    pub machine: String,
    pub skip: String,
    pub retry_after_ms: Option<u128>,
}

/// A machine's breaker after the last event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FinalState {
    pub state: String,
    pub consecutive_failures: u32,
    /// Probe successes so far in a half-open cycle.
    pub probe_successes: u32,
    pub cooldown_ms: u128,
    pub open_until_ms: Option<u128>,
    pub last_reason: Option<String>,
    /// Admitted calls whose outcome the trace never gave.
    pub outstanding: usize,
}

impl Receipt {
    /// The receipt as pretty JSON, as `labrouter replay` prints it.
    pub fn to_json(&self) -> String {
        // Plain structs with string keys: serializing them cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The top level is strict; the rest is read as values so errors can name field and index.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrace {
    #[serde(default)]
    breaker: Map<String, Value>,
    events: Vec<Value>,
}

/// One machine's breaker and its admitted calls, oldest first.
struct Machine {
    breaker: Breaker,
    outstanding: VecDeque<Ticket>,
}

/// The replay as it goes: each machine's breaker, and what has been decided so far.
struct Player {
    policy: Policy,
    /// The trace's time zero: an event at `at_ms` happens at `base + at_ms`.
    base: Instant,
    machines: BTreeMap<String, Machine>,
    run: Run,
    /// The previous event's time: events must not go back in time.
    last_ms: u64,
}

/// Replays `trace_json` (docs/api.md "Command line") and returns its receipt.
pub fn replay(trace_json: &str) -> Result<Receipt, ReplayError> {
    let raw: RawTrace = serde_json::from_str(trace_json)?;
    let mut player = Player {
        policy: policy(&raw.breaker)?,
        base: Instant::now(),
        machines: BTreeMap::new(),
        run: Run::default(),
        last_ms: 0,
    };
    for (index, value) in raw.events.iter().enumerate() {
        player
            .play(index, value)
            .map_err(|message| ReplayError::Event { index, message })?;
    }
    Ok(player.receipt())
}

impl Player {
    /// Steps the breaker of event `index`'s machine and records what it decided; the error
    /// is the message the caller prefixes with the index.
    fn play(&mut self, index: usize, value: &Value) -> Result<(), String> {
        let (at_ms, name, kind) = parse_event(value)?;
        let now = self.now(at_ms)?;
        let policy = &self.policy;
        let m = self
            .machines
            .entry(name.clone())
            .or_insert_with(|| Machine {
                breaker: Breaker::new(policy),
                outstanding: VecDeque::new(),
            });
        self.run.remote_attempts.entry(name.clone()).or_insert(0);
        self.run.local_rejections.entry(name.clone()).or_insert(0);
        let event = match kind {
            Kind::Request => Event::Request,
            outcome => {
                let Some(t) = m.outstanding.pop_front() else {
                    return Err(format!("no admitted call to complete on '{name}'"));
                };
                match outcome {
                    Kind::Success => Event::Success(t),
                    Kind::Failure(f) => Event::Failure(t, f),
                    _ => Event::Cancel(t),
                }
            }
        };
        let (next, out) = m.breaker.clone().step(event, now, policy);
        m.breaker = next;
        match out.decision {
            Decision::Admit(t) => {
                m.outstanding.push_back(t);
                *self.run.remote_attempts.entry(name.clone()).or_insert(0) += 1;
            }
            Decision::Reject { skip, retry_after } => {
                *self.run.local_rejections.entry(name.clone()).or_insert(0) += 1;
                self.run.rejections.push(RejectionRow {
                    index,
                    at_ms,
                    machine: name.clone(),
                    skip: skip.as_str().to_string(),
                    retry_after_ms: retry_after.map(|d| d.as_millis()),
                });
            }
            Decision::Recorded | Decision::Stale => {}
        }
        if let Some(t) = out.transition {
            let row = self.transition_row(index, at_ms, name, t);
            self.run.transitions.push(row);
        }
        Ok(())
    }

    /// The instant of an event at `at_ms`, which must not be before the previous event's.
    fn now(&mut self, at_ms: u64) -> Result<Instant, String> {
        let last_ms = self.last_ms;
        if at_ms < last_ms {
            return Err(format!(
                "at_ms {at_ms} is before the previous event's {last_ms}"
            ));
        }
        self.last_ms = at_ms;
        // Bounding `now + max_cooldown` keeps every instant the breaker computes in range.
        self.base
            .checked_add(Duration::from_millis(at_ms))
            .filter(|now| now.checked_add(self.policy.max_cooldown).is_some())
            .ok_or_else(|| format!("at_ms {at_ms} is too large"))
    }

    fn transition_row(
        &self,
        index: usize,
        at_ms: u64,
        machine: String,
        t: Transition,
    ) -> TransitionRow {
        TransitionRow {
            index,
            at_ms,
            machine,
            from: t.from.as_str().to_string(),
            to: t.to.as_str().to_string(),
            reason: t.reason,
            failures: t.failures,
            cooldown_until_ms: t.cooldown_until.map(|i| self.ms(i)),
            remote_attempted: t.remote_attempted,
        }
    }

    /// Milliseconds since the trace's start: the receipt holds no absolute time.
    fn ms(&self, t: Instant) -> u128 {
        t.saturating_duration_since(self.base).as_millis()
    }

    /// Each machine's final state, and the hash of the whole run.
    fn receipt(mut self) -> Receipt {
        for (name, m) in &self.machines {
            let b = &m.breaker;
            let state = FinalState {
                state: b.phase.as_str().to_string(),
                consecutive_failures: b.failures,
                probe_successes: b.successes,
                cooldown_ms: b.cooldown.as_millis(),
                open_until_ms: b.open_until.map(|i| self.ms(i)),
                last_reason: b.last_reason.clone(),
                outstanding: m.outstanding.len(),
            };
            self.run.final_states.insert(name.clone(), state);
        }
        let run = self.run;
        // Plain structs of strings and numbers: serializing cannot fail.
        let compact = serde_json::to_vec(&run).unwrap_or_default();
        let sha256 = Sha256::digest(&compact)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Receipt { run, sha256 }
    }
}

/// What one trace event asks of its machine.
enum Kind {
    Request,
    Success,
    Failure(Failure),
    Cancel,
}

/// Reads one event; the error is the message the caller prefixes with the index.
fn parse_event(v: &Value) -> Result<(u64, String, Kind), String> {
    let obj = v.as_object().ok_or("expected an object")?;
    if let Some(key) = obj.keys().find(|k| !EVENT_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field '{key}'; expected at_ms, machine, event, reason or retry_after_ms"
        ));
    }
    let at_ms = match obj.get("at_ms") {
        None => return Err("missing at_ms".into()),
        Some(v) => whole(v).ok_or_else(|| {
            format!("at_ms must be a whole number of milliseconds, 0 or more; got {v}")
        })?,
    };
    let machine = match obj.get("machine") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err("machine must be a non-empty string".into()),
    };
    let event = match obj.get("event") {
        Some(Value::String(s)) => s.as_str(),
        _ => return Err("event must be a string".into()),
    };
    let kind = match event {
        "request" => Kind::Request,
        "success" => Kind::Success,
        "cancel" => Kind::Cancel,
        "failure" => Kind::Failure(failure(obj)?),
        other => {
            return Err(format!(
                "unknown event '{other}'; expected request, success, failure or cancel"
            ))
        }
    };
    if !matches!(kind, Kind::Failure(_)) {
        if let Some(key) = ["reason", "retry_after_ms"]
            .iter()
            .find(|k| obj.contains_key(**k))
        {
            return Err(format!("{key} is only for failure events"));
        }
    }
    Ok((at_ms, machine, kind))
}

/// A `failure` event's reason (a docs/api.md "Breaker classification" token) and optional
/// Retry-After.
fn failure(obj: &Map<String, Value>) -> Result<Failure, String> {
    let names = || FailureKind::ALL.map(FailureKind::as_str).join(", ");
    let kind = match obj.get("reason") {
        Some(Value::String(s)) => FailureKind::ALL.into_iter().find(|k| k.as_str() == s),
        _ => None,
    };
    let Some(kind) = kind else {
        return Err(match obj.get("reason") {
            None => format!("a failure needs a reason, one of {}", names()),
            Some(r) => format!("unknown reason {r}; expected one of {}", names()),
        });
    };
    let mut f = Failure::of_kind(kind);
    if let Some(v) = obj.get("retry_after_ms") {
        let ms = whole(v).ok_or_else(|| {
            format!("retry_after_ms must be a whole number of milliseconds; got {v}")
        })?;
        f.retry_after = Some(Duration::from_millis(ms));
    }
    Ok(f)
}

/// A whole, non-negative number (`5` or `5.0`); `None` for `-1`, `5.5`, `"NaN"` or `null`.
fn whole(v: &Value) -> Option<u64> {
    let n = v.as_number()?;
    n.as_u64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && (0.0..9.0e15).contains(&f)).then_some(f as u64)
    })
}

/// The `breaker` block, checked by registry.yaml's policy checks (its durations bounded by
/// [`DURATION_MAX`], not registry.yaml's [`SPAN_MAX`](crate::registry::SPAN_MAX));
/// defaults from [`Policy::default`].
fn policy(raw: &Map<String, Value>) -> Result<Policy, ReplayError> {
    let mut p = Policy::default();
    for (key, v) in raw {
        let bad = |message: &str| ReplayError::Policy {
            field: key.clone(),
            message: message.to_string(),
        };
        let count = || policy::threshold(whole(v)).map_err(bad);
        let duration = || {
            let s = v
                .as_str()
                .ok_or_else(|| bad("expected a duration like 20s or 15m"))?;
            policy::cooldown(s, DURATION_MAX).map_err(|e| bad(&e))
        };
        match key.as_str() {
            "failure_threshold" => p.failure_threshold = count()?,
            "success_threshold" => p.success_threshold = count()?,
            "cooldown" => p.cooldown = duration()?,
            "max_cooldown" => p.max_cooldown = duration()?,
            "backoff" => p.backoff = policy::backoff(v.as_f64()).map_err(bad)?,
            _ => return Err(bad("unknown field; expected failure_threshold, cooldown, backoff, max_cooldown or success_threshold")),
        }
    }
    if !policy::cooldowns_in_order(&p) {
        return Err(ReplayError::Policy {
            field: "max_cooldown".into(),
            message: format!("must be at least breaker.cooldown ({})", words(p.cooldown)),
        });
    }
    Ok(p)
}
