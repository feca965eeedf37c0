//! The queue between the router and Telegram (README "Telegram"): Telegram being slow, down or
//! rate-limiting must never slow routing.
//!
//! Producers (the alert and digest tasks) [`Outbox::push`] without waiting: the queue is
//! bounded and a full queue drops the new message with a log line. One sender task
//! delivers in order: a transient failure is retried with exponential backoff and jitter,
//! Telegram's own 429 `retry_after` is honoured as given, a permanent refusal (chat not
//! found, bad token) drops the message, and a message older than a day is dropped with a
//! log line. Every error text is redacted before it is logged.
//!
//! A message is a text or a photo (the digest's picture, rendered once before it is
//! queued); the queue is bounded in messages and in bytes. `client` talks to Telegram;
//! `message` is what waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::store::Msg;

mod client;
mod message;

pub use client::{Client, SendError};
use message::Held;
pub use message::{Body, Message, CAPTION_MAX};

/// Tries a photo gets before it is dropped (a retry-after from Telegram is not a try): a
/// photo Telegram or a proxy keeps refusing must not hold the text and the alerts behind it
/// for a day. The text digest follows it anyway.
pub const PHOTO_TRIES: u32 = 3;

/// How the sender retries and when it gives up.
#[derive(Clone, Debug)]
pub struct Retries {
    /// Messages waiting at most; more are dropped (with a log line) until it drains.
    pub capacity: usize,
    /// The first retry's delay; doubled per failure up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// A message this old is dropped instead of sent (README "Telegram": "after a day").
    pub max_age: Duration,
    /// Bytes the waiting messages may hold at most (photos are tens of kilobytes); more
    /// are dropped (with a log line) until it drains.
    pub max_bytes: usize,
}

impl Default for Retries {
    fn default() -> Retries {
        Retries {
            capacity: 256,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(10 * 60),
            max_age: Duration::from_secs(24 * 3600),
            max_bytes: 8 << 20,
        }
    }
}

/// The delay before retry number `attempt` (1-based): `base × 2^(attempt-1)` capped at
/// `max`, scaled by `jitter` in `[0, 1)` into its upper half, so many routers (or many
/// restarts) do not retry in lockstep and the delay never collapses to zero.
pub fn backoff(attempt: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exp = base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
        .min(max);
    exp.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// A number in `[0, 1)` that differs between calls; no `rand` needed for jitter.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The producer side; cheap to clone, never waits.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::Sender<Message>,
    /// Bytes held by queued messages (texts and photos), and the most it may hold.
    used: Arc<AtomicUsize>,
    max_bytes: usize,
}

impl Outbox {
    /// A queue of at most `capacity` messages holding at most `max_bytes` bytes.
    pub fn new(capacity: usize, max_bytes: usize) -> (Outbox, mpsc::Receiver<Message>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let used = Arc::new(AtomicUsize::new(0));
        (
            Outbox {
                tx,
                used,
                max_bytes,
            },
            rx,
        )
    }

    /// Bytes the queued messages hold now (the one being sent included).
    pub fn held_bytes(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Queues `msg` at once; a full or closed queue, or one whose messages already hold
    /// `max_bytes`, drops it with a log line.
    pub fn push(&self, mut msg: Message) -> bool {
        let size = msg.body.size();
        let Some(held) = Held::take(&self.used, size, self.max_bytes) else {
            tracing::warn!(
                what = msg.what,
                bytes = size,
                max_bytes = self.max_bytes,
                "telegram queue holds too many bytes: message dropped"
            );
            return false;
        };
        msg.held = Some(Arc::new(held));
        match self.tx.try_send(msg) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(m)) => {
                tracing::warn!(what = m.what, "telegram queue is full: message dropped");
                false
            }
            Err(mpsc::error::TrySendError::Closed(m)) => {
                tracing::warn!(
                    what = m.what,
                    "telegram sender has stopped: message dropped"
                );
                false
            }
        }
    }
}

/// Delivers queued messages in order until every [`Outbox`] is gone.
pub async fn run(
    mut rx: mpsc::Receiver<Message>,
    client: Client,
    policy: Retries,
    store: Option<std_mpsc::Sender<Msg>>,
) {
    while let Some(msg) = rx.recv().await {
        if deliver(&client, &msg, &policy).await {
            if let (Some((key, value)), Some(store)) = (msg.remember.clone(), &store) {
                let _ = store.send(Msg::Meta { key, value });
            }
        }
    }
}

/// Tries one message until it is sent, refused for good, or a day old.
pub async fn deliver(client: &Client, msg: &Message, policy: &Retries) -> bool {
    let mut failures = 0u32;
    loop {
        let age = msg.queued.elapsed();
        if age > policy.max_age {
            tracing::warn!(
                what = msg.what,
                age_s = age.as_secs(),
                failures,
                "telegram message older than a day: dropped unsent"
            );
            return false;
        }
        let delay = match client.send_body(&msg.body).await {
            Ok(()) => {
                tracing::info!(what = msg.what, failures, "telegram message sent");
                return true;
            }
            Err(SendError::RetryAfter(wait)) => {
                tracing::warn!(
                    what = msg.what,
                    retry_after_s = wait.as_secs(),
                    "telegram rate limit: waiting as asked"
                );
                wait
            }
            Err(SendError::Permanent(e)) => {
                tracing::error!(what = msg.what, error = %e, "telegram refused the message: dropped");
                return false;
            }
            Err(SendError::Transient(e)) if msg.is_photo() && failures + 1 >= PHOTO_TRIES => {
                tracing::error!(what = msg.what, error = %e, tries = failures + 1, "telegram photo not delivered: dropped");
                return false;
            }
            Err(SendError::Transient(e)) => {
                failures += 1;
                let wait = backoff(failures, policy.base_delay, policy.max_delay, jitter());
                tracing::warn!(what = msg.what, error = %e, failures, retry_in_ms = wait.as_millis() as u64, "telegram send failed: will retry");
                wait
            }
        };
        tokio::time::sleep(delay).await;
    }
}
