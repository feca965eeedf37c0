//! Active health checks (docs/registry.md "machines:"), for machines whose registry entry sets
//! `health`.
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
use crate::service::Service;

/// How often the checker looks at the registry for due checks (and for reloads).
const TICK: Duration = Duration::from_secs(1);

/// Runs forever: each machine with `health` is checked every `health.every`.
pub async fn run(svc: Arc<Service>) {
    let mut due: HashMap<String, Instant> = HashMap::new();
    loop {
        let fleet = svc.fleet();
        let now = Instant::now();
        let mut next = now + TICK;
        for (i, m) in fleet.registry.machines.enumerate() {
            let Some(health) = &m.health else { continue };
            let at = *due.entry(m.name.clone()).or_insert(now + health.every);
            if at <= now {
                due.insert(m.name.clone(), now + health.every);
                let fleet = Arc::clone(&fleet);
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
            } else {
                next = next.min(at);
            }
        }
        // Machines that left the registry leave the schedule.
        due.retain(|name, _| fleet.registry.machine_index(name).is_some());
        drop(fleet);
        tokio::time::sleep_until(next).await;
    }
}
