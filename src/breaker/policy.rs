//! A machine's breaker settings (registry `breaker:`) and the cooldown arithmetic on them.

use std::time::Duration;

/// The breaker settings of one machine (registry `breaker:`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub failure_threshold: u32,
    pub cooldown: Duration,
    pub backoff: f64,
    pub max_cooldown: Duration,
    pub success_threshold: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            failure_threshold: 3,
            cooldown: Duration::from_secs(60),
            backoff: 2.0,
            max_cooldown: Duration::from_secs(15 * 60),
            success_threshold: 1,
        }
    }
}

impl Policy {
    /// The cooldown after a failed probe: `current × backoff`, capped at `max_cooldown`.
    pub(super) fn backed_off(&self, current: Duration) -> Duration {
        let secs = current.as_secs_f64() * self.backoff;
        if !secs.is_finite() || secs >= self.max_cooldown.as_secs_f64() {
            self.max_cooldown
        } else {
            Duration::from_secs_f64(secs).max(current)
        }
    }

    /// An upstream's Retry-After lengthens a cooldown (never beyond `max_cooldown`).
    pub(super) fn with_retry_after(
        &self,
        cooldown: Duration,
        retry_after: Option<Duration>,
    ) -> Duration {
        match retry_after {
            Some(ra) if ra > cooldown => ra.min(self.max_cooldown).max(cooldown),
            _ => cooldown,
        }
    }
}
