//! What the link has seen, for people: the peers, the last sync, the last error, and the
//! shares whose keys in Redis cannot be used. Handed out as plain data ([`Shown`]); the
//! status view decides how it looks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::{Link, State};

/// What the link remembers for [`Shown`] besides the state.
#[derive(Clone, Debug, Default)]
pub(super) struct Seen {
    pub peers: Vec<String>,
    pub last_sync: Option<SystemTime>,
    pub since: Option<SystemTime>,
    pub last_error: Option<String>,
}

/// The link as it is now, as plain data.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub node: String,
    pub prefix: String,
    pub state: State,
    /// Since when `state` holds.
    pub since: Option<SystemTime>,
    /// When every verdict was last read from Redis.
    pub last_sync: Option<SystemTime>,
    /// Why Redis was last found down (no URL, no password).
    pub last_error: Option<String>,
    /// The other routers that beat within the last few seconds.
    pub peers_seen: Vec<String>,
    /// Shares skipped because their keys in Redis cannot be used, and why, by share key.
    /// As many as the registry has shared machines at most.
    pub bad_shares: BTreeMap<String, String>,
}

impl Link {
    /// The link as it is now.
    pub fn view(&self) -> Shown {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Shown {
            node: self.node.to_string(),
            prefix: self.config.prefix.clone(),
            state: self.state(),
            since: seen.since,
            last_sync: seen.last_sync,
            last_error: seen.last_error,
            peers_seen: seen
                .peers
                .into_iter()
                .filter(|p| *p != *self.node)
                .collect(),
            bad_shares: self
                .lock_bad()
                .iter()
                .map(|(s, why)| (s.to_string(), why.clone()))
                .collect(),
        }
    }

    /// `share`'s keys cannot be used (`why`): it is skipped, and said once, however often
    /// it is read or published, until it is usable again.
    pub(super) fn spoiled(&self, share: &Arc<str>, why: &str) {
        let why = crate::text::bounded(why);
        let fresh = self
            .lock_bad()
            .insert(Arc::clone(share), why.clone())
            .is_none();
        if fresh {
            tracing::warn!(share = %share, error = %why, "cluster: this machine's keys in Redis are unusable; its verdicts are skipped until they are fixed, the other machines' keep syncing");
        }
    }

    /// `share`'s keys were read or written fine.
    pub(super) fn usable(&self, share: &str) {
        if self.lock_bad().remove(share).is_some() {
            tracing::info!(share = %share, "cluster: this machine's keys in Redis are usable again");
        }
    }

    /// Forgets the shares the registry no longer has (after a reload).
    pub(super) fn keep_bad(&self, shares: &[Arc<str>]) {
        self.lock_bad().retain(|s, _| shares.contains(s));
    }

    fn lock_bad(&self) -> std::sync::MutexGuard<'_, BTreeMap<Arc<str>, String>> {
        self.bad.lock().unwrap_or_else(|e| e.into_inner())
    }
}
