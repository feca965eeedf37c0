//! `defaults:` and `machines:`: each machine's URL, health check, timeouts, breaker policy
//! concurrency and task slots, a machine's own values over the defaults.

use std::time::Duration;

use indexmap::IndexMap;
use serde_saphyr::Spanned;

use super::durations::duration;
use super::invalid::{err, Invalid};
use super::policy::validate_policy;
use super::raw::{RawDefaults, RawHealth, RawMachine, RawTimeouts};
use super::url::validate_url;
use super::{Api, Health, Machine, Timeouts};
use crate::breaker::Policy;

/// The timeouts of a machine when registry.yaml sets none.
const BASE_TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(5),
    first_byte: Duration::from_secs(5),
    idle: Duration::from_secs(30),
    total: Duration::from_secs(600),
};

/// A machine's `max_concurrency` when registry.yaml sets none.
const BASE_CONCURRENCY: u32 = 8;

/// A machine's `task_slots` when registry.yaml sets none (docs/api.md "Tasks").
const BASE_TASK_SLOTS: u32 = 1;

/// How long a machine's answer for a model keeps the model warm (Ollama's own keep-alive).
const WARM_FOR: Duration = Duration::from_secs(300);

/// How often a `discover: true` machine's model list is read when it sets no
/// `discover_every`.
const DISCOVER_EVERY: Duration = Duration::from_secs(300);

/// The most requests a machine may be said to run at once.
const PARALLEL_MAX: u32 = 1024;

/// The machines, in the file's order; `defaults:` is checked first.
pub(super) fn validate_machines(
    defaults: &RawDefaults,
    raw: &Spanned<IndexMap<String, RawMachine>>,
) -> Result<Vec<Machine>, Invalid> {
    let d_timeouts = timeouts(&defaults.timeouts, &BASE_TIMEOUTS)?;
    let d_policy = validate_policy(&defaults.breaker, &Policy::default())?;
    let d_concurrency = concurrency(&defaults.max_concurrency, BASE_CONCURRENCY)?;
    if let Some(v) = defaults.task_slots.as_ref().filter(|v| v.value == 0) {
        return err(
            v.referenced,
            "defaults.task_slots: expected a whole number of 1 or more",
        );
    }

    if raw.value.is_empty() {
        return err(raw.referenced, "machines: expected at least one machine");
    }
    let mut machines = Vec::with_capacity(raw.value.len());
    for (name, m) in &raw.value {
        let url = validate_url(&m.url)?;
        let api = match m.api.as_ref() {
            None => Api::OpenAi,
            Some(v) => match v.value.as_str() {
                "openai" => Api::OpenAi,
                "ollama" => Api::Ollama,
                other => {
                    return err(
                        v.referenced,
                        format!(
                            "machine '{name}': api: expected 'openai' or 'ollama', got '{}'",
                            crate::text::bounded(other)
                        ),
                    )
                }
            },
        };
        let health = m.health.as_ref().map(health).transpose()?;
        let max_concurrency = concurrency(&m.max_concurrency, d_concurrency)?;
        let task_slots = task_slots(
            name,
            m.task_slots.as_ref(),
            defaults.task_slots.as_ref(),
            max_concurrency,
        )?;
        let shared = super::cluster::shared(name, m.shared.as_ref(), &url)?;
        let parallel = parallel(name, m.parallel.as_ref())?;
        let warm_for = duration(&m.warm_for, WARM_FOR, "warm_for")?;
        let discover_every = duration(&m.discover_every, DISCOVER_EVERY, "discover_every")?;
        machines.push(Machine {
            name: name.clone(),
            url,
            api,
            api_key_env: m.api_key_env.clone(),
            health,
            timeouts: timeouts(&m.timeouts, &d_timeouts)?,
            breaker: validate_policy(&m.breaker, &d_policy)?,
            max_concurrency,
            task_slots,
            shared,
            parallel,
            warm_for,
            discover: m.discover,
            discover_every,
        });
    }
    Ok(machines)
}

fn health(h: &RawHealth) -> Result<Health, Invalid> {
    if !h.path.value.starts_with('/') {
        return err(
            h.path.referenced,
            "health.path: expected a path starting with '/'",
        );
    }
    let every = duration(&Some(h.every.clone()), Duration::ZERO, "health.every")?;
    Ok(Health {
        path: h.path.value.clone(),
        every,
    })
}

fn timeouts(raw: &RawTimeouts, base: &Timeouts) -> Result<Timeouts, Invalid> {
    Ok(Timeouts {
        connect: duration(&raw.connect, base.connect, "timeouts.connect")?,
        first_byte: duration(&raw.first_byte, base.first_byte, "timeouts.first_byte")?,
        idle: duration(&raw.idle, base.idle, "timeouts.idle")?,
        total: duration(&raw.total, base.total, "timeouts.total")?,
    })
}

fn concurrency(v: &Option<Spanned<u32>>, fallback: u32) -> Result<u32, Invalid> {
    match v {
        Some(v) if v.value == 0 => err(
            v.referenced,
            "max_concurrency: expected a whole number of 1 or more",
        ),
        Some(v) => Ok(v.value),
        None => Ok(fallback),
    }
}

/// A machine's `task_slots` (its own, else the defaults'): at least 1 and at most its
/// `max_concurrency`, since a task runs in one of the machine's request slots.
fn task_slots(
    machine: &str,
    own: Option<&Spanned<u32>>,
    inherited: Option<&Spanned<u32>>,
    max_concurrency: u32,
) -> Result<u32, Invalid> {
    let (v, from) = match (own, inherited) {
        (Some(v), _) => (v, ""),
        (None, Some(v)) => (v, " (from defaults)"),
        (None, None) => return Ok(BASE_TASK_SLOTS),
    };
    if (1..=max_concurrency).contains(&v.value) {
        return Ok(v.value);
    }
    err(
        v.referenced,
        format!(
            "machine '{machine}': task_slots{from}: expected a whole number from 1 to the machine's max_concurrency ({max_concurrency}), got {}",
            v.value
        ),
    )
}

/// A machine's `parallel` (docs/registry.md "routes:"): how many requests it runs at once,
/// 1 when not written.
fn parallel(machine: &str, v: Option<&Spanned<u32>>) -> Result<u32, Invalid> {
    match v {
        None => Ok(1),
        Some(v) if (1..=PARALLEL_MAX).contains(&v.value) => Ok(v.value),
        Some(v) => err(
            v.referenced,
            format!(
                "machine '{machine}': parallel: expected a whole number from 1 to {PARALLEL_MAX}, got {}",
                v.value
            ),
        ),
    }
}
