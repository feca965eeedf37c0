//! Everything one loaded registry needs at run time: the registry itself, its compiled
//! router, the breakers and one pooled client per machine.

use std::sync::Arc;

use crate::machines::{Bus, Machines};
use crate::outcome::ids::Table;
use crate::outcome::{MachineId, ModelId};
use crate::registry::Registry;
use crate::route::Matcher;
use crate::upstream::Upstream;

#[derive(Debug)]
pub struct Fleet {
    pub registry: Registry,
    pub matcher: Matcher,
    pub machines: Machines,
    /// What this router remembers of each target for a tier's pick (docs/registry.md
    /// "routes:").
    pub picks: crate::pick::Picks,
    /// The names found on `discover: true` machines (by machine name), which `registry`
    /// serves after the file's own ([`Registry::with_found`]).
    pub found: Found,
    /// Indexed like `registry.machines`; built once, so no request builds a client.
    pub upstreams: Table<MachineId, Arc<Upstream>>,
    /// Each model's `x-labrouter-target` value (`NAME@MACHINE`), indexed like
    /// `registry.models`: built once, not per answer.
    pub targets: Table<ModelId, Option<axum::http::HeaderValue>>,
    /// Bearer tokens clients must send (from `server.api_keys_env`); empty: no auth.
    pub api_keys: ApiKeys,
    /// The Redis of `cluster:` (README "Several routers"), read from its environment variable and
    /// checked.
    pub redis: Option<crate::cluster::Endpoint>,
    /// `labrouter_request_duration_seconds` per route label (every route's and model's
    /// name), resolved at first use or as a serving thread starts ([`Fleet::resolve_meters`]):
    /// after the recorder is in, and never per request.
    durations: std::sync::OnceLock<std::collections::HashMap<String, metrics::Histogram>>,
    overhead: std::sync::OnceLock<metrics::Histogram>,
}

/// What each `discover: true` machine listed at its last read, by machine name.
pub type Found = std::collections::BTreeMap<String, Vec<String>>;

/// Client bearer tokens; their Debug output never shows them.
pub struct ApiKeys(pub Vec<String>);

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeys({} redacted)", self.0.len())
    }
}

impl ApiKeys {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }
}

/// The lab could not be started from this registry.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("server.listen is {listen}, which is not loopback, and no API keys are set: set server.api_keys_env to an environment variable holding comma-separated bearer tokens (and export it), or listen on 127.0.0.1")]
    OpenWithoutKeys { listen: std::net::SocketAddr },
    #[error("server.api_keys_env names {var}, which is unset or holds no key: export {var} with comma-separated bearer tokens, or remove api_keys_env")]
    KeysUnset { var: String },
    #[error("machine '{machine}': {why}")]
    Client { machine: String, why: String },
    #[error("cluster: {0}")]
    Cluster(String),
}

impl Fleet {
    /// A fleet on its own (tests, benchmarks): no store, no reloads.
    pub fn new(registry: Registry) -> Result<Fleet, FleetError> {
        let bus = Bus::new(None);
        bus.set_version(&registry.version);
        Fleet::build(registry, bus, None)
    }

    /// A fleet whose breakers report to `bus`; with `old`, machines that still exist keep
    /// their breakers (a reload). Building announces nothing: see [`Fleet::activate`].
    /// Upstreams are indexed like `registry.machines`.
    pub fn build(
        registry: Registry,
        bus: Arc<Bus>,
        old: Option<&Fleet>,
    ) -> Result<Fleet, FleetError> {
        let found = old.map(|o| o.found.clone()).unwrap_or_default();
        Fleet::build_found(registry, bus, old, found)
    }

    /// [`Fleet::build`] serving the names `found` on the machines besides the file's.
    pub fn build_found(
        registry: Registry,
        bus: Arc<Bus>,
        old: Option<&Fleet>,
        found: Found,
    ) -> Result<Fleet, FleetError> {
        let registry = if found.is_empty() {
            registry
        } else {
            registry.with_found(&found)
        };
        let api_keys: Vec<String> = registry
            .server
            .api_keys_env
            .as_deref()
            .map(|var| {
                std::env::var(var)
                    .unwrap_or_default()
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !crate::registry::is_loopback(registry.server.listen.ip()) && api_keys.is_empty() {
            return Err(FleetError::OpenWithoutKeys {
                listen: registry.server.listen,
            });
        }
        // A typo in the variable's name must not silently switch auth off.
        if let (Some(var), true) = (&registry.server.api_keys_env, api_keys.is_empty()) {
            return Err(FleetError::KeysUnset { var: var.clone() });
        }
        let upstreams = registry
            .machines
            .iter()
            .map(|m| {
                Upstream::new(m, registry.server.max_upstream_body)
                    .map(Arc::new)
                    .map_err(|why| FleetError::Client {
                        machine: m.name.clone(),
                        why,
                    })
            })
            .collect::<Result<_, _>>()?;
        let redis = registry
            .cluster
            .as_ref()
            .map(|c| crate::cluster::Endpoint::from_env(&c.redis_url_env))
            .transpose()
            .map_err(FleetError::Cluster)?;
        Ok(Fleet {
            redis,
            durations: std::sync::OnceLock::new(),
            overhead: std::sync::OnceLock::new(),
            matcher: Matcher::new(&registry),
            machines: Machines::with_bus(&registry, bus, old.map(|o| &o.machines)),
            picks: crate::pick::Picks::new(&registry, old.map(|o| (&o.registry, &o.picks))),
            found,
            upstreams,
            targets: (0..registry.models.len())
                .map(|i| {
                    axum::http::HeaderValue::from_str(&registry.target_name(ModelId::from(i)))
                        .ok()
                        .map(crate::heap::cloned_once)
                })
                .collect(),
            api_keys: ApiKeys(api_keys),
            registry,
        })
    }

    /// A target's `NAME@MACHINE`, borrowed from [`Fleet::targets`] (made once) when it could
    /// be made a header value.
    pub fn target_name(&self, model: ModelId) -> std::borrow::Cow<'_, str> {
        match self.targets[model].as_ref().and_then(|v| v.to_str().ok()) {
            Some(name) => std::borrow::Cow::Borrowed(name),
            None => std::borrow::Cow::Owned(self.registry.target_name(model)),
        }
    }

    /// Records how long a request served under `label` (a route's or a model's name) took.
    pub fn record_duration(&self, label: &str, seconds: f64) {
        match self.durations().get(label) {
            Some(h) => h.record(seconds),
            None => metrics::histogram!("labrouter_request_duration_seconds", "route" => label.to_string())
                .record(seconds),
        }
    }

    fn durations(&self) -> &std::collections::HashMap<String, metrics::Histogram> {
        self.durations.get_or_init(|| {
            let names = self.registry.routes.iter().map(|r| r.name.as_str());
            let models = self.registry.models.iter().map(|m| m.name.as_str());
            names
                .chain(models)
                .map(|n| {
                    let h = metrics::histogram!("labrouter_request_duration_seconds", "route" => n.to_string());
                    (n.to_string(), h)
                })
                .collect()
        })
    }

    /// Records labrouter's own time in a request: its whole time to the response head less
    /// the time it waited on machines.
    pub fn record_overhead(&self, seconds: f64) {
        self.overhead().record(seconds);
    }

    fn overhead(&self) -> &metrics::Histogram {
        self.overhead
            .get_or_init(|| metrics::histogram!(crate::telemetry::OVERHEAD))
    }

    /// Resolves the metric handles the request path would resolve at first use (the
    /// recorder must be in): a serving thread does it before its requests have a heap of
    /// their own, so that these handles, kept for the fleet's life, sit in no page a burst
    /// fills (`crate::heap`).
    pub fn resolve_meters(&self) {
        self.durations();
        self.overhead();
        for upstream in self.upstreams.iter() {
            upstream.meters();
        }
    }

    /// Sets every breaker's state gauge: breakers built before the recorder was installed
    /// set theirs into no recorder, and a restored breaker has made no transition.
    pub fn gauge_states(&self) {
        for (name, phase) in self.machines.phases() {
            metrics::gauge!("labrouter_breaker_state", "machine" => name.to_string())
                .set(crate::telemetry::phase_value(phase));
        }
    }

    /// Makes this fleet the one that serves: transitions carry its registry version from
    /// now on, the breaker gauges show its machines, and on a reload 401/403 pauses lift
    /// (docs/api.md "Breaker classification": "until config reload or manual reset").
    pub fn activate(&self, reloaded: bool) {
        self.machines.bus().set_version(&self.registry.version);
        self.gauge_states();
        if reloaded {
            self.machines.lift_auth_pauses();
        }
    }
}
