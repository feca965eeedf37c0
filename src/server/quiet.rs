//! What a load leaves behind, given back when its serving thread falls quiet.
//!
//! After a burst (the board's 256 connections), a serving thread kept ~30 MB above its idle
//! RSS for as long as the quiet lasted: the hundreds of upstream connections the burst
//! opened, idle in the pool for its 90 s with their buffers, and the pages the allocator
//! (`crate::heap`) holds free, which it hands back only from inside a later
//! allocation on the same thread, which an idle thread never makes. This task reads its
//! thread's busy time twice a second; on the first quiet tick after a loaded one it closes
//! the thread's idle upstream connections, and on that tick and the few after it (the
//! metrics upkeep frees samples this thread allocated, on its own thread, every second)
//! asks the allocator to give back its free pages. A trickle of requests never counts as a
//! load, so light traffic keeps its connections.
//!
//! On those ticks it also hands on what the thread retired through crossbeam-epoch (the
//! metrics' sample blocks, and the epoch's own batches it freed): up to 64 retirements wait
//! in each thread's batch until the thread pins the epoch again, and after a load a serving
//! thread does not. The 2 KB batches the metrics upkeep had made stayed behind them: ~55 of
//! them, 170 KB, after the board's sequence.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use crate::service::Service;

/// How often the thread's busy time is read.
const TICK: Duration = Duration::from_millis(500);

/// A tick this busy (10%) was a load.
const LOADED: Duration = Duration::from_millis(50);

/// A tick less busy than this (1%) is quiet.
const QUIET: Duration = Duration::from_millis(5);

/// How many quiet ticks after a load give memory back (covers the metrics upkeep's second).
const GIVE_BACK_TICKS: u32 = 4;

/// Runs for as long as its runtime does, on a current-thread runtime (worker 0).
pub(super) async fn give_back_when_quiet(svc: Arc<Service>) {
    let metrics = Handle::current().metrics();
    let busy = || metrics.worker_total_busy_duration(0);
    let mut before = busy();
    // Quiet ticks since the last load; from GIVE_BACK_TICKS on, nothing is left to give.
    let mut quiet_ticks = GIVE_BACK_TICKS;
    loop {
        tokio::time::sleep(TICK).await;
        let now = busy();
        let spent = now.saturating_sub(before);
        before = now;
        if spent >= LOADED {
            quiet_ticks = 0;
        } else if spent < QUIET && quiet_ticks < GIVE_BACK_TICKS {
            if quiet_ticks == 0 {
                for upstream in svc.fleet().upstreams.iter() {
                    upstream.let_idle_go();
                }
            }
            quiet_ticks += 1;
            // The batches this makes are kept past the load: not in its pages.
            crate::heap::in_default(crate::telemetry::free_drained);
            crate::heap::give_back();
        }
    }
}
