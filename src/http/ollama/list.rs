//! The lists Ollama clients poll: every name a client may pick (`/api/tags`), with what each
//! can do and a digest of what it maps to, and the models the Ollama machines hold loaded
//! (`/api/ps`).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::Json;
use futures_util::future::join_all;
use serde::Serialize;
use serde_json::{json, Value};

use super::ask;
use crate::fleet::Fleet;
use crate::ollama::{auto_capabilities, capabilities, digest};
use crate::outcome::Kind;
use crate::registry::Api;
use crate::route::Choice;
use crate::service::Service;

/// Every name a client may pick, in Ollama's spelling, with what it routes to: `auto`
/// (None), the routes, the logical models, and the backend names that name one model.
fn names(fleet: &Fleet) -> Vec<(String, Option<Choice>)> {
    let reg = &fleet.registry;
    let mut out: Vec<(String, Option<Choice>)> = vec![("auto".into(), None)];
    out.extend(
        reg.routes
            .enumerate()
            .map(|(r, route)| (route.name.clone(), Some(Choice::Route(r)))),
    );
    // A name found on the machines is listed once, as its route.
    let file_models = || reg.models.enumerate().filter(|(i, _)| !reg.is_found(*i));
    out.extend(file_models().map(|(i, m)| (m.name.clone(), Some(Choice::Model(i)))));
    for (i, m) in file_models() {
        let sharing = reg.models.iter().filter(|o| o.backend == m.backend).count();
        if sharing == 1 {
            out.push((m.backend.clone(), Some(Choice::Model(i))));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(n, _)| seen.insert(tagged(n)));
    out
}

/// A name with Ollama's tag: `:latest` added when it has none.
fn tagged(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

#[derive(Serialize)]
pub(super) struct Details {
    parent_model: &'static str,
    format: &'static str,
    family: &'static str,
    families: Option<Vec<String>>,
    parameter_size: &'static str,
    quantization_level: &'static str,
}

/// What labrouter knows of a model's make: nothing; the machine knows.
pub(super) const UNKNOWN: Details = Details {
    parent_model: "",
    format: "",
    family: "",
    families: None,
    parameter_size: "",
    quantization_level: "",
};

#[derive(Serialize)]
struct Tag<'a> {
    name: String,
    model: String,
    modified_at: String,
    size: u64,
    digest: String,
    details: Details,
    capabilities: Vec<&'a str>,
    /// The kind of work the name's models do (`chat` for `auto`).
    kind: &'static str,
}

/// `GET /api/tags`: every name a client may pick, in Ollama's list shape. A name's
/// `capabilities` are those of the first target it routes to, as `/api/show` says them,
/// so the machines that are up are asked what they report (see [`ask::reports`]).
pub async fn tags(State(svc): State<Arc<Service>>) -> Json<Value> {
    let fleet = svc.fleet();
    let reg = &fleet.registry;
    let modified_at = since_boot(&svc);
    let reports = ask::reports(&fleet).await;
    let models: Vec<Tag> = names(&fleet)
        .into_iter()
        .map(|(name, choice)| {
            let first = match choice {
                Some(Choice::Model(m)) => Some(m),
                Some(Choice::Route(r)) => reg.routes[r].chain.first().copied(),
                None => None,
            };
            let capabilities = match first {
                Some(m) => capabilities(m, reg, reports.get(m.0).and_then(Option::as_ref)),
                None => auto_capabilities(reg),
            };
            let kind = first.map_or(Kind::Chat, |m| reg.models[m].kind);
            let name = tagged(&name);
            Tag {
                digest: digest(reg, choice),
                model: name.clone(),
                name,
                modified_at: modified_at.clone(),
                size: 0,
                details: UNKNOWN,
                capabilities,
                kind: kind.as_str(),
            }
        })
        .collect();
    Json(json!({ "models": models }))
}

/// The service's start, as the models' `modified_at`.
pub(super) fn since_boot(svc: &Service) -> String {
    let boot = UNIX_EPOCH + Duration::from_millis(u64::try_from(svc.boot_ms()).unwrap_or(0));
    crate::clock::rfc3339(boot)
}

/// `GET /api/ps`: the models loaded on the Ollama machines that are up, merged; a machine
/// a breaker holds back is left out, and none is waited on past its `first_byte`.
pub async fn ps(State(svc): State<Arc<Service>>) -> Json<Value> {
    let fleet = svc.fleet();
    let up: Vec<_> = fleet
        .machines
        .phases()
        .zip(fleet.upstreams.iter())
        .filter(|((_, phase), u)| !phase.is_down() && u.api == Api::Ollama)
        .map(|(_, u)| u.native("/api/ps", None))
        .collect();
    let mut models = Vec::new();
    for answer in join_all(up).await {
        let Ok((status, body)) = answer else { continue };
        if !status.is_success() {
            continue;
        }
        if let Ok(Value::Object(mut o)) = serde_json::from_slice::<Value>(&body) {
            if let Some(Value::Array(list)) = o.remove("models") {
                models.extend(list);
            }
        }
    }
    Json(json!({ "models": models }))
}
