//! What the link has seen, for people: the peers, the last sync, the last error. Handed
//! out as plain data ([`Shown`]); the status view decides how it looks.

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
        }
    }
}
