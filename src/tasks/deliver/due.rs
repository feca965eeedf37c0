//! A finished task's pending callback as its next attempt (body, `webhook-id`, owner) and
//! where the delivery stands after each attempt ([`Progress`]). Pure: no clock, no store.

use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;

use crate::outcome::Delivery;
use crate::tasks::model::Task;
use crate::webhook;

/// A callback's next attempt, as read from the finished task.
pub(super) struct Due {
    pub(super) url: Result<reqwest::Url, String>,
    /// The task id + ":" + its status: the same on every attempt, so receivers dedupe.
    pub(super) webhook_id: String,
    pub(super) body: Vec<u8>,
    pub(super) finished_ms: i64,
    /// Whose task it is (a hash of the API key that submitted it; '' without keys): the
    /// attempt counts against this owner's slots.
    pub(super) owner: String,
    pub(super) progress: Progress,
}

/// A finished task with a pending callback, as the body and headers of its next attempt.
pub(super) fn due(task: Option<Task>, request: Option<bytes::Bytes>) -> Option<Due> {
    let task = task?;
    let callback = task.callback.as_ref()?;
    let finished_ms = task.finished_ms?;
    if callback.state != Delivery::Pending || !task.status.is_finished() {
        return None;
    }
    let request = request.and_then(|b| serde_json::from_slice::<Box<RawValue>>(&b).ok());
    let shown = serde_json::to_value(task.whole(request.as_deref()))
        .unwrap_or_else(|_| json!({"id": task.id, "object": "task", "status": task.status}));
    Some(Due {
        url: reqwest::Url::parse(&callback.url)
            .map_err(|_| "the callback URL cannot be parsed".to_owned()),
        webhook_id: format!("{}:{}", task.id, task.status.as_str()),
        body: webhook::body_for(&shown),
        finished_ms,
        owner: task.owner.clone(),
        progress: Progress {
            state: callback.state,
            attempts: callback.attempts,
            last_error: callback.last_error.clone(),
        },
    })
}

/// Where a callback stands, as the task shows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Progress {
    pub(super) state: Delivery,
    pub(super) attempts: u32,
    /// The last failed attempt's words; kept once delivered (it tells why it took more
    /// than one attempt).
    pub(super) last_error: Option<String>,
}

impl Progress {
    /// Counts an attempt that ended `outcome`, the first having been due `since_first`
    /// ago; the wait before the next one, or `None` once delivered or given up.
    pub(super) fn attempted(
        &mut self,
        outcome: Result<(), String>,
        since_first: Duration,
    ) -> Option<Duration> {
        self.attempts = self.attempts.saturating_add(1);
        match outcome {
            Ok(()) => {
                self.state = Delivery::Delivered;
                None
            }
            Err(why) => {
                self.last_error = Some(why);
                let next = webhook::next_retry(self.attempts, since_first);
                if next.is_none() {
                    self.state = Delivery::Failed;
                }
                next
            }
        }
    }

    /// Gives the delivery up without an attempt: its URL cannot, or may no longer, receive
    /// callbacks. Nothing was sent, so no attempt is counted; `None` (no next attempt).
    pub(super) fn refused(&mut self, why: String) -> Option<Duration> {
        self.state = Delivery::Failed;
        self.last_error = Some(why);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Progress {
        Progress {
            state: Delivery::Pending,
            attempts: 0,
            last_error: None,
        }
    }

    const fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn a_2xx_delivers_and_ends_the_delivery() {
        let mut p = fresh();
        assert_eq!(p.attempted(Ok(()), s(0)), None);
        assert_eq!(
            (p.state, p.attempts, p.last_error),
            (Delivery::Delivered, 1, None)
        );
    }

    #[test]
    fn failures_retry_within_5s_then_doubling_and_keep_the_last_words() {
        let mut p = fresh();
        assert_eq!(p.attempted(Err("HTTP 500".into()), s(0)), Some(s(5)));
        assert_eq!(
            p.attempted(Err("connection refused".into()), s(5)),
            Some(s(10))
        );
        assert_eq!(p.state, Delivery::Pending);
        assert_eq!(p.attempted(Ok(()), s(15)), None);
        assert_eq!(p.state, Delivery::Delivered);
        assert_eq!(p.attempts, 3);
        assert_eq!(p.last_error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn a_refused_url_fails_the_callback_at_once_without_an_attempt() {
        let mut p = fresh();
        assert_eq!(p.attempted(Err("HTTP 500".into()), s(0)), Some(s(5)));
        assert_eq!(
            p.refused("not allowed by tasks.callback_allow".into()),
            None
        );
        assert_eq!((p.state, p.attempts), (Delivery::Failed, 1));
        assert_eq!(
            p.last_error.as_deref(),
            Some("not allowed by tasks.callback_allow")
        );
    }

    #[test]
    fn after_24h_a_failure_fails_the_callback() {
        let mut p = fresh();
        p.attempts = 33;
        assert_eq!(
            p.attempted(Err("HTTP 503".into()), webhook::GIVE_UP_AFTER - s(100)),
            Some(s(100)),
            "the last wait ends on the 24 h mark"
        );
        assert_eq!(
            p.attempted(Err("HTTP 503".into()), webhook::GIVE_UP_AFTER),
            None
        );
        assert_eq!((p.state, p.attempts), (Delivery::Failed, 35));
        assert_eq!(p.last_error.as_deref(), Some("HTTP 503"));
    }
}
