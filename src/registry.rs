//! registry.yaml (docs/registry.md): parse the raw file, then validate it into a [`Registry`].
//!
//! Every error names the file, line and column and says what was expected; unknown keys
//! are errors. A [`Registry`] that exists is valid: the rest of the program never checks
//! it again.

use std::path::Path;
use std::time::Duration;

use crate::breaker::Policy;
use crate::outcome::ids::Table;
use crate::outcome::{Kind, MachineId, ModelId, RouteId};

mod callback_allow;
mod cluster;
mod durations;
mod found;
mod invalid;
mod machines;
mod models;
mod parse_error;
pub(crate) mod policy;
mod raw;
mod routes;
mod server;
mod tasks;
mod telegram;
#[cfg(test)]
mod tests;
mod units;
mod url;
mod validate;
mod version;

pub use callback_allow::AllowRule;
pub use cluster::{is_local_ip, share_key, PROBE_LEASE, TASK_LEASE, TASK_TIMEOUT};
pub use found::usable as usable_name;
use raw::RawRegistry;
pub use server::{is_loopback, Cidr, Server, DEFAULT_ORIGINS};
pub use tasks::Tasks;
pub use units::{parse_duration, parse_duration_max, parse_size, DURATION_MAX};

/// The longest timeout, cooldown or interval registry.yaml may set (README "Safety"): a value
/// beyond it is a typo, and would overflow the clock.
pub const SPAN_MAX: Duration = Duration::from_secs(30 * 86_400);

/// The four timeouts of README "What trips a breaker" for one machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub idle: Duration,
    pub total: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    pub path: String,
    pub every: Duration,
}

/// One machine: one failure domain, one breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub name: String,
    /// OpenAI base URL without a trailing slash, e.g. `http://gpu-box.local:11434/v1`.
    pub url: String,
    /// The API the machine speaks besides OpenAI's (docs/api.md "The Ollama endpoints"): Ollama's
    /// own, natively.
    pub api: Api,
    /// The environment variable holding this upstream's bearer key (never the key itself).
    pub api_key_env: Option<String>,
    pub health: Option<Health>,
    pub timeouts: Timeouts,
    pub breaker: Policy,
    pub max_concurrency: u32,
    /// Tasks running at once on this machine (docs/api.md "Tasks"): 1..=`max_concurrency`, default
    /// 1.
    pub task_slots: u32,
    /// Its verdict is shared with the other routers of `cluster:` (README "Several routers"), under
    /// [`share_key`] of its URL.
    pub shared: bool,
    /// Requests it runs at once (docs/registry.md "routes:"): below it, the machine is free
    /// for a tier's pick.
    pub parallel: u32,
    /// How long an answer for a model keeps that model warm on it.
    pub warm_for: Duration,
    /// Its model list is read and every name on it served (docs/registry.md "machines:").
    pub discover: bool,
    pub discover_every: Duration,
}

/// `cluster:` (README "Several routers"): the routers sharing one prefix in one Redis share
/// verdicts.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// The environment variable holding the Redis URL (the URL itself is a secret).
    pub redis_url_env: String,
    pub prefix: String,
    /// This router's name among its peers.
    pub node: String,
    /// Each Redis operation at most; slower counts as Redis down.
    pub timeout: Duration,
    /// The probe lease's `PX` (15 s).
    pub probe_lease: Duration,
    /// Where the task queue lives (README "Several routers": the shared queue).
    pub tasks: QueueMode,
    /// The operator checked that Redis writes to disk on every write, where `CONFIG` is
    /// not allowed to say so.
    pub assume_durable: bool,
    /// A running task's lease in Redis (30 s), renewed while it runs.
    pub task_lease: Duration,
    /// Each task write at most (1 s): it waits for Redis's fsync, so it gets its own bound,
    /// not the verdicts' `timeout`.
    pub task_timeout: Duration,
}

/// `cluster.tasks`: each router's own queue in its SQLite file, or one queue in Redis for
/// the whole pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueMode {
    #[default]
    Local,
    Shared,
}

impl QueueMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::Local => "local",
            QueueMode::Shared => "shared",
        }
    }
}

/// Which API a machine speaks (`api:` in registry.yaml, docs/api.md "The Ollama endpoints"). Every
/// machine takes OpenAI requests at its `url`; an Ollama server also takes Ollama's own at
/// `/api/...`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    #[default]
    OpenAi,
    Ollama,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Ollama => "ollama",
        }
    }
}

/// A logical model: where it runs and what the machine calls it.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub name: String,
    pub machine: MachineId,
    pub backend: String,
    /// What work it does (`chat` when not written: chat, completions, Responses and
    /// embeddings, as every model served before kinds).
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub name: String,
    pub keywords: Vec<String>,
    pub images: bool,
    /// Targets, in fallback order.
    pub chain: Vec<ModelId>,
    /// The chain's tiers of equals (docs/registry.md "routes:"), each two or more models that
    /// stand next to each other in `chain`; empty for a chain tried strictly in order.
    pub tiers: Vec<Vec<ModelId>>,
    /// The kind of every model of its chain.
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Telegram {
    pub token_env: String,
    pub chat_id: i64,
    pub api_url: Option<String>,
    /// When the daily digest goes out: (hour, minute), local time in `timezone`.
    pub digest_at: (u8, u8),
    pub timezone: String,
    pub alert_on_trip: bool,
    pub page_after_cycles: u32,
}

/// A validated registry.
#[derive(Clone, Debug, PartialEq)]
pub struct Registry {
    pub server: Server,
    pub machines: Table<MachineId, Machine>,
    pub models: Table<ModelId, Model>,
    /// `model_ids[m] == m`: lets a lone model lend out a one-element chain slice.
    pub model_ids: Table<ModelId, ModelId>,
    pub routes: Table<RouteId, Route>,
    /// The route for chat requests that hit no keyword (the chat route marked `default`,
    /// else the first chat route; the first route when none is chat).
    pub default_route: RouteId,
    /// Each kind's default route: the one of that kind marked `default`, else the first of
    /// that kind; kinds without routes are absent.
    pub defaults: Vec<(Kind, RouteId)>,
    pub telegram: Option<Telegram>,
    /// `tasks:` (docs/api.md "Tasks"), its defaults when the block is absent.
    pub tasks: Tasks,
    /// `cluster:` (README "Several routers"), when routers share verdicts through Redis.
    pub cluster: Option<Cluster>,
    /// A short hash of the file's bytes, recorded with breaker transitions.
    pub version: String,
    /// How many of `models` and of `routes` the file wrote; those after them were found on
    /// the machines (`discover: true`, [`Registry::with_found`]).
    pub file_models: usize,
    pub file_routes: usize,
}

impl Registry {
    /// The tiers of the route labelled `label` (a route's name; a model's has none): empty for
    /// every registry without tiers, at no cost.
    pub fn tiers(&self, label: &str) -> &[Vec<ModelId>] {
        self.routes
            .iter()
            .find(|r| !r.tiers.is_empty() && r.name == label)
            .map_or(&[], |r| r.tiers.as_slice())
    }
}

/// A registry that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}{at}: {message}")]
    Invalid {
        file: String,
        /// `:line:column`, empty when the place is unknown.
        at: String,
        message: String,
    },
}

impl Registry {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Registry, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            file: path.display().to_string(),
            source,
        })?;
        Registry::parse(&text, &path.display().to_string())
    }

    /// Parses and validates YAML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Registry, RegistryError> {
        let raw: RawRegistry =
            serde_saphyr::from_str(text).map_err(|e| parse_error::reworded(&e, text, file))?;
        let mut registry =
            validate::validate(raw).map_err(|(loc, message)| RegistryError::Invalid {
                file: file.to_string(),
                at: parse_error::place(loc),
                message,
            })?;
        registry.version = version::version_of(text);
        Ok(registry)
    }

    pub fn machine_index(&self, name: &str) -> Option<MachineId> {
        self.machines.position(|m| m.name == name)
    }

    /// `model@machine`, as headers, errors and `/status` name a target.
    pub fn target_name(&self, model: ModelId) -> String {
        let m = &self.models[model];
        if self.is_found(model) {
            // Already `NAME@MACHINE`.
            return m.name.clone();
        }
        format!("{}@{}", m.name, self.machines[m.machine].name)
    }
}
