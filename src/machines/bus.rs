//! What outlives a registry reload: the channel of transitions, the ledger's sender, and
//! the notice that wakes requests waiting for a breaker (`x-labrouter-wait`).

use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, Notify};

use crate::breaker::Transitioned;
use crate::store::Msg;

/// What outlives a registry reload: where transitions go and who is woken by them.
#[derive(Debug)]
pub struct Bus {
    /// Woken on every change that may let a waiting request in (`x-labrouter-wait`).
    pub(super) changed: Notify,
    pub(super) transitions: broadcast::Sender<Transitioned>,
    /// The store's writer, when the lab remembers (SPEC §3.6).
    pub(super) ledger: Option<std::sync::mpsc::Sender<Msg>>,
    /// The registry version recorded with each transition; replaced on reload.
    pub(super) registry_version: Mutex<String>,
}

impl Bus {
    pub fn new(ledger: Option<std::sync::mpsc::Sender<Msg>>) -> Arc<Bus> {
        let (transitions, _) = broadcast::channel(1024);
        Arc::new(Bus {
            changed: Notify::new(),
            transitions,
            ledger,
            registry_version: Mutex::new(String::new()),
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
