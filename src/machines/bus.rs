//! What outlives a registry reload: the channel of transitions, the ledger's sender, and
//! the notice that wakes requests waiting for a breaker (`x-labrouter-wait`).

use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{broadcast, Notify};

use crate::breaker::Transitioned;
use crate::store::Msg;

/// What outlives a registry reload: where transitions go and who is woken by them.
#[derive(Debug)]
pub struct Bus {
    /// Woken on every change that may let a waiting request in (`x-labrouter-wait`).
    pub(super) changed: Notify,
    pub(super) transitions: broadcast::Sender<Transitioned>,
    /// The store's writer, when the lab remembers (README "What it remembers").
    pub(super) ledger: Option<std::sync::mpsc::Sender<Msg>>,
    /// The registry version recorded with each transition; replaced on reload.
    pub(super) registry_version: Mutex<String>,
    /// The link to the other routers (README "Several routers"), once `cluster:` started it.
    cluster: OnceLock<Arc<crate::cluster::Link>>,
}

impl Bus {
    pub fn new(ledger: Option<std::sync::mpsc::Sender<Msg>>) -> Arc<Bus> {
        let (transitions, _) = broadcast::channel(1024);
        Arc::new(Bus {
            changed: Notify::new(),
            transitions,
            ledger,
            registry_version: Mutex::new(String::new()),
            cluster: OnceLock::new(),
        })
    }

    /// Every transition from now on, for alerts and the demo's narration.
    pub fn subscribe(&self) -> broadcast::Receiver<Transitioned> {
        self.transitions.subscribe()
    }

    /// Queues a ledger message (registry reloads); nothing happens without a store.
    pub fn ledger(&self, msg: Msg) {
        if let Some(l) = &self.ledger {
            let _ = l.send(msg);
        }
    }

    /// Shares this router's verdicts from now on (once per bus: `cluster:` needs a restart).
    pub fn set_cluster(&self, link: Arc<crate::cluster::Link>) {
        let _ = self.cluster.set(link);
    }

    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Link>> {
        self.cluster.get()
    }

    /// Wakes requests and tasks waiting for a breaker (a peer's verdict arrived).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// The registry version recorded with each transition from now on.
    pub fn set_version(&self, version: &str) {
        *self
            .registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version.to_string();
    }

    pub(super) fn version(&self) -> String {
        self.registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
