//! Discovery (docs/registry.md "machines:"): the model list of each `discover: true` machine
//! — Ollama's `/api/tags` for `api: ollama`, `{url}/models` otherwise — read at start, every
//! `discover_every`, and when a request names a model nobody has (at most once per
//! [`MISS_EVERY`] per machine, before the 400). What it lists is served
//! ([`crate::Service::found`]); an unreadable answer changes nothing, so a machine that is
//! down keeps its names until it answers again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::health::Schedule;
use crate::outcome::MachineId;
use crate::registry::{Api, Machine};
use crate::service::Service;

#[cfg(test)]
mod tests;

/// How often a miss may read one machine's list again.
pub const MISS_EVERY: Duration = Duration::from_secs(10);

/// The most names taken from one machine's list.
const MAX_NAMES: usize = 1024;

/// Runs forever: reads each `discover: true` machine's list on its schedule.
pub async fn run(svc: Arc<Service>) {
    let every = |_: &Fleet, _: MachineId, m: &Machine| m.discover.then_some(m.discover_every);
    let me = Arc::clone(&svc);
    Schedule::new(true)
        .run(svc, every, move |fleet, i| {
            let svc = Arc::clone(&me);
            tokio::spawn(async move { read(&svc, &fleet, i).await });
        })
        .await;
}

/// When a miss last read each machine's list, by machine name (one per service).
struct MissReads(Mutex<HashMap<String, Instant>>);

/// Decides `ask` on `fleet`; a model nobody has first makes the `discover: true` machines
/// read their lists again ([`miss`]), and the decision is made again on what is served then.
pub async fn decide(
    svc: &Service,
    fleet: Arc<Fleet>,
    ask: &crate::route::Ask<'_>,
) -> Result<(Arc<Fleet>, crate::route::Routed), crate::route::RouteError> {
    decide_by(svc, fleet, ask.header.is_some(), |f| {
        f.matcher.decide_for(&f.registry, ask)
    })
    .await
}

/// [`decide`] with the decision `by` makes (the Ollama side reads `:latest` too); `forced`:
/// the request named its route by header, which no list changes.
pub async fn decide_by(
    svc: &Service,
    fleet: Arc<Fleet>,
    forced: bool,
    by: impl Fn(&Fleet) -> Result<crate::route::Routed, crate::route::RouteError>,
) -> Result<(Arc<Fleet>, crate::route::Routed), crate::route::RouteError> {
    use crate::route::RouteError;
    match by(&fleet) {
        Err(RouteError::Unknown(unknown)) => {
            let discovers = fleet.registry.machines.iter().any(|m| m.discover);
            if forced || !discovers || !miss(svc).await {
                return Err(RouteError::Unknown(unknown));
            }
            let fleet = svc.fleet();
            let routed = by(&fleet)?;
            Ok((fleet, routed))
        }
        decided => decided.map(|routed| (fleet, routed)),
    }
}

/// A request named a model nobody has: reads the list of every `discover: true` machine
/// not read for a miss within [`MISS_EVERY`], at once. Whether what is served changed.
pub async fn miss(svc: &Service) -> bool {
    let fleet = svc.fleet();
    let last = svc.shared(|| MissReads(Mutex::new(HashMap::new())));
    let now = Instant::now();
    let due: Vec<MachineId> = {
        let mut last = last.0.lock().unwrap_or_else(|e| e.into_inner());
        fleet
            .registry
            .machines
            .enumerate()
            .filter(|(_, m)| m.discover)
            .filter(|(_, m)| {
                let fresh = last.get(&m.name).is_some_and(|&at| now < at + MISS_EVERY);
                if !fresh {
                    last.insert(m.name.clone(), now);
                }
                !fresh
            })
            .map(|(i, _)| i)
            .collect()
    };
    let reads = due.into_iter().map(|i| read(svc, &fleet, i));
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .any(|changed| changed)
}

/// Reads `machine`'s list and serves it; whether what is served changed.
async fn read(svc: &Service, fleet: &Fleet, machine: MachineId) -> bool {
    let up = &fleet.upstreams[machine];
    let answer = match up.api {
        Api::Ollama => up.native("/api/tags", None).await,
        Api::OpenAi => up.models().await,
    };
    let name = &fleet.registry.machines[machine].name;
    let names = match answer {
        Ok((status, body)) if status.is_success() => listed(&body),
        Ok((status, _)) => {
            tracing::debug!(machine = %name, status = status.as_u16(), "discovery: no model list");
            None
        }
        Err(why) => {
            tracing::debug!(machine = %name, %why, "discovery: no model list");
            None
        }
    };
    match names {
        Some(names) => svc.found(name, names),
        None => false,
    }
}

/// The names of a model list: Ollama's `{"models": [{"name"}]}` or OpenAI's
/// `{"data": [{"id"}]}`, the usable ones (see [`crate::registry::usable_name`]), each once,
/// at most [`MAX_NAMES`]; `None` when it is neither.
fn listed(body: &[u8]) -> Option<Vec<String>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let (entries, key) = match (v.get("models"), v.get("data")) {
        (Some(Value::Array(a)), _) => (a, "name"),
        (_, Some(Value::Array(a))) => (a, "id"),
        _ => return None,
    };
    let mut names: Vec<String> = Vec::new();
    for n in entries
        .iter()
        .filter_map(|e| e.get(key).and_then(Value::as_str))
    {
        if crate::registry::usable_name(n) && !names.iter().any(|x| x == n) {
            names.push(n.to_string());
            if names.len() == MAX_NAMES {
                break;
            }
        }
    }
    Some(names)
}
