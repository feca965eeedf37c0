//! Prometheus metrics (`GET /metrics`) through the `metrics` facade.
//!
//! One recorder per process, installed by [`crate::run()`] (or a test) before it matters:
//! a gauge set before the recorder is in is lost, so [`crate::fleet::Fleet::gauge_states`] sets them again.
//! The first scrape installs it too. Histogram samples wait in the recorder until drained,
//! so a thread drains them every few seconds: a router nobody scrapes must not grow.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::breaker::Phase;
use crate::outcome::TaskStatus;

/// Latency buckets (seconds): from a fast-fail to a long generation.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0, 600.0,
];

/// Task wait buckets (seconds): a free slot at once, up to an outage waited out for a day.
const WAIT_BUCKETS: &[f64] = &[
    0.01, 0.1, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0,
    86400.0,
];

/// Overhead buckets (seconds): from a few microseconds of proxying to a slow upload read.
const OVERHEAD_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1,
    1.0,
];

/// The histogram of labrouter's own time per routed request (`Fleet::record_overhead`).
pub const OVERHEAD: &str = "labrouter_overhead_seconds";

/// The histogram of task waits (recorded by the scheduler when a task first starts).
pub const TASK_WAIT: &str = "labrouter_task_wait_seconds";

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder (once per process); `None` when another recorder got there first.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            // A full name wins over a suffix (the exporter tries `Full` matchers first).
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(TASK_WAIT.into()), WAIT_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Full(OVERHEAD.into()), OVERHEAD_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .ok()?;
            let handle = builder
                .install_recorder()
                .map_err(|e| tracing::warn!(error = %e, "metrics recorder not installed; /metrics stays empty"))
                .ok()?;
            // Histogram samples wait in the exporter's buckets until upkeep drains them:
            // every second, so a load of 40,000 requests/s holds ~1 MB of them, not 5. At
            // the lowest priority: draining a second of a heavy load takes milliseconds,
            // which would otherwise be taken from a serving thread (the tail of its
            // latency), on a machine whose cores the load keeps busy.
            let upkeep = handle.clone();
            let _ = std::thread::Builder::new().name("labrouter-metrics".into()).spawn(move || {
                lowest_priority();
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                    upkeep.run_upkeep();
                    free_drained();
                }
            });
            describe();
            Some(handle)
        })
        .as_ref()
}

/// How many epochs [`free_drained`] moves on: a drained block is freed two epochs after it
/// was retired, and each round frees up to 8 batches of them.
const FREE_ROUNDS: usize = 8;

/// Frees the sample blocks the upkeep just drained. The exporter retires them through
/// crossbeam-epoch, which frees retired memory only as threads pin the epoch again, a few
/// batches on every 128th pin. Under load the recording threads pin all the time; after it
/// nothing does, and the blocks of the load's last seconds stayed allocated: ~450 of
/// 1,280 bytes after the board's 256-connection burst, scattered over ~1.6 MB of a serving
/// thread's pages that could not be given back (`server/quiet.rs`). Moving the epoch on here
/// frees them within a second of the upkeep that drained them; with nothing retired it
/// costs a few atomic operations a second.
pub(crate) fn free_drained() {
    for _ in 0..FREE_ROUNDS {
        crossbeam_epoch::pin().flush();
    }
}

/// Lowers the calling thread to nice 19 (Linux: niceness is a thread's own); a failure
/// leaves it as it was.
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take and return plain integers; neither touches
    // memory of ours.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        if let Ok(tid) = libc::id_t::try_from(tid) {
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        }
    }
}

/// The Prometheus text exposition.
pub fn render() -> String {
    install().map_or_else(String::new, PrometheusHandle::render)
}

/// [`render`], with the `labrouter_tasks{status}` gauges set from `tasks` and the detached
/// flights' from `detached` (flights, bytes) first. They are set at scrape time: the counts
/// are one lock away, and a scrape never sees them staler than itself (a router without a
/// task queue has no task gauges).
pub fn render_with(tasks: &[(TaskStatus, u64)], (flights, bytes): (usize, usize)) -> String {
    let Some(handle) = install() else {
        return String::new();
    };
    for (status, n) in tasks {
        metrics::gauge!("labrouter_tasks", "status" => status.as_str()).set(*n as f64);
    }
    metrics::gauge!("labrouter_detached_flights").set(flights as f64);
    metrics::gauge!("labrouter_detached_bytes").set(bytes as f64);
    handle.render()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "labrouter_upstream_attempts_total",
        "Requests sent to a machine, by outcome"
    );
    describe_counter!(
        "labrouter_local_rejections_total",
        "Calls a breaker or the bulkhead kept from a machine, by reason"
    );
    describe_gauge!(
        "labrouter_breaker_state",
        "0 closed, 1 half_open, 2 open, 3 auth_failed, 4 forced_open"
    );
    describe_counter!(
        "labrouter_breaker_transitions_total",
        "Breaker transitions, by from and to"
    );
    describe_counter!(
        "labrouter_fallbacks_total",
        "Requests served by a later target than the chain's first"
    );
    describe_histogram!(
        "labrouter_request_duration_seconds",
        Unit::Seconds,
        "Time to the response head, by route"
    );
    describe_histogram!(
        "labrouter_upstream_first_byte_seconds",
        Unit::Seconds,
        "Time to a machine's response head"
    );
    describe_gauge!(
        "labrouter_tasks",
        "Unfinished tasks, by status (blocked, queued, waiting, running)"
    );
    describe_gauge!(
        "labrouter_detached_flights",
        "Keyed requests running on after their clients left (server.max_detached)"
    );
    describe_gauge!(
        "labrouter_detached_bytes",
        "Request bytes those detached requests hold (server.max_detached_bytes)"
    );
    describe_histogram!(
        OVERHEAD,
        Unit::Seconds,
        "Time a routed request spent in labrouter to its response head, less its time waiting on machines"
    );
    describe_histogram!(
        TASK_WAIT,
        Unit::Seconds,
        "Time from a task's submit to its first walk of its chain"
    );
}

/// The gauge value of a phase.
pub fn phase_value(p: Phase) -> f64 {
    match p {
        Phase::Closed => 0.0,
        Phase::HalfOpen => 1.0,
        Phase::Open => 2.0,
        Phase::AuthFailed => 3.0,
        Phase::ForcedOpen => 4.0,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn memory_retired_through_the_epoch_is_freed_by_the_upkeep_without_other_pins() {
        // What the exporter does with a drained block: retire it, then flush once.
        let freed = Arc::new(AtomicBool::new(false));
        let guard = crossbeam_epoch::pin();
        let flag = Arc::clone(&freed);
        guard.defer(move || flag.store(true, Ordering::SeqCst));
        guard.flush();
        drop(guard);
        // Nothing else pins here: without the upkeep's rounds it would stay retired.
        super::free_drained();
        assert!(freed.load(Ordering::SeqCst), "freed by the upkeep's rounds");
    }
}
