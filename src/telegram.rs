//! Telegram (README "Telegram"): one alert per breaker trip, a page when an outage outlasts
//! `page_after_cycles` cooldowns, and a daily digest at `digest_at` in `timezone`.
//!
//! Pieces, each testable alone:
//! - [`alerts`]: which transitions deserve a message, and their wording (pure).
//! - [`digest`]: the digest from ledger rows, counter samples, now and the host (pure).
//! - [`schedule`]: when the digest goes out, and whether a missed one is caught up (pure).
//! - [`outbox`]: the bounded queue (texts and photos) and the one task that talks to
//!   Telegram (teloxide).
//! - [`photo`]: the digest's picture of the last 30 days and its caption.
//! - [`redact`]: the bot token out of every log line and error.
//! - [`text`]: HTML escaping, the 4,096-character split, durations in words.
//! - `tasks`: the live alert and digest tasks; `gather`: the digest's inputs.
//!
//! This file holds the settings and starts it all for a running [`Service`]: a task turning
//! hub transitions into alerts, a task keeping the digest schedule, and the sender. Nothing
//! here runs on the request path: transitions arrive over the hub's broadcast, and every
//! message goes through a queue that never waits. The counter samples the digest reads are
//! written by [`crate::sample`], Telegram or not.

use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::registry::{Registry, Telegram as Config};
use crate::service::Service;
use crate::store::{self, StoreError};

pub mod alerts;
pub mod digest;
mod gather;
pub mod outbox;
pub mod photo;
pub mod redact;
pub mod schedule;
mod tasks;
pub mod text;

pub use gather::{read_store, render_offline};
use outbox::{Client, Message, Outbox};
use redact::Redactor;

/// The `meta` key holding when the last digest was delivered (unix ms).
pub const LAST_DIGEST: &str = "telegram.last_digest_ms";

/// Why Telegram could not be set up or a digest not sent. Texts never hold the token.
#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    #[error("telegram.token_env: the environment variable {0} is not set or is empty")]
    NoToken(String),
    #[error("telegram.api_url: '{0}' is not a URL")]
    ApiUrl(String),
    #[error("telegram.timezone: {0}")]
    TimeZone(String),
    #[error("cannot build the Telegram HTTP client: {0}")]
    Client(String),
    #[error("the digest's picture: {0}")]
    Picture(String),
    #[error("the digest could not be sent: {0}")]
    Send(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The `telegram:` block ready to use: the token read, the URL and the zone parsed.
#[derive(Clone)]
pub struct Settings {
    pub chat_id: i64,
    pub api_url: Option<reqwest::Url>,
    pub digest_at: (u8, u8),
    pub tz: TimeZone,
    pub alert_on_trip: bool,
    pub page_after_cycles: u32,
    token: String,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("chat_id", &self.chat_id)
            .field("api_url", &self.api_url.as_ref().map(reqwest::Url::as_str))
            .field("digest_at", &self.digest_at)
            .field("token", &redact::REDACTED)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Reads the token from `token_env`.
    pub fn from_config(c: &Config) -> Result<Settings, TelegramError> {
        let token = std::env::var(&c.token_env).unwrap_or_default();
        if token.trim().is_empty() {
            return Err(TelegramError::NoToken(c.token_env.clone()));
        }
        Settings::with_token(c, token.trim())
    }

    /// With the token given (tests).
    pub fn with_token(c: &Config, token: &str) -> Result<Settings, TelegramError> {
        let api_url = match &c.api_url {
            Some(u) => Some(reqwest::Url::parse(u).map_err(|_| TelegramError::ApiUrl(u.clone()))?),
            None => None,
        };
        let tz = TimeZone::get(&c.timezone).map_err(|e| TelegramError::TimeZone(e.to_string()))?;
        Ok(Settings {
            chat_id: c.chat_id,
            api_url,
            digest_at: c.digest_at,
            tz,
            alert_on_trip: c.alert_on_trip,
            page_after_cycles: c.page_after_cycles,
            token: token.to_string(),
        })
    }

    pub fn redactor(&self) -> Redactor {
        Redactor::new(&self.token)
    }

    /// The teloxide bot on its own HTTP client (rustls, bounded timeouts), pointed at
    /// `api_url` when set (a self-hosted Bot API server; the tests' fake).
    pub fn client(&self, send_timeout: Duration) -> Result<Client, TelegramError> {
        let redactor = self.redactor();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5).min(send_timeout))
            .timeout(send_timeout)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| TelegramError::Client(redactor.error(&e)))?;
        let mut bot = teloxide::Bot::with_client(self.token.clone(), http);
        if let Some(url) = &self.api_url {
            bot = bot.set_api_url(url.clone());
        }
        Ok(Client::new(bot, self.chat_id, redactor))
    }
}

/// The wall clock the schedule reads. Tests pin it to tokio's (paused) clock.
#[derive(Clone, Copy, Debug)]
pub enum Clock {
    System,
    /// `wall` at `at`, advancing with `tokio::time::Instant`.
    Tokio {
        wall: Timestamp,
        at: Instant,
    },
}

impl Clock {
    pub fn tokio(wall: Timestamp) -> Clock {
        Clock::Tokio {
            wall,
            at: Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Clock::System => Timestamp::now(),
            Clock::Tokio { wall, at } => {
                let d = jiff::SignedDuration::try_from(at.elapsed()).unwrap_or_default();
                wall.checked_add(d).unwrap_or(*wall)
            }
        }
    }
}

/// Knobs with production defaults; tests shorten them.
#[derive(Clone, Debug)]
pub struct Options {
    pub outbox: outbox::Retries,
    /// One request to Telegram at most (connect, send, answer). Keep it over 10s:
    /// teloxide pauses 10s after a 5xx before reading the body, inside this timeout.
    pub send_timeout: Duration,
    /// The schedule looks at the wall clock at least this often.
    pub tick: Duration,
    pub clock: Clock,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            outbox: outbox::Retries::default(),
            send_timeout: Duration::from_secs(20),
            tick: Duration::from_secs(60),
            clock: Clock::System,
        }
    }
}

/// The running Telegram side; dropping it stops its tasks.
#[derive(Debug)]
pub struct Running {
    outbox: Outbox,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Queues a message (tests, and anything else that wants to say something).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `serve`: starts Telegram when the registry has a `telegram:` block. A missing token is
/// logged and Telegram stays off; routing never depends on it.
pub fn spawn(svc: &Arc<Service>) -> Option<Running> {
    let config = svc.fleet().registry.telegram.clone()?;
    match Settings::from_config(&config) {
        Ok(settings) => match start(Arc::clone(svc), settings, Options::default()) {
            Ok(running) => Some(running),
            Err(e) => {
                tracing::error!(error = %e, "telegram disabled");
                None
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "telegram disabled");
            None
        }
    }
}

/// Starts the sender, the alert task and the digest task for `svc`.
pub fn start(
    svc: Arc<Service>,
    settings: Settings,
    opts: Options,
) -> Result<Running, TelegramError> {
    let client = settings.client(opts.send_timeout)?;
    let (outbox, rx) = Outbox::new(opts.outbox.capacity, opts.outbox.max_bytes);
    let store_tx = svc.store().map(store::Store::sender);
    // Subscribed before returning: no transition after start is missed.
    let transitions = svc.bus().subscribe();
    tracing::info!(chat_id = settings.chat_id, digest_at = ?settings.digest_at, "telegram alerts and digest on");
    let tasks = vec![
        tokio::spawn(outbox::run(rx, client, opts.outbox.clone(), store_tx)),
        tokio::spawn(tasks::alert_loop(
            Arc::clone(&svc),
            settings.clone(),
            transitions,
            outbox.clone(),
        )),
        tokio::spawn(tasks::cluster_loop(Arc::clone(&svc), outbox.clone())),
        tokio::spawn(tasks::digest_loop(svc, settings, opts, outbox.clone())),
    ];
    Ok(Running { outbox, tasks })
}

/// `labrouter digest --send`: renders and sends now, retrying briefly: the picture first
/// (its failure is logged and the text goes alone), then the text. Returns the number of
/// messages sent. Does not move the daily schedule.
pub async fn send_offline(reg: &Registry) -> Result<usize, TelegramError> {
    let config = reg
        .telegram
        .as_ref()
        .ok_or_else(|| TelegramError::Send("the registry has no telegram: block".into()))?;
    let settings = Settings::from_config(config)?;
    let client = settings.client(Duration::from_secs(20))?;
    let now = Timestamp::now();
    let parts = render_offline(reg, now).await?;
    let policy = outbox::Retries {
        max_age: Duration::from_secs(30),
        base_delay: Duration::from_secs(1),
        ..outbox::Retries::default()
    };
    let mut sent = 0;
    match photo::offline(reg, now).await {
        Ok(p) => {
            let msg = Message::photo("digest photo", p.png, &p.caption);
            sent += usize::from(outbox::deliver(&client, &msg, &policy).await);
        }
        Err(e) => {
            tracing::error!(error = %e, "the digest's picture was not made: the text goes alone")
        }
    }
    for (i, text) in parts.iter().enumerate() {
        let msg = Message::new("digest", text.clone());
        if !outbox::deliver(&client, &msg, &policy).await {
            return Err(TelegramError::Send(format!(
                "part {} of {} was not delivered (see the log above)",
                i + 1,
                parts.len()
            )));
        }
        sent += 1;
    }
    Ok(sent)
}
