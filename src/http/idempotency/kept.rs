//! Where answers are kept: the store's side ([`Kept`]: its file for reads, its writer for
//! writes) and the wall clock their 24 h are counted on ([`Wall`]).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use super::key::Slot;
use crate::clock::Instant;
use crate::store::{KeptAnswer, Msg, ANSWERS_KEEP};

/// How long a flight waits for the store to confirm its answer is on disk.
const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// Wall-clock milliseconds read off tokio's clock from the moment the service started, so
/// the 24 h of a paused-clock test pass as they would in a day.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wall {
    pub(super) at_ms: i64,
    pub(super) since: Instant,
}

impl Wall {
    pub(super) fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.since.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.at_ms.saturating_add(elapsed)
    }

    /// The oldest `created_ms` still replayed.
    pub(super) fn since_ms(&self) -> i64 {
        let keep = i64::try_from(ANSWERS_KEEP.as_millis()).unwrap_or(i64::MAX);
        self.now_ms().saturating_sub(keep)
    }
}

/// The store's side: its file, for reads, and its writer.
#[derive(Clone, Debug)]
pub(super) struct Kept {
    pub(super) path: PathBuf,
    pub(super) writer: mpsc::Sender<Msg>,
}

/// The answer kept in the store for `slot`, if any (an unreadable store is logged and
/// treated as empty: the request is served rather than refused).
pub(super) async fn read(store: &Kept, slot: &Slot, since_ms: i64) -> Option<KeptAnswer> {
    let (path, slot) = (store.path.clone(), slot.clone());
    let read = tokio::task::spawn_blocking(move || {
        crate::store::answer(&path, &slot.owner, &slot.key, since_ms)
    })
    .await;
    match read {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "idempotent answers unreadable: serving the request again");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "idempotent answer lookup failed: serving the request again");
            None
        }
    }
}

/// Hands `kept` to the writer and waits until it is on disk (at most [`WRITE_LIMIT`]).
pub(super) async fn write(store: &Kept, kept: KeptAnswer) {
    let (ack, written) = mpsc::channel();
    let sent = store.writer.send(Msg::Answer(Box::new(kept))).is_ok()
        && store.writer.send(Msg::Flush(ack)).is_ok();
    if !sent {
        return;
    }
    let waited = tokio::task::spawn_blocking(move || written.recv_timeout(WRITE_LIMIT)).await;
    if !matches!(waited, Ok(Ok(()))) {
        tracing::warn!(
            limit_s = WRITE_LIMIT.as_secs(),
            "an idempotent answer was not confirmed on disk in time"
        );
    }
}
