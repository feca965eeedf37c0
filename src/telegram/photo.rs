//! The digest's photo (SPEC §16): the last 30 days read from the store ([`history::read`];
//! a router without a store has a quiet month), drawn by [`crate::picture`], with its
//! one-line caption. For the live digest, `labrouter digest --send` and `--png`.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::outbox::Message;
use super::TelegramError;
use crate::history::{self, Day, History};
use crate::picture;
use crate::registry::Registry;
use crate::store::{self, StoreError};

/// A drawn picture and the caption it goes out with.
#[derive(Debug)]
pub struct Photo {
    pub png: Vec<u8>,
    pub caption: String,
}

/// The span the picture covers.
const SPAN: u32 = history::DEFAULT_DAYS;

/// Reads and draws on the blocking pool (rusqlite and the rasteriser are synchronous).
pub async fn make(
    path: Option<PathBuf>,
    machines: Vec<String>,
    tz: TimeZone,
    now: Timestamp,
) -> Result<Photo, TelegramError> {
    let drawn = tokio::task::spawn_blocking(move || {
        let h = read(path.as_deref(), &machines, &tz, now)?;
        let png = picture::render(&h).map_err(|e| TelegramError::Picture(e.to_string()))?;
        Ok(Photo {
            png,
            caption: picture::caption(&h),
        })
    })
    .await;
    drawn.map_err(|e| TelegramError::Picture(format!("the drawing task failed: {e}")))?
}

/// The month from the store at `path`; without a store, every day zero.
fn read(
    path: Option<&Path>,
    machines: &[String],
    tz: &TimeZone,
    now: Timestamp,
) -> Result<History, StoreError> {
    if let Some(path) = path {
        return history::read(path, machines, tz, SPAN, now);
    }
    let days = history::days(now, tz, SPAN);
    let quiet = |d: &String| Day {
        day: d.clone(),
        ..Day::default()
    };
    Ok(History {
        timezone: tz.iana_name().unwrap_or("UTC").to_string(),
        machines: machines
            .iter()
            .map(|m| (m.clone(), days.iter().map(quiet).collect()))
            .collect(),
        days,
    })
}

/// `labrouter digest --png` and `--send`: the picture from the registry's store, its
/// machines and `telegram.timezone` (else UTC).
pub async fn offline(reg: &Registry, now: Timestamp) -> Result<Photo, TelegramError> {
    let tz = super::gather::zone(reg)?;
    let path = reg.server.state_dir.join(store::FILE);
    let machines = reg.machines.iter().map(|m| m.name.clone()).collect();
    make(Some(path), machines, tz, now).await
}

/// The live digest's photo message; `None` when it cannot be made (logged): the text
/// digest then goes alone.
pub(super) async fn message(
    path: Option<PathBuf>,
    machines: Vec<String>,
    tz: TimeZone,
    now: Timestamp,
) -> Option<Message> {
    match make(path, machines, tz, now).await {
        Ok(p) => Some(Message::photo("digest photo", p.png, &p.caption)),
        Err(e) => {
            tracing::error!(error = %e, "the digest's picture was not made: the text goes alone");
            None
        }
    }
}
