//! `tasks:` (docs/api.md "Tasks"): how many tasks run and wait, how long they may take and are
//! kept, how many failed walks one may use, how large its request may be, and where its callback
//! may go. Every field has a default, so a registry without the block gets them all.

use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::callback_allow::AllowRule;
use super::durations::{duration, duration_within};
use super::invalid::{err, Invalid};
use super::raw::{RawRegistry, RawTasks};
use super::server::{size, Server};
use super::url::without_userinfo;
use super::Machine;

/// `tasks:` (docs/api.md "Tasks"); every field has a default, so a registry without the block gets
/// them.
#[derive(Clone, Debug, PartialEq)]
pub struct Tasks {
    /// Tasks in flight at once, all machines together (default 4; 1..=10,000).
    pub max_running: u32,
    /// Tasks not finished, beyond which a submit gets 429 `queue_full` (default 10,000;
    /// 1..=10,000,000).
    pub max_queued: u32,
    /// Unfinished tasks one API key may have (`None`, the default: only `max_queued`
    /// bounds them; 1..=`max_queued`).
    pub max_queued_per_key: Option<u32>,
    /// Finished tasks kept at most; the oldest are pruned first (default 100,000;
    /// 1..=10,000,000). A parent a follow-up still waits on is kept whatever this says.
    pub max_finished: u64,
    /// Bytes of finished tasks kept at most (their results, attempts and errors; their
    /// requests are dropped when they end); the oldest are pruned first (default 1GiB; at
    /// least 1MiB).
    pub max_finished_bytes: u64,
    /// A task without its own deadline expires this long after its submit (default 24h).
    pub default_deadline: Duration,
    /// Chain walks that may fail, on a machine that stayed closed, before the task fails:
    /// never below any machine's `failure_threshold`, so a lone task that meets a fresh
    /// outage waits rather than fails (default max(3, the largest threshold); 1..=100).
    pub max_attempts: u32,
    /// Finished tasks and their idempotency keys are pruned after this (default 7d).
    pub keep: Duration,
    /// A task's request body; larger gets 413 (default 1MiB, or `server.max_body` when that
    /// is smaller: a task arrives inside a request body).
    pub max_request_body: usize,
    /// Where callbacks may go; empty refuses every callback.
    pub callback_allow: Vec<AllowRule>,
    /// The name of the environment variable whose secret signs callbacks (never the secret).
    pub callback_secret_env: Option<String>,
}

const MAX_RUNNING_DEFAULT: u32 = 4;
const MAX_RUNNING_LIMIT: u32 = 10_000;
const MAX_QUEUED_DEFAULT: u32 = 10_000;
const MAX_QUEUED_LIMIT: u32 = 10_000_000;
const MAX_FINISHED_DEFAULT: u32 = 100_000;
const MAX_FINISHED_LIMIT: u32 = 10_000_000;
const FINISHED_BYTES_DEFAULT: usize = 1 << 30;
const FINISHED_BYTES_LEAST: usize = 1 << 20;
const DEADLINE_DEFAULT: Duration = Duration::from_secs(86_400);
/// `max_attempts` when no machine's `failure_threshold` asks for more.
const MAX_ATTEMPTS_FLOOR: u32 = 3;
const MAX_ATTEMPTS_LIMIT: u32 = 100;
const KEEP_DEFAULT: Duration = Duration::from_secs(7 * 86_400);
/// Retention, not a timeout: up to a year.
const KEEP_MAX: Duration = Duration::from_secs(365 * 86_400);
const REQUEST_BODY_DEFAULT: usize = 1 << 20;
const CALLBACK_ALLOW_DEFAULT: &[&str] = &["http://127.0.0.1:", "http://localhost:"];

/// Why `max_attempts` may not go below a machine's `failure_threshold`.
const WHY_ATTEMPTS: &str = "keep max_attempts ≥ failure_threshold so a lone task that meets a fresh outage waits rather than fails (docs/api.md, Tasks)";

/// `tasks:` after `server:` and the machines, whose `max_body` and breaker thresholds bound it.
pub(super) fn validate_tasks(
    raw: &RawRegistry,
    server: &Server,
    machines: &[Machine],
) -> Result<Tasks, Invalid> {
    let none = RawTasks::default();
    let t = raw.tasks.as_ref().unwrap_or(&none);
    let max_request_body = max_request_body(t, server)?;
    let max_queued = count(
        &t.max_queued,
        MAX_QUEUED_DEFAULT,
        "max_queued",
        MAX_QUEUED_LIMIT,
    )?;
    let max_queued_per_key = t
        .max_queued_per_key
        .as_ref()
        .map(|_| count(&t.max_queued_per_key, 0, "max_queued_per_key", max_queued))
        .transpose()?;
    let max_finished_bytes = max_finished_bytes(t)?;
    Ok(Tasks {
        max_running: count(
            &t.max_running,
            MAX_RUNNING_DEFAULT,
            "max_running",
            MAX_RUNNING_LIMIT,
        )?,
        max_queued,
        max_queued_per_key,
        max_finished: u64::from(count(
            &t.max_finished,
            MAX_FINISHED_DEFAULT,
            "max_finished",
            MAX_FINISHED_LIMIT,
        )?),
        max_finished_bytes: max_finished_bytes as u64,
        default_deadline: duration(
            &t.default_deadline,
            DEADLINE_DEFAULT,
            "tasks.default_deadline",
        )?,
        max_attempts: max_attempts(raw, &t.max_attempts, machines)?,
        keep: duration_within(&t.keep, KEEP_DEFAULT, "tasks.keep", KEEP_MAX)?,
        max_request_body,
        callback_allow: callback_allow(&t.callback_allow)?,
        callback_secret_env: t.callback_secret_env.as_ref().map(env_name).transpose()?,
    })
}

/// `max_request_body`: at most `server.max_body`, since a task arrives in a request body.
fn max_request_body(t: &RawTasks, server: &Server) -> Result<usize, Invalid> {
    match (
        &t.max_request_body,
        size(
            &t.max_request_body,
            REQUEST_BODY_DEFAULT.min(server.max_body),
            "tasks.max_request_body",
        )?,
    ) {
        (Some(s), n) if n > server.max_body => err(
            s.referenced,
            format!(
                "tasks.max_request_body: expected a size of at most server.max_body ({} bytes), since a task arrives in a request body, got '{}'",
                server.max_body, s.value
            ),
        ),
        (_, n) => Ok(n),
    }
}

/// `max_finished_bytes`: at least 1MiB when written.
fn max_finished_bytes(t: &RawTasks) -> Result<usize, Invalid> {
    let Some(s) = &t.max_finished_bytes else {
        return Ok(FINISHED_BYTES_DEFAULT);
    };
    let n = size(&t.max_finished_bytes, 0, "tasks.max_finished_bytes")?;
    if n < FINISHED_BYTES_LEAST {
        return err(
            s.referenced,
            format!(
                "tasks.max_finished_bytes: expected a size of at least 1MiB, got '{}'",
                s.value
            ),
        );
    }
    Ok(n)
}

/// A whole number from 1 to `max`, or `fallback` when not written.
fn count(v: &Option<Spanned<u64>>, fallback: u32, what: &str, max: u32) -> Result<u32, Invalid> {
    let Some(v) = v else {
        return Ok(fallback);
    };
    u32::try_from(v.value)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| {
            (
                v.referenced,
                format!(
                    "tasks.{what}: expected a whole number from 1 to {max}, got {}",
                    v.value
                ),
            )
        })
}

/// `max_attempts`: at least every machine's `failure_threshold` (docs/api.md "Tasks"), at most
/// [`MAX_ATTEMPTS_LIMIT`]; by default the larger of [`MAX_ATTEMPTS_FLOOR`] and the largest
/// threshold.
fn max_attempts(
    raw: &RawRegistry,
    written: &Option<Spanned<u64>>,
    machines: &[Machine],
) -> Result<u32, Invalid> {
    // The first machine with the largest threshold: the one to name.
    let strictest = machines
        .iter()
        .enumerate()
        .reduce(|a, b| {
            if b.1.breaker.failure_threshold > a.1.breaker.failure_threshold {
                b
            } else {
                a
            }
        })
        .map(|(i, m)| (i, m.name.as_str(), m.breaker.failure_threshold));
    if let Some((i, name, threshold)) = strictest.filter(|s| s.2 > MAX_ATTEMPTS_LIMIT) {
        // No max_attempts can be both allowed and ≥ this threshold: the threshold is the
        // value to fix, on the machine or in defaults.
        let at = raw
            .machines
            .value
            .get_index(i)
            .and_then(|(_, m)| m.breaker.failure_threshold.as_ref())
            .or(raw.defaults.breaker.failure_threshold.as_ref())
            .map_or(Location::UNKNOWN, |s| s.referenced);
        return err(
            at,
            format!(
                "machine '{name}': breaker.failure_threshold: {threshold} leaves no valid tasks.max_attempts, which may be at most {MAX_ATTEMPTS_LIMIT}; {WHY_ATTEMPTS}; expected a threshold of at most {MAX_ATTEMPTS_LIMIT}"
            ),
        );
    }
    let least = strictest.map_or(1, |s| s.2);
    let Some(v) = written else {
        return Ok(least.max(MAX_ATTEMPTS_FLOOR));
    };
    let n = count(written, 0, "max_attempts", MAX_ATTEMPTS_LIMIT)?;
    match strictest {
        Some((_, name, threshold)) if n < threshold => err(
            v.referenced,
            format!(
                "tasks.max_attempts: {n} is below breaker.failure_threshold {threshold} of machine '{name}'; expected a whole number from {threshold} to {MAX_ATTEMPTS_LIMIT}: {WHY_ATTEMPTS}"
            ),
        ),
        _ => Ok(n),
    }
}

/// The written rules, or [`CALLBACK_ALLOW_DEFAULT`] when the key is absent.
fn callback_allow(written: &Option<Vec<Spanned<String>>>) -> Result<Vec<AllowRule>, Invalid> {
    let Some(entries) = written else {
        return Ok(CALLBACK_ALLOW_DEFAULT
            .iter()
            .filter_map(|s| AllowRule::parse(s).ok())
            .collect());
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            AllowRule::parse(&e.value).map_err(|why| {
                (
                    e.referenced,
                    format!(
                        "tasks.callback_allow[{i}]: {why}; expected \"scheme://host:\" (any port), \"scheme://host:port\" or \"scheme://host\" (the scheme's default port only), with scheme http or https, got '{}'",
                        // Never repeat a password the entry may hold.
                        without_userinfo(&e.value)
                    ),
                )
            })
        })
        .collect()
}

/// An environment variable's name as a shell writes it. The error never repeats the value:
/// it may be the secret itself, pasted in by mistake.
fn env_name(v: &Spanned<String>) -> Result<String, Invalid> {
    let s = v.value.as_str();
    let ok = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return err(
            v.referenced,
            "tasks.callback_secret_env: expected the name of an environment variable (letters, digits and _, like LABROUTER_WEBHOOK_SECRET), not the secret itself",
        );
    }
    Ok(s.to_string())
}
