//! registry.yaml as written: serde types that mirror the file, every key known.
//!
//! Values that validation may reject carry their source location ([`Spanned`]) so the
//! error can point at the line and column.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_saphyr::Spanned;

pub type S<T> = Spanned<T>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRegistry {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub defaults: RawDefaults,
    pub machines: S<IndexMap<String, RawMachine>>,
    pub models: S<IndexMap<String, RawModel>>,
    pub routes: S<Vec<RawRoute>>,
    pub telegram: Option<RawTelegram>,
    pub tasks: Option<RawTasks>,
    pub cluster: Option<RawCluster>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<S<String>>,
    pub api_keys_env: Option<String>,
    pub state_dir: Option<String>,
    pub max_body: Option<S<String>>,
    pub shutdown_grace: Option<S<String>>,
    #[serde(default)]
    pub allowed_hosts: Vec<S<String>>,
    #[serde(default)]
    pub allowed_origins: Vec<S<String>>,
    #[serde(default)]
    pub trusted_networks: Vec<S<String>>,
    pub header_timeout: Option<S<String>>,
    pub idle_timeout: Option<S<String>>,
    pub max_connections: Option<S<u32>>,
    pub max_upstream_body: Option<S<String>>,
    pub keep_ledger: Option<S<String>>,
    pub keep_responses: Option<S<String>>,
    pub max_upload: Option<S<String>>,
    pub max_uploads_in_flight: Option<S<u32>>,
    pub body_timeout: Option<S<String>>,
    pub max_detached: Option<S<u32>>,
    pub max_detached_bytes: Option<S<String>>,
    pub access_log: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDefaults {
    #[serde(default)]
    pub timeouts: RawTimeouts,
    #[serde(default)]
    pub breaker: RawBreaker,
    pub max_concurrency: Option<S<u32>>,
    pub task_slots: Option<S<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    pub connect: Option<S<String>>,
    pub first_byte: Option<S<String>>,
    pub idle: Option<S<String>>,
    pub total: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub failure_threshold: Option<S<u32>>,
    pub cooldown: Option<S<String>>,
    pub backoff: Option<S<f64>>,
    pub max_cooldown: Option<S<String>>,
    pub success_threshold: Option<S<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    pub url: S<String>,
    pub api: Option<S<String>>,
    pub api_key_env: Option<String>,
    pub health: Option<RawHealth>,
    #[serde(default)]
    pub timeouts: RawTimeouts,
    #[serde(default)]
    pub breaker: RawBreaker,
    pub max_concurrency: Option<S<u32>>,
    pub task_slots: Option<S<u32>>,
    pub parallel: Option<S<u32>>,
    pub warm_for: Option<S<String>>,
    #[serde(default)]
    pub discover: bool,
    pub discover_every: Option<S<String>>,
    /// README "Several routers": `auto`, `true` or `false`; a string so a typo gets our message.
    pub shared: Option<S<SharedRaw>>,
}

/// `shared:` as written: a YAML bool or the word `auto`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SharedRaw {
    Bool(bool),
    Word(String),
}

/// `cluster:` (README "Several routers").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub redis_url_env: S<String>,
    pub prefix: Option<S<String>>,
    pub node: Option<S<String>>,
    pub timeout: Option<S<String>>,
    pub probe_lease: Option<S<String>>,
    pub tasks: Option<S<String>>,
    pub assume_durable: Option<bool>,
    pub task_lease: Option<S<String>>,
    pub task_timeout: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    #[serde(default = "default_health_path")]
    pub path: S<String>,
    pub every: S<String>,
}

fn default_health_path() -> S<String> {
    unlocated("/models")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub machine: S<String>,
    pub name: String,
    pub kind: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    pub name: S<String>,
    #[serde(default)]
    pub keywords: Vec<S<String>>,
    #[serde(default)]
    pub images: bool,
    pub default: Option<S<bool>>,
    pub chain: Option<S<Vec<S<RawLink>>>>,
}

/// One link of a chain as written: a model's name, or a list of names (a tier of equals,
/// docs/registry.md "routes:").
#[derive(Debug)]
pub enum RawLink {
    One(String),
    Tier(Vec<S<RawTierItem>>),
}

/// One entry of a tier as written: a model's name, or a list (a tier inside a tier, which
/// validation refuses with its place).
#[derive(Debug)]
pub enum RawTierItem {
    One(String),
    Nested,
}

impl<'de> Deserialize<'de> for RawLink {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Link;
        impl<'de> serde::de::Visitor<'de> for Link {
            type Value = RawLink;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a model's name or a list of model names (a tier)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawLink, E> {
                Ok(RawLink::One(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawLink, E> {
                Ok(RawLink::One(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawLink, E> {
                Ok(RawLink::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawLink, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(RawLink::Tier(items))
            }
        }
        d.deserialize_any(Link)
    }
}

impl<'de> Deserialize<'de> for RawTierItem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Item;
        impl<'de> serde::de::Visitor<'de> for Item {
            type Value = RawTierItem;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a model's name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawTierItem, E> {
                Ok(RawTierItem::One(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawTierItem, E> {
                Ok(RawTierItem::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawTierItem, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(RawTierItem::Nested)
            }
        }
        d.deserialize_any(Item)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelegram {
    pub token_env: String,
    pub chat_id: i64,
    pub api_url: Option<S<String>>,
    #[serde(default = "default_digest_at")]
    pub digest_at: S<String>,
    #[serde(default = "default_timezone")]
    pub timezone: S<String>,
    #[serde(default = "yes")]
    pub alert_on_trip: bool,
    #[serde(default = "two")]
    pub page_after_cycles: u32,
}

/// `tasks:` (docs/api.md "Tasks"). Counts are read as `u64` so a value out of range gets our
/// message (with the range) rather than the YAML library's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTasks {
    pub max_running: Option<S<u64>>,
    pub max_queued: Option<S<u64>>,
    pub max_queued_per_key: Option<S<u64>>,
    pub max_finished: Option<S<u64>>,
    pub max_finished_bytes: Option<S<String>>,
    pub default_deadline: Option<S<String>>,
    pub max_attempts: Option<S<u64>>,
    pub keep: Option<S<String>>,
    pub max_request_body: Option<S<String>>,
    /// `None` when not written (the defaults); `[]` refuses every callback.
    pub callback_allow: Option<Vec<S<String>>>,
    pub callback_secret_env: Option<S<String>>,
}

fn default_digest_at() -> S<String> {
    unlocated("08:00")
}

fn default_timezone() -> S<String> {
    unlocated("UTC")
}

fn unlocated(s: &str) -> S<String> {
    Spanned::new(
        s.to_string(),
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}

fn yes() -> bool {
    true
}

fn two() -> u32 {
    2
}
