//! Another router's verdict on a shared machine, taken over without a failure of our own
//! (README "Several routers"). Pure, like [`Breaker::step`]: the cluster link reads Redis, this
//! decides.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Breaker, Phase, Policy, Transition};

/// A peer's verdict, validated and clamped by the reader: only durations, never a peer's
/// wall clock, so hosts' clocks never matter.
#[derive(Clone, Debug, PartialEq)]
pub struct Adopted {
    /// `Open`, `ForcedOpen` or `Closed`: the phases a router publishes.
    pub state: Phase,
    /// The cooldown of that open interval (the next one's, when closed).
    pub cooldown: Duration,
    /// What is left of the open interval, as Redis counts it (`PTTL`).
    pub left: Duration,
    pub node: Arc<str>,
    pub reason: String,
    pub failures: u32,
}

impl Breaker {
    /// Takes over `a` at `now`. A breaker paused for its credentials (`auth_failed`, this
    /// router's key) keeps its pause; one forced open here by hand is reopened only by hand
    /// (a peer's `closed` does not close it, a peer's manual close does). An open breaker
    /// that adopts another open interval moves its end without a new transition.
    pub fn adopt(
        mut self,
        a: &Adopted,
        now: Instant,
        policy: &Policy,
    ) -> (Breaker, Option<Transition>) {
        let mut transition = None;
        let cooldown = a.cooldown.clamp(policy.cooldown, policy.max_cooldown);
        let by_hand = a.reason.starts_with("manual ");
        match (a.state, self.phase) {
            (_, Phase::AuthFailed) => return (self, None),
            (Phase::Open, Phase::ForcedOpen) => return (self, None),
            (Phase::Open, phase) => {
                let left = a.left.min(cooldown);
                let until = crate::clock::after(now, left);
                self.last_reason = Some(crate::text::bounded(&a.reason));
                self.opened_at = Some(now.checked_sub(cooldown - left).unwrap_or(now));
                self.cooldown = cooldown;
                if phase == Phase::Open {
                    self.open_until = Some(until);
                } else {
                    self.failures = a.failures;
                    let reason =
                        format!("opened by {}: {}", a.node, crate::text::bounded(&a.reason));
                    self.enter(Phase::Open, reason, false, Some(until), &mut transition);
                    self.open_until = Some(until);
                }
            }
            (Phase::ForcedOpen, Phase::ForcedOpen) => return (self, None),
            (Phase::ForcedOpen, _) => {
                let reason = format!(
                    "forced open on {}: {}",
                    a.node,
                    crate::text::bounded(&a.reason)
                );
                self.last_reason = Some(reason.clone());
                self.enter(Phase::ForcedOpen, reason, false, None, &mut transition);
            }
            (Phase::Closed, Phase::ForcedOpen) if !by_hand => return (self, None),
            (Phase::Closed, Phase::Open | Phase::HalfOpen | Phase::ForcedOpen) => {
                self.cooldown = cooldown;
                let reason = format!("closed by {}: {}", a.node, crate::text::bounded(&a.reason));
                self.close(reason, false, &mut transition);
            }
            _ => return (self, None),
        }
        self.decided_by = Some(Arc::clone(&a.node));
        (self, transition)
    }
}

#[cfg(test)]
mod tests;
