//! Warm models, learned off the request path (docs/registry.md "routes:"): each machine that
//! holds a tier's target is asked which models it has loaded — Ollama's `/api/ps` for
//! `api: ollama`, the `status` of each entry of llama-server's `/models` in router mode
//! otherwise — at start and then on its health schedule (`health.every`, else every 30 s).
//! A machine whose breaker is not closed is not asked: its probe tells. What a read lists
//! marks the machine's targets warm in [`crate::pick::Picks`] until the next read; an
//! unreadable or unexpected answer changes nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::breaker::Phase;
use crate::fleet::Fleet;
use crate::health::Schedule;
use crate::outcome::MachineId;
use crate::registry::{Api, Machine, Registry};
use crate::service::Service;

#[cfg(test)]
mod tests;

/// How often a tier's machine is read when its entry sets no `health.every`.
const EVERY: Duration = Duration::from_secs(30);

/// The most entries of one answer looked at.
const MAX_LISTED: usize = 1024;

/// Runs forever: reads each tier machine's loaded models on its schedule.
pub async fn run(svc: Arc<Service>) {
    let every = |fleet: &Fleet, i: MachineId, m: &Machine| {
        in_a_tier(&fleet.registry, i).then(|| m.health.as_ref().map_or(EVERY, |h| h.every))
    };
    Schedule::new(true)
        .run(svc, every, |fleet, i| {
            if fleet.machines.phase(i) == Phase::Closed {
                tokio::spawn(read(fleet, i));
            }
        })
        .await;
}

/// Whether a model of `machine` stands in a tier of some route.
fn in_a_tier(reg: &Registry, machine: MachineId) -> bool {
    reg.routes
        .iter()
        .flat_map(|r| r.tiers.iter().flatten())
        .any(|&m| reg.models[m].machine == machine)
}

/// Reads `machine`'s loaded models and marks its targets.
async fn read(fleet: Arc<Fleet>, machine: MachineId) {
    let up = &fleet.upstreams[machine];
    let answer = match up.api {
        Api::Ollama => up.native("/api/ps", None).await,
        Api::OpenAi => up.models().await,
    };
    let loaded = match answer {
        Ok((status, body)) if status.is_success() => match up.api {
            Api::Ollama => ollama_ps(&body),
            Api::OpenAi => router_models(&body),
        },
        Ok(_) | Err(_) => None,
    };
    let Some(loaded) = loaded else { return };
    let reg = &fleet.registry;
    for (id, model) in reg.models.enumerate() {
        if model.machine == machine {
            let listed = loaded.iter().any(|name| same_model(name, &model.backend));
            fleet.picks.set_listed(id, listed);
        }
    }
}

/// The names of Ollama's `/api/ps` answer (`{"models": [{"name", "model"}, ...]}`); `None`
/// when it is not that.
fn ollama_ps(body: &[u8]) -> Option<Vec<String>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let entries = v.get("models")?.as_array()?;
    Some(
        entries
            .iter()
            .take(MAX_LISTED)
            .flat_map(|e| [e.get("name"), e.get("model")])
            .filter_map(|n| n.and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// The loaded models of llama-server's `/models` in router mode (entries whose `status` is
/// `loaded`, written as a word or as `{"value": ...}`); `None` when no entry has a status (a
/// server that does not say).
fn router_models(body: &[u8]) -> Option<Vec<String>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let entries = v.get("data")?.as_array()?;
    fn status(e: &Value) -> Option<&str> {
        let s = e.get("status")?;
        s.as_str()
            .or_else(|| s.get("value").and_then(Value::as_str))
    }
    let entries = &entries[..entries.len().min(MAX_LISTED)];
    if !entries.iter().any(|e| status(e).is_some()) {
        return None;
    }
    Some(
        entries
            .iter()
            .filter(|e| status(e) == Some("loaded"))
            .filter_map(|e| e.get("id").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// Whether a machine's `listed` name is the registry's `backend`: equal, or Ollama's
/// implied `:latest` tag on either side.
fn same_model(listed: &str, backend: &str) -> bool {
    let bare = |n: &str| {
        n.strip_suffix(":latest")
            .map(str::to_string)
            .unwrap_or_else(|| n.to_string())
    };
    listed == backend || bare(listed) == bare(backend)
}
