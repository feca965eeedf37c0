//! Counter samples (README "Telegram"'s digest counts): every minute, each machine's live counters
//! go to the store, named by the service's start ([`Service::boot_ms`]), so the daily digest can
//! count a day's requests across restarts. [`crate::run()`] starts this whenever the service has a
//! store, whether or not Telegram is on; Telegram only reads the samples.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::MissedTickBehavior;

use crate::service::Service;
use crate::store::{self, Counts, Msg};

/// How often the live counters are written.
pub const EVERY: Duration = Duration::from_secs(60);

/// Samples now and then every `every`, until the task is aborted.
pub async fn sample_counters_every(svc: Arc<Service>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    // After a stall (a suspended host), one sample and then the same pace again.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sample_counters(&svc, crate::clock::wall());
    }
}

/// Queues the live counters of every machine of the serving registry, as at `at`, for the
/// store's writer (nothing without a store).
pub fn sample_counters(svc: &Service, at: SystemTime) {
    let Some(st) = svc.store() else { return };
    let fleet = svc.fleet();
    let machines = fleet
        .machines
        .snapshots()
        .map(|s| Counts {
            machine: s.name,
            remote_attempts: s.remote_attempts,
            local_rejections: s.local_rejections,
            rerouted: s.rerouted,
        })
        .collect();
    let _ = st.sender().send(Msg::Counters {
        at_ms: store::ms(at),
        boot_ms: svc.boot_ms(),
        machines,
    });
}
