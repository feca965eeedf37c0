//! The live side: the task that turns breaker transitions into alerts, and the task that
//! keeps the digest schedule (catch-up at start, then every `digest_at`). Both only read the
//! lab and push to the [`Outbox`]: nothing here can hold up a request.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::broadcast;

use super::digest::{MachineNow, Sample};
use super::gather::render_from_store;
use super::outbox::{Message, Outbox};
use super::{alerts, photo, schedule, Clock, Options, Settings, LAST_DIGEST};
use crate::breaker::Phase;
use crate::machines::Transitioned;
use crate::service::Service;
use crate::store;

/// Turns every breaker transition into at most one message ([`alerts::Alerts`] decides);
/// the fallback line reads the registry serving now, so a reload shows in the next alert.
pub(super) async fn alert_loop(
    svc: Arc<Service>,
    s: Settings,
    mut rx: broadcast::Receiver<Transitioned>,
    outbox: Outbox,
) {
    let mut alerts = alerts::Alerts::new(s.alert_on_trip, s.page_after_cycles);
    loop {
        let t = match rx.recv().await {
            Ok(t) => t,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "telegram alerts fell behind the breaker transitions"
                );
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(alert) = alerts.on(&alerts::Change::from(&t)) else {
            continue;
        };
        let fleet = svc.fleet();
        let fbs = alerts::fallbacks(&fleet.registry, alert.machine(), |i| {
            fleet.machines.phase(i) != Phase::Closed
        });
        let what = match alert {
            alerts::Alert::Page { .. } => "page",
            _ => "alert",
        };
        outbox.push(Message::new(what, alerts::render(&alert, &fbs, &s.tz)));
    }
}

/// One alert when this router loses Redis (README "Several routers"), one when it is back: never
/// one per failed reconnect. Without `cluster:` there is nothing to watch.
pub(super) async fn cluster_loop(svc: Arc<Service>, outbox: Outbox) {
    use crate::cluster::State;
    let Some(link) = svc.bus().cluster().cloned() else {
        return;
    };
    let mut state = link.watch_state();
    let mut told_down = false;
    while state.changed().await.is_ok() {
        let now = *state.borrow_and_update();
        let text = match (now, told_down) {
            (State::Down, false) => {
                told_down = true;
                format!(
                    "⚠️ {}: Redis is unreachable ({}). This router runs on its own breakers until it returns.",
                    super::text::bold(link.node()),
                    super::text::escape(&link.view().last_error.unwrap_or_default()),
                )
            }
            (State::Up, true) => {
                told_down = false;
                format!(
                    "✅ {}: Redis is back; verdicts re-synced with the other routers.",
                    super::text::bold(link.node()),
                )
            }
            _ => continue,
        };
        outbox.push(Message::new("alert", text));
    }
}

/// Catches up a missed digest at start, then sends one per slot. It reads the wall clock
/// every `tick` rather than sleeping a whole day, so a suspended host or a changed clock is
/// noticed. The counter samples it reads are [`crate::sample`]'s.
pub(super) async fn digest_loop(svc: Arc<Service>, s: Settings, opts: Options, outbox: Outbox) {
    let path = svc.store().map(|st| st.path().to_path_buf());
    let last = match &path {
        Some(p) => last_digest(p.clone()).await,
        None => None,
    };
    let now = opts.clock.now();
    let mut last_sent = last;
    if schedule::catch_up_due(last, now, s.digest_at, &s.tz) {
        tracing::info!(last = ?last, "the router was down at the last digest time: sending the digest now");
        queue_digest(&svc, &s, &opts.clock, &outbox, path.as_deref()).await;
        last_sent = Some(now);
    }
    let mut next = schedule::next_send(now, s.digest_at, &s.tz);
    loop {
        let now = opts.clock.now();
        if now >= next {
            if schedule::slot_sends(last_sent, next) {
                queue_digest(&svc, &s, &opts.clock, &outbox, path.as_deref()).await;
                last_sent = Some(now);
            } else {
                tracing::info!("digest slot skipped: a catch-up digest went out shortly before");
            }
            next = schedule::next_send(now, s.digest_at, &s.tz);
        }
        let wait = schedule::sleep_for(now, next, opts.tick);
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// When the last digest was delivered, from the store's `meta`; `None` on a fresh store
/// (and on a read error, logged: a missed catch-up is better than a failed start).
async fn last_digest(path: PathBuf) -> Option<Timestamp> {
    let read = tokio::task::spawn_blocking(move || store::meta(&path, LAST_DIGEST)).await;
    match read {
        Ok(Ok(v)) => v
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|ms| Timestamp::from_millisecond(ms).ok()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read when the last digest went out");
            None
        }
        Err(_) => None,
    }
}

/// Renders the digest now and queues its picture, then its text parts; the last part carries the `meta` update,
/// so the send is remembered only once all of it was delivered.
async fn queue_digest(
    svc: &Service,
    s: &Settings,
    clock: &Clock,
    outbox: &Outbox,
    path: Option<&Path>,
) {
    let now = clock.now();
    let machines = live_machines(svc, now);
    let parts = match render_from_store(path.map(Path::to_path_buf), now, &s.tz, machines).await {
        Ok(parts) => parts,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the ledger for the digest");
            return;
        }
    };
    let names = svc
        .fleet()
        .registry
        .machines
        .iter()
        .map(|m| m.name.clone())
        .collect();
    let tz = s.tz.clone();
    if let Some(msg) = photo::message(path.map(Path::to_path_buf), names, tz, now).await {
        outbox.push(msg);
    }
    let n = parts.len();
    for (i, text) in parts.into_iter().enumerate() {
        let mut msg = Message::new("digest", text);
        if i + 1 == n {
            msg.remember = Some((LAST_DIGEST.to_string(), now.as_millisecond().to_string()));
        }
        outbox.push(msg);
    }
}

/// The machines of the serving registry with their live breakers and counters; the
/// counters are named by the service's start, as [`crate::sample`] names the stored ones.
fn live_machines(svc: &Service, now: Timestamp) -> Vec<MachineNow> {
    let fleet = svc.fleet();
    fleet
        .machines
        .snapshots()
        .map(|s| MachineNow {
            state: s.breaker.phase,
            counters: Some(Sample {
                at_ms: now.as_millisecond(),
                boot_ms: svc.boot_ms(),
                machine: s.name.clone(),
                remote_attempts: s.remote_attempts,
                local_rejections: s.local_rejections,
                rerouted: s.rerouted,
            }),
            name: s.name,
        })
        .collect()
}
