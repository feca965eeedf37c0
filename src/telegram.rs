//! Telegram (SPEC §5): one alert per breaker trip, a page when an outage outlasts
//! `page_after_cycles` cooldowns, and a daily digest at `digest_at` in `timezone`.
//!
//! Pieces, each testable alone:
//! - [`alerts`]: which transitions deserve a message, and their wording (pure).
//! - [`digest`]: the digest from ledger rows, counter samples, now and the host (pure).
//! - [`schedule`]: when the digest goes out, and whether a missed one is caught up (pure).
//! - [`outbox`]: the bounded queue and the one task that talks to Telegram (teloxide).
//! - [`redact`]: the bot token out of every log line and error.
//! - [`text`]: HTML escaping, the 4,096-character split, durations in words.
//!
//! This file wires them to a running [`Service`]: a task turning hub transitions into
//! alerts, a task keeping the digest schedule and sampling counters, and the sender. Nothing
//! here runs on the request path: transitions arrive over the hub's broadcast, and every
//! message goes through a queue that never waits.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::breaker::Phase;
use crate::registry::{Registry, Telegram as Config};
use crate::service::Service;
use crate::store::{self, Msg, StoreError};

pub mod alerts;
pub mod digest;
pub mod outbox;
pub mod redact;
pub mod schedule;
pub mod text;

use digest::{Host, MachineNow, Row, Sample};
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
    Tokio { wall: Timestamp, at: Instant },
}

impl Clock {
    pub fn tokio(wall: Timestamp) -> Clock {
        Clock::Tokio { wall, at: Instant::now() }
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
    pub outbox: outbox::Policy,
    /// One request to Telegram at most (connect, send, answer).
    pub send_timeout: Duration,
    /// How often live counters are written to the store for the digest's counts.
    pub sample_every: Duration,
    /// The schedule looks at the wall clock at least this often.
    pub tick: Duration,
    pub clock: Clock,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            outbox: outbox::Policy::default(),
            send_timeout: Duration::from_secs(20),
            sample_every: Duration::from_secs(10 * 60),
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
    let config = svc.lab().registry.telegram.clone()?;
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
pub fn start(svc: Arc<Service>, settings: Settings, opts: Options) -> Result<Running, TelegramError> {
    let client = settings.client(opts.send_timeout)?;
    let (outbox, rx) = Outbox::new(opts.outbox.capacity);
    let store_tx = svc.store().map(store::Store::sender);
    // Subscribed before returning: no transition after start is missed.
    let transitions = svc.hub().subscribe();
    let boot_ms = opts.clock.now().as_millisecond();
    tracing::info!(chat_id = settings.chat_id, digest_at = ?settings.digest_at, "telegram alerts and digest on");
    let tasks = vec![
        tokio::spawn(outbox::run(rx, client, opts.outbox.clone(), store_tx)),
        tokio::spawn(alert_loop(Arc::clone(&svc), settings.clone(), transitions, outbox.clone())),
        tokio::spawn(digest_loop(svc, settings, opts, outbox.clone(), boot_ms)),
    ];
    Ok(Running { outbox, tasks })
}

async fn alert_loop(svc: Arc<Service>, s: Settings, mut rx: broadcast::Receiver<crate::machines::Transitioned>, outbox: Outbox) {
    let mut alerts = alerts::Alerts::new(s.alert_on_trip, s.page_after_cycles);
    loop {
        let t = match rx.recv().await {
            Ok(t) => t,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "telegram alerts fell behind the breaker transitions");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(alert) = alerts.on(&alerts::Change::from(&t)) else { continue };
        let lab = svc.lab();
        let fbs = alerts::fallbacks(&lab.registry, alert.machine(), |i| lab.machines.phase(i) != Phase::Closed);
        let what = match alert {
            alerts::Alert::Page { .. } => "page",
            _ => "alert",
        };
        outbox.push(Message::new(what, alerts::render(&alert, &fbs, &s.tz)));
    }
}

async fn digest_loop(svc: Arc<Service>, s: Settings, opts: Options, outbox: Outbox, boot_ms: i64) {
    let path = svc.store().map(|st| st.path().to_path_buf());
    let last = match &path {
        Some(p) => last_digest(p.clone()).await,
        None => None,
    };
    let now = opts.clock.now();
    let mut last_sent = last;
    sample(&svc, &opts.clock, boot_ms);
    if schedule::catch_up_due(last, now, s.digest_at, &s.tz) {
        tracing::info!(last = ?last, "the router was down at the last digest time: sending the digest now");
        queue_digest(&svc, &s, &opts.clock, &outbox, boot_ms, path.as_deref()).await;
        last_sent = Some(now);
    }
    let mut next = schedule::next_send(now, s.digest_at, &s.tz);
    let mut next_sample = Instant::now() + opts.sample_every;
    loop {
        let now = opts.clock.now();
        if now >= next {
            if schedule::slot_sends(last_sent, next) {
                queue_digest(&svc, &s, &opts.clock, &outbox, boot_ms, path.as_deref()).await;
                last_sent = Some(now);
            } else {
                tracing::info!("digest slot skipped: a catch-up digest went out shortly before");
            }
            next = schedule::next_send(now, s.digest_at, &s.tz);
        }
        if Instant::now() >= next_sample {
            sample(&svc, &opts.clock, boot_ms);
            next_sample = Instant::now() + opts.sample_every;
        }
        let wait = schedule::sleep_for(now, next, opts.tick).min(next_sample.saturating_duration_since(Instant::now()));
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// Writes the live counters of every machine to the store (for the digest's counts).
fn sample(svc: &Service, clock: &Clock, boot_ms: i64) {
    let Some(st) = svc.store() else { return };
    let lab = svc.lab();
    let machines = (0..lab.machines.len())
        .map(|i| {
            let s = lab.machines.snapshot(i);
            (s.name, s.remote_attempts, s.local_rejections)
        })
        .collect();
    let _ = st.sender().send(Msg::Counters { at_ms: clock.now().as_millisecond(), boot_ms, machines });
}

async fn last_digest(path: PathBuf) -> Option<Timestamp> {
    let read = tokio::task::spawn_blocking(move || store::meta(&path, LAST_DIGEST)).await;
    match read {
        Ok(Ok(v)) => v.and_then(|v| v.parse::<i64>().ok()).and_then(|ms| Timestamp::from_millisecond(ms).ok()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read when the last digest went out");
            None
        }
        Err(_) => None,
    }
}

async fn queue_digest(svc: &Service, s: &Settings, clock: &Clock, outbox: &Outbox, boot_ms: i64, path: Option<&Path>) {
    let now = clock.now();
    let machines = live_machines(svc, now, boot_ms);
    let parts = match render_from_store(path.map(Path::to_path_buf), now, &s.tz, machines).await {
        Ok(parts) => parts,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the ledger for the digest");
            return;
        }
    };
    let n = parts.len();
    for (i, text) in parts.into_iter().enumerate() {
        let mut msg = Message::new("digest", text);
        if i + 1 == n {
            msg.remember = Some((LAST_DIGEST.to_string(), now.as_millisecond().to_string()));
        }
        outbox.push(msg);
    }
}

/// The machines of the serving registry with their live breakers and counters.
fn live_machines(svc: &Service, now: Timestamp, boot_ms: i64) -> Vec<MachineNow> {
    let lab = svc.lab();
    (0..lab.machines.len())
        .map(|i| {
            let s = lab.machines.snapshot(i);
            MachineNow {
                state: s.breaker.phase.as_str().to_string(),
                counters: Some(Sample {
                    at_ms: now.as_millisecond(),
                    boot_ms,
                    machine: s.name.clone(),
                    remote_attempts: s.remote_attempts,
                    local_rejections: s.local_rejections,
                }),
                name: s.name,
            }
        })
        .collect()
}

/// Ledger rows (31 days, oldest first, registry rows left out) and counter samples (two
/// days) from the store at `path`; nothing when there is no store yet.
pub fn read_store(path: &Path, now: Timestamp) -> Result<(Vec<Row>, Vec<Sample>), StoreError> {
    if !path.exists() {
        return Ok((Vec::new(), Vec::new()));
    }
    let since = now.as_millisecond() - digest::MONTH_MS - digest::DAY_MS;
    let mut rows: Vec<Row> = store::events(path, None, Some(since), None, 1_000_000)?
        .into_iter()
        .filter(|e| e.machine != store::REGISTRY_ROW)
        .map(|e| Row { at_ms: e.at_ms, machine: e.machine, from: e.from, to: e.to, reason: e.reason, failures: e.failures })
        .collect();
    rows.reverse();
    let samples = store::counter_samples(path, now.as_millisecond() - 2 * digest::DAY_MS)?
        .into_iter()
        .map(|c| Sample {
            at_ms: c.at_ms,
            boot_ms: c.boot_ms,
            machine: c.machine,
            remote_attempts: c.remote_attempts,
            local_rejections: c.local_rejections,
        })
        .collect();
    Ok((rows, samples))
}

async fn render_from_store(path: Option<PathBuf>, now: Timestamp, tz: &TimeZone, machines: Vec<MachineNow>) -> Result<Vec<String>, StoreError> {
    let (rows, samples) = match path {
        Some(p) => tokio::task::spawn_blocking(move || read_store(&p, now))
            .await
            .unwrap_or_else(|_| Ok((Vec::new(), Vec::new())))?,
        None => (Vec::new(), Vec::new()),
    };
    let host = Host::from_stats(&crate::host::stats());
    let input = digest::Input { now, tz, rows: &rows, samples: &samples, machines: &machines, host: &host };
    Ok(digest::render(&input))
}

/// `labrouter digest`: today's digest from the store alone (the router may be running or
/// not); a machine's current state is the last one its ledger recorded.
pub async fn render_offline(reg: &Registry, now: Timestamp) -> Result<Vec<String>, TelegramError> {
    let tz = match &reg.telegram {
        Some(t) => TimeZone::get(&t.timezone).map_err(|e| TelegramError::TimeZone(e.to_string()))?,
        None => TimeZone::UTC,
    };
    let path = reg.server.state_dir.join(store::FILE);
    let (rows, samples) = tokio::task::spawn_blocking(move || read_store(&path, now))
        .await
        .unwrap_or_else(|_| Ok((Vec::new(), Vec::new())))?;
    let machines: Vec<MachineNow> = reg
        .machines
        .iter()
        .map(|m| MachineNow {
            name: m.name.clone(),
            state: rows.iter().rev().find(|r| r.machine == m.name).map_or("closed".into(), |r| r.to.clone()),
            counters: None,
        })
        .collect();
    let host = Host::from_stats(&crate::host::stats());
    let input = digest::Input { now, tz: &tz, rows: &rows, samples: &samples, machines: &machines, host: &host };
    Ok(digest::render(&input))
}

/// `labrouter digest --send`: renders and sends now, retrying briefly; returns the number
/// of messages sent. Does not move the daily schedule.
pub async fn send_offline(reg: &Registry) -> Result<usize, TelegramError> {
    let config = reg.telegram.as_ref().ok_or_else(|| TelegramError::Send("the registry has no telegram: block".into()))?;
    let settings = Settings::from_config(config)?;
    let client = settings.client(Duration::from_secs(20))?;
    let parts = render_offline(reg, Timestamp::now()).await?;
    let policy = outbox::Policy { max_age: Duration::from_secs(90), base_delay: Duration::from_secs(1), ..outbox::Policy::default() };
    for (i, text) in parts.iter().enumerate() {
        let msg = Message::new("digest", text.clone());
        if !outbox::deliver(&client, &msg, &policy).await {
            return Err(TelegramError::Send(format!("part {} of {} was not delivered (see the log above)", i + 1, parts.len())));
        }
    }
    Ok(parts.len())
}
