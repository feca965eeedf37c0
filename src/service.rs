//! The running service: the current [`Fleet`] behind an atomic swap, the store that outlives
//! reloads, and reloading itself (README "Run it as a service").
//!
//! A request loads the current lab once and keeps it to its end, so a reload never changes
//! a registry under a request. A reload validates the new file completely before the swap;
//! an invalid file is rejected, logged and ledgered, and the old registry keeps serving.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::cluster::tasks::SharedQueue;
use crate::fleet::{Fleet, FleetError};
use crate::machines::Bus;
use crate::outcome::MachineId;
use crate::registry::QueueMode;
use crate::registry::{Registry, RegistryError};
use crate::store::{Msg, Recalled, Restored, Store, StoreError};
use crate::tasks::pooled::PoolQueue;
use crate::tasks::scheduler::FleetNow;
use crate::tasks::Scheduler;

mod restart;
use restart::restart_only;

/// Why the service could not start, or a reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot open the task queue: {0}")]
    Tasks(String),
    #[error("this router was started without a registry file, so there is nothing to reload")]
    NoConfig,
    #[error("{setting} changed ({old} -> {new}); restart to change it: a reload keeps the socket and its auth as they are")]
    NeedsRestart {
        setting: &'static str,
        old: String,
        new: String,
    },
}

/// What a reload did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Reloaded {
    pub from_version: String,
    pub to_version: String,
    pub machines: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

#[derive(Debug)]
pub struct Service {
    /// Shared with the task scheduler, which reads the fleet serving now.
    fleet: Arc<ArcSwap<Fleet>>,
    bus: Arc<Bus>,
    /// The registry file reloads read again.
    config: Option<PathBuf>,
    /// One reload at a time: two racing reloads could otherwise carry stale breakers over.
    reloading: Mutex<()>,
    /// When this service started (unix ms): its machines' counters count from zero here, so
    /// counter samples and the digest's live counts name the process by it.
    boot_ms: i64,
    /// The task queue (docs/api.md "Tasks"), when there is a store to keep tasks in.
    tasks: Option<Arc<Scheduler>>,
    /// The pool's task queue in Redis, with `cluster.tasks: shared` ([`Service::share_tasks`]):
    /// the task API uses it instead of `tasks`.
    pooled: std::sync::OnceLock<Arc<PoolQueue>>,
    /// State the layers above keep for the service's lifetime (the HTTP layer's
    /// `Idempotency-Key` flights and answers), made on first use: the service below them
    /// does not name their types.
    shared: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
    /// Last, so it outlives the breakers that write to it.
    store: Option<Arc<Store>>,
}

impl Service {
    /// The real thing: registry from `config`, memory under its `state_dir`, breakers
    /// seeded from the stored verdicts.
    pub fn open(config: &Path) -> Result<Service, ServiceError> {
        let registry = Registry::load(config)?;
        Service::remembering(registry, Some(config.to_path_buf()))
    }

    /// A service with memory for an already parsed registry (tests).
    pub fn remembering(
        registry: Registry,
        config: Option<PathBuf>,
    ) -> Result<Service, ServiceError> {
        let (store, recalled) = Store::open(&registry.server.state_dir)?;
        let bus = Bus::new(Some(store.sender()));
        let fleet = Fleet::build(registry, Arc::clone(&bus), None)?;
        fleet.activate(false);
        let restore = |i: MachineId, restored: &Restored| {
            let max_age = fleet.registry.machines[i].breaker.max_cooldown;
            fleet.machines.restore(i, restored, max_age);
        };
        match &recalled {
            Recalled::Verdicts(verdicts) => {
                for (name, restored) in verdicts {
                    if let Some(i) = fleet.registry.machine_index(name) {
                        restore(i, restored);
                    }
                }
            }
            // The whole file was unreadable: every machine fails closed.
            Recalled::Unreadable(why) => {
                for i in fleet.registry.machines.ids() {
                    restore(i, &Restored::Unreadable(why.clone()));
                }
            }
        }
        // The gauges show what was restored.
        fleet.gauge_states();
        let fleet = Arc::new(ArcSwap::from_pointee(fleet));
        let store = Arc::new(store);
        let now: FleetNow = {
            let fleet = Arc::clone(&fleet);
            Arc::new(move || fleet.load_full())
        };
        let tasks = Scheduler::resume(now, Arc::clone(&store)).map_err(ServiceError::Tasks)?;
        Ok(Service {
            fleet,
            bus,
            config,
            reloading: Mutex::new(()),
            boot_ms: crate::store::ms(crate::clock::wall()),
            tasks: Some(Arc::new(tasks)),
            pooled: std::sync::OnceLock::new(),
            shared: Mutex::new(Vec::new()),
            store: Some(store),
        })
    }

    /// A service without memory (tests, the demo).
    pub fn in_memory(registry: Registry, config: Option<PathBuf>) -> Result<Service, ServiceError> {
        let bus = Bus::new(None);
        let fleet = Fleet::build(registry, Arc::clone(&bus), None)?;
        fleet.activate(false);
        Ok(Service {
            fleet: Arc::new(ArcSwap::from_pointee(fleet)),
            bus,
            config,
            reloading: Mutex::new(()),
            boot_ms: crate::store::ms(crate::clock::wall()),
            tasks: None,
            pooled: std::sync::OnceLock::new(),
            shared: Mutex::new(Vec::new()),
            store: None,
        })
    }

    /// The lab serving now. Hold it for a whole request.
    pub fn fleet(&self) -> Arc<Fleet> {
        self.fleet.load_full()
    }

    pub fn bus(&self) -> &Arc<Bus> {
        &self.bus
    }

    /// The registry file reloads read, if the service was started from one.
    pub fn config(&self) -> Option<&Path> {
        self.config.as_deref()
    }

    pub fn store(&self) -> Option<&Store> {
        self.store.as_deref()
    }

    /// The store, to be read off the request's thread (`spawn_blocking` needs it owned).
    pub fn shared_store(&self) -> Option<Arc<Store>> {
        self.store.clone()
    }

    /// The task queue; `None` without a store (tasks must survive restarts).
    pub fn tasks(&self) -> Option<&Arc<Scheduler>> {
        self.tasks.as_ref()
    }

    /// The pool's task queue, when `cluster.tasks: shared` put it in Redis.
    pub fn pooled(&self) -> Option<&Arc<PoolQueue>> {
        self.pooled.get()
    }

    /// With `cluster.tasks: shared`, connects to the pool's queue in Redis and checks that
    /// Redis is durable; the error says why not, naming the setting (the router then does
    /// not start). Without it, nothing.
    pub async fn share_tasks(&self) -> Result<(), ServiceError> {
        let fleet = self.fleet();
        let (Some(config), Some(redis)) = (&fleet.registry.cluster, &fleet.redis) else {
            return Ok(());
        };
        if config.tasks != QueueMode::Shared {
            return Ok(());
        }
        let max_value = crate::cluster::tasks::max_value(&fleet.registry);
        let queue = SharedQueue::connect(redis, config, max_value)
            .await
            .map_err(ServiceError::Tasks)?;
        let now: FleetNow = {
            let fleet = Arc::clone(&self.fleet);
            Arc::new(move || fleet.load_full())
        };
        let pq = PoolQueue::new(queue, now, self.store.clone());
        tracing::info!(prefix = %config.prefix, redis = %redis.host(), "tasks: the shared task queue in Redis (cluster.tasks: shared)");
        let _ = self.pooled.set(Arc::new(pq));
        Ok(())
    }

    /// The service's one `T`, made by `init` on first use.
    pub fn shared<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut all = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        for s in all.iter() {
            if let Ok(t) = Arc::clone(s).downcast::<T>() {
                return t;
            }
        }
        // Kept for the router's life, whichever request made it first (`crate::heap`).
        crate::heap::in_default(|| {
            let t = Arc::new(init());
            all.push(Arc::clone(&t) as Arc<dyn Any + Send + Sync>);
            t
        })
    }

    /// When this service started (unix ms): the name of its counters' lifetime in counter
    /// samples ([`crate::sample`]) and in the digest's live counts.
    pub fn boot_ms(&self) -> i64 {
        self.boot_ms
    }

    /// Reads the registry file again and swaps it in if valid.
    pub fn reload(&self) -> Result<Reloaded, ServiceError> {
        let config = self.config.as_deref().ok_or(ServiceError::NoConfig)?;
        let registry = Registry::load(config);
        self.swap(registry)
    }

    /// Swaps in `registry` (already read) if it is valid; logs and ledgers either way.
    pub fn swap(
        &self,
        registry: Result<Registry, RegistryError>,
    ) -> Result<Reloaded, ServiceError> {
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.fleet.load_full();
        let built = registry
            .map_err(ServiceError::from)
            .and_then(|reg| restart_only(&old.registry, &reg).map(|()| reg))
            .and_then(|reg| {
                Fleet::build(reg, Arc::clone(&self.bus), Some(&old)).map_err(ServiceError::from)
            });
        let fleet = match built {
            Ok(fleet) => fleet,
            Err(e) => {
                tracing::error!(error = %e, "registry reload rejected; the old registry keeps serving");
                self.ledger(&old.registry.version, "rejected", &e.to_string());
                return Err(e);
            }
        };
        fleet.activate(true);
        let names = |l: &Fleet| {
            l.registry
                .machines
                .iter()
                .map(|m| m.name.clone())
                .collect::<Vec<_>>()
        };
        let (before, after) = (names(&old), names(&fleet));
        let report = Reloaded {
            from_version: old.registry.version.clone(),
            to_version: fleet.registry.version.clone(),
            added: after
                .iter()
                .filter(|m| !before.contains(m))
                .cloned()
                .collect(),
            removed: before
                .iter()
                .filter(|m| !after.contains(m))
                .cloned()
                .collect(),
            machines: after,
        };
        self.fleet.store(Arc::new(fleet));
        tracing::info!(
            from = %report.from_version,
            to = %report.to_version,
            added = ?report.added,
            removed = ?report.removed,
            "registry reloaded"
        );
        self.ledger(
            &report.from_version,
            &report.to_version,
            "registry reloaded",
        );
        Ok(report)
    }
    /// Serves what `machine` (a `discover: true` machine) lists now, when it changed: the
    /// fleet is rebuilt as a reload would, breakers kept. Whether anything changed.
    pub fn found(&self, machine: &str, names: Vec<String>) -> bool {
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.fleet.load_full();
        if old.found.get(machine) == Some(&names) {
            return false;
        }
        let mut found = old.found.clone();
        found.insert(machine.to_string(), names);
        found.retain(|m, _| old.registry.machine_index(m).is_some());
        let reg = old.registry.clone();
        match Fleet::build_found(reg, Arc::clone(&self.bus), Some(&old), found) {
            Ok(fleet) => {
                fleet.activate(false);
                let served = fleet.registry.routes.len() - fleet.registry.file_routes;
                tracing::info!(machine, served, "discovered models changed");
                self.fleet.store(Arc::new(fleet));
                true
            }
            Err(e) => {
                tracing::warn!(machine, error = %e, "discovered models not applied");
                false
            }
        }
    }

    fn ledger(&self, from: &str, to: &str, reason: &str) {
        self.bus.ledger(Msg::Registry {
            at: crate::clock::wall(),
            from: from.to_string(),
            to: to.to_string(),
            reason: reason.to_string(),
        });
    }
}

/// Prunes the ledger at start and then once a day, to `server.keep_ledger` (README "Safety").
pub async fn prune_daily(svc: Arc<Service>) {
    loop {
        if let Some(store) = svc.store() {
            let fleet = svc.fleet();
            store.prune(fleet.registry.server.keep_ledger);
            store.prune_tasks(fleet.registry.tasks.keep);
            store.prune_responses(fleet.registry.server.keep_responses);
        }
        tokio::time::sleep(std::time::Duration::from_secs(86_400)).await;
    }
}
