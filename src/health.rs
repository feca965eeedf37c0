//! Active health checks (docs/registry.md "machines:"), for machines whose registry entry sets
//! `health`, and the per-machine schedule they share with the warm-model reads
//! (`crate::warm`).
//!
//! A failed check is a qualifying failure, so an idle dead machine opens without costing a
//! user request; a passing check on an open breaker whose cooldown has passed acts as its
//! probe; a passing check never resets failures counted from real requests (the pure
//! breaker decides all three).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::{Event, Failure, FailureKind};
use crate::fleet::Fleet;
use crate::outcome::MachineId;
use crate::registry::Machine;
use crate::service::Service;

/// How often a schedule looks at the registry for due machines (and for reloads).
const TICK: Duration = Duration::from_secs(1);

/// When each machine is next due, by name, so a reload keeps the schedule.
pub(crate) struct Schedule {
    due: HashMap<String, Instant>,
    /// A machine new to the schedule is due at once (else after its first interval).
    at_once: bool,
}

impl Schedule {
    pub(crate) fn new(at_once: bool) -> Schedule {
        Schedule {
            due: HashMap::new(),
            at_once,
        }
    }

    /// Runs forever: `job` for each machine of the serving fleet whose interval (`every`;
    /// `None`: not scheduled) has come round.
    pub(crate) async fn run(
        mut self,
        svc: Arc<Service>,
        every: impl Fn(&Fleet, MachineId, &Machine) -> Option<Duration>,
        job: impl Fn(Arc<Fleet>, MachineId),
    ) {
        loop {
            let fleet = svc.fleet();
            let now = Instant::now();
            let mut next = now + TICK;
            for (i, m) in fleet.registry.machines.enumerate() {
                let Some(every) = every(&fleet, i, m) else {
                    self.due.remove(&m.name);
                    continue;
                };
                let first = if self.at_once { now } else { now + every };
                let at = *self.due.entry(m.name.clone()).or_insert(first);
                if at <= now {
                    self.due.insert(m.name.clone(), now + every);
                    job(Arc::clone(&fleet), i);
                } else {
                    next = next.min(at);
                }
            }
            // Machines that left the registry leave the schedule.
            self.due
                .retain(|name, _| fleet.registry.machine_index(name).is_some());
            drop(fleet);
            tokio::time::sleep_until(next).await;
        }
    }
}

/// Runs forever: each machine with `health` is checked every `health.every`.
pub async fn run(svc: Arc<Service>) {
    let every = |_: &Fleet, _: MachineId, m: &Machine| m.health.as_ref().map(|h| h.every);
    Schedule::new(false)
        .run(svc, every, |fleet, i| {
            tokio::spawn(async move {
                let event = match fleet.upstreams[i].health().await {
                    Ok(()) => Event::HealthPassed,
                    Err(why) => Event::HealthFailed(Failure::new(
                        FailureKind::HealthCheck,
                        format!("health check failed: {why}"),
                    )),
                };
                fleet.machines.step(i, event);
            });
        })
        .await;
}
