//! One walk of a task's chain: the same admission, breakers, classification, ledger and
//! metrics as an interactive request (`crate::proxy`), but the answer is kept whole and the
//! walk says what the task's scheduler needs: served, refused by the machine, parked
//! (nothing was sent), or failed — and whether the failure costs the task an attempt.

use std::sync::Arc;

use axum::http::StatusCode;
use bytes::Bytes;
use tokio::time::Instant;

use super::scheduler::Slots;
use crate::breaker::Phase;
use crate::fleet::Fleet;
use crate::outcome::{Attempted, Effect, FailureKind, Fault, ModelId, Reason, Skip};
use crate::request::Parsed;
use crate::upstream::{Answer, Endpoint};

/// How a walk ended.
#[derive(Debug)]
pub enum Walked {
    /// A machine answered; the task succeeded.
    Served {
        target: ModelId,
        status: StatusCode,
        body: Bytes,
        attempts: Vec<Attempted>,
    },
    /// A machine refused the request itself (400, 413, 422): the task fails at once.
    Refused {
        status: StatusCode,
        body: Bytes,
        attempts: Vec<Attempted>,
    },
    /// Nothing was sent: every target was held back. `by_slots` when only slots (not
    /// breakers) held it back; `soonest` is when a breaker may admit again, if known.
    Parked {
        attempts: Vec<Attempted>,
        by_slots: bool,
        soonest: Option<std::time::Duration>,
    },
    /// Sent and nothing served.
    Failed {
        attempts: Vec<Attempted>,
        /// Some try failed on a machine that stayed closed after it (SPEC §10).
        charged: bool,
        /// This task was the probe of a machine, and the probe failed.
        probe_failed: bool,
        /// The task's deadline ran out during the walk.
        expired: bool,
    },
}

/// Failures that mean the machine is down, not that the request is at fault.
fn machine_down(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::Refused
            | Reason::Reset
            | Reason::Dns
            | Reason::Tls
            | Reason::ConnectTimeout
            | Reason::Hung
    )
}

/// Walks `chain` once for a task whose body is `parsed`, until `deadline`. `mark` runs
/// once, after a machine admitted the task and before anything is sent (the scheduler
/// makes "running" durable there, so a restart knows the task was interrupted).
#[allow(clippy::too_many_arguments)] // one walk's whole context, passed once
pub async fn walk<F, Fut>(
    fleet: Arc<Fleet>,
    chain: Arc<[ModelId]>,
    endpoint: Endpoint,
    parsed: Parsed,
    deadline: Instant,
    slots: Arc<Slots>,
    label: String,
    mut mark: Option<F>,
) -> Walked
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let reg = &fleet.registry;
    let started = Instant::now();
    let mut attempts: Vec<Attempted> = Vec::new();
    let (mut charged, mut probe_failed, mut by_breaker) = (false, false, false);
    let mut soonest: Option<std::time::Duration> = None;
    for &model in chain.iter() {
        if Instant::now() >= deadline {
            return Walked::Failed {
                attempts,
                charged,
                probe_failed,
                expired: true,
            };
        }
        let machine = reg.models[model].machine;
        let m = &reg.machines[machine];
        // A task takes at most `task_slots` of a machine, never the last interactive slot.
        let Some(_slot) = slots.take(&fleet, machine, m.task_slots) else {
            attempts.push(Attempted::skipped(
                model,
                Skip::Busy,
                None,
                &crate::outcome::Held {
                    phase: fleet.machines.phase(machine),
                    failures: 0,
                    last_reason: None,
                },
            ));
            continue;
        };
        let lease = match fleet.machines.admit_pooled(machine).await {
            Ok(lease) => lease,
            Err(rej) => {
                if rej.skip != Skip::Busy {
                    by_breaker = true;
                    if let Some(ra) = rej.retry_after {
                        soonest = Some(soonest.map_or(ra, |s| s.min(ra)));
                    }
                }
                attempts.push(crate::proxy::skipped(&fleet, model, &rej));
                continue;
            }
        };
        let probe = lease.is_probe();
        if let Some(mark) = mark.take() {
            mark().await;
        }
        let body = parsed.body_for(&reg.models[model].backend);
        let upstream = &fleet.upstreams[machine];
        let failed = match upstream
            .attempt(model, endpoint.into(), body, deadline, &lease)
            .await
        {
            Ok(Answer::Full { status, body, .. }) => {
                lease.succeed();
                crate::proxy::count_served(&fleet, &label, model, &attempts, started);
                return Walked::Served {
                    target: model,
                    status,
                    body,
                    attempts,
                };
            }
            Ok(Answer::Stream { .. }) => {
                // A task never asks for a stream; a machine that streams anyway answered
                // badly.
                Attempted::counted(
                    model,
                    FailureKind::Malformed,
                    Fault::BadAnswer,
                    "malformed answer: a stream to a request that asked for none",
                )
            }
            Ok(Answer::Refused {
                status,
                body,
                attempted,
                ..
            }) => {
                crate::proxy::count_attempt(&fleet, machine, &attempted);
                lease.finish(&attempted);
                attempts.push(attempted);
                return Walked::Refused {
                    status,
                    body,
                    attempts,
                };
            }
            Err(a) => a,
        };
        crate::proxy::count_attempt(&fleet, machine, &failed);
        lease.finish(&failed);
        let stayed_closed = fleet.machines.phase(machine) == Phase::Closed;
        if probe && matches!(failed.effect, Effect::Counted(_)) {
            probe_failed = true;
        }
        // SPEC §10, whose fault: an attempt is used only by a failure on a machine that
        // stayed closed after it and that does not mean the machine is down.
        if stayed_closed
            && !probe
            && !machine_down(failed.reason)
            && failed.fault != Fault::Deadline
        {
            charged = true;
        }
        let expired = failed.fault == Fault::Deadline;
        let move_on = failed.fault.may_fail_over();
        attempts.push(failed);
        if expired {
            return Walked::Failed {
                attempts,
                charged,
                probe_failed,
                expired: true,
            };
        }
        if !move_on {
            break;
        }
    }
    if attempts.iter().all(|a| !a.was_sent()) {
        return Walked::Parked {
            attempts,
            by_slots: !by_breaker,
            soonest,
        };
    }
    Walked::Failed {
        attempts,
        charged,
        probe_failed,
        expired: false,
    }
}
