//! The queue between the router and Telegram (README "Telegram"): Telegram being slow, down or
//! rate-limiting must never slow routing.
//!
//! Producers (the alert and digest tasks) [`Outbox::push`] without waiting: the queue is
//! bounded and a full queue drops the new message with a log line. One sender task
//! delivers in order: a transient failure is retried with exponential backoff and jitter,
//! Telegram's own 429 `retry_after` is honoured as given, a permanent refusal (chat not
//! found, bad token) drops the message, and a message older than a day is dropped with a
//! log line. Every error text is redacted before it is logged.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use teloxide::payloads::SendMessageSetters;
use teloxide::requests::Requester;
use teloxide::types::{ChatId, ParseMode};
use teloxide::{ApiError, Bot, RequestError};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::redact::Redactor;
use crate::store::Msg;

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
}

impl Default for Retries {
    fn default() -> Retries {
        Retries {
            capacity: 256,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(10 * 60),
            max_age: Duration::from_secs(24 * 3600),
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

/// One message waiting to go out.
#[derive(Clone, Debug)]
pub struct Message {
    /// HTML parse mode text, already under the length limit.
    pub text: String,
    /// What it is, for log lines (`alert`, `page`, `digest`).
    pub what: &'static str,
    /// When it was queued (tokio's clock: the age check follows paused-clock tests).
    pub queued: Instant,
    /// A `meta` entry the store writes once this message is delivered (the digest's last
    /// send time).
    pub remember: Option<(String, String)>,
}

impl Message {
    pub fn new(what: &'static str, text: String) -> Message {
        Message {
            text,
            what,
            queued: Instant::now(),
            remember: None,
        }
    }
}

/// The producer side; cheap to clone, never waits.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::Sender<Message>,
}

impl Outbox {
    pub fn new(capacity: usize) -> (Outbox, mpsc::Receiver<Message>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Outbox { tx }, rx)
    }

    /// Queues `msg` at once; a full or closed queue drops it with a log line.
    pub fn push(&self, msg: Message) -> bool {
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

/// Why one send did not go through; texts are already redacted.
#[derive(Clone, Debug, PartialEq)]
pub enum SendError {
    /// Telegram's flood control: wait this long, then the same message again.
    RetryAfter(Duration),
    /// Network trouble, a 5xx, an unparsable answer: worth another try.
    Transient(String),
    /// Telegram refused the message or the bot for good (bad token, unknown chat).
    Permanent(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::RetryAfter(d) => write!(f, "Telegram asked to retry after {}s", d.as_secs()),
            SendError::Transient(e) | SendError::Permanent(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SendError {}

/// The bot, the chat and the redactor: the only place that talks to Telegram.
#[derive(Clone)]
pub struct Client {
    bot: Bot,
    chat: ChatId,
    redactor: Redactor,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Bot's own Debug prints the token.
        write!(f, "Client(chat {}, token <redacted>)", self.chat)
    }
}

impl Client {
    pub fn new(bot: Bot, chat: i64, redactor: Redactor) -> Client {
        Client {
            bot,
            chat: ChatId(chat),
            redactor,
        }
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// One attempt at one message.
    pub async fn send(&self, text: &str) -> Result<(), SendError> {
        let sent = self
            .bot
            .send_message(self.chat, text)
            .parse_mode(ParseMode::Html)
            .await;
        sent.map(|_| ()).map_err(|e| self.classify(e))
    }

    fn classify(&self, e: RequestError) -> SendError {
        let text = self.redactor.error(&e);
        match e {
            RequestError::RetryAfter(s) => SendError::RetryAfter(s.duration()),
            RequestError::Network(_) | RequestError::InvalidJson { .. } | RequestError::Io(_) => {
                SendError::Transient(text)
            }
            // An unrecognised description is often a 5xx from Telegram or a proxy.
            RequestError::Api(ApiError::Unknown(_)) => SendError::Transient(text),
            RequestError::Api(_) | RequestError::MigrateToChatId(_) => SendError::Permanent(text),
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
        let delay = match client.send(&msg.text).await {
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
