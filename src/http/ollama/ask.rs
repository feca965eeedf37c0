//! Asking the machines what they know of a model: an Ollama server's card (`/api/show`),
//! an OpenAI-compatible server's model list. Never work: no breaker hears of it, and a
//! machine its breaker holds back is not asked. Each question is bounded by the machine's
//! `first_byte` and its answer by `server.max_upstream_body`.

use axum::body::Bytes;
use axum::http::StatusCode;
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::fleet::Fleet;
use crate::ollama::Report;
use crate::outcome::{MachineId, ModelId};
use crate::registry::Api;

/// What one target said when asked for its model.
pub(super) enum Asked {
    /// An Ollama server's card for the model: its answer as it came, and what it says.
    Card(Bytes, Report),
    /// An OpenAI-compatible server answered; what its model list says of the model
    /// (nothing when it does not list it: such servers often serve any name they are sent).
    Listed(Option<Report>),
    /// The machine answered that it does not have the model (Ollama's 404).
    Unknown,
    /// Held back by its breaker, or no usable answer: it says nothing either way.
    Down,
}

/// Asks `target`'s machine about it: Ollama's `/api/show`, or the OpenAI model list.
pub(super) async fn ask(fleet: &Fleet, target: ModelId) -> Asked {
    let model = &fleet.registry.models[target];
    if fleet.machines.phase(model.machine).is_down() {
        return Asked::Down;
    }
    match fleet.upstreams[model.machine].api {
        Api::Ollama => card(fleet, model.machine, &model.backend).await,
        Api::OpenAi => match list(fleet, model.machine).await {
            Some(list) => Asked::Listed(list.and_then(|l| Report::of_list(&l, &model.backend))),
            None => Asked::Down,
        },
    }
}

/// What the machines that are up report of every model, indexed like the registry's
/// models, all asked at once: one model list per OpenAI-compatible machine, one card per
/// model on an Ollama server.
pub(super) async fn reports(fleet: &Fleet) -> Vec<Option<Report>> {
    let reg = &fleet.registry;
    let per_machine = reg.machines.enumerate().map(|(i, _)| async move {
        if fleet.machines.phase(i).is_down() {
            return Vec::new();
        }
        let mine = reg.models.enumerate().filter(|(_, m)| m.machine == i);
        match fleet.upstreams[i].api {
            Api::Ollama => {
                let cards = mine.map(|(m, model)| async move {
                    match card(fleet, i, &model.backend).await {
                        Asked::Card(_, report) => (m, Some(report)),
                        _ => (m, None),
                    }
                });
                join_all(cards).await
            }
            Api::OpenAi => {
                let list = list(fleet, i).await.flatten();
                mine.map(|(m, model)| {
                    let report = list
                        .as_ref()
                        .and_then(|l| Report::of_list(l, &model.backend));
                    (m, report)
                })
                .collect()
            }
        }
    });
    let mut out = vec![None; reg.models.len()];
    for (m, report) in join_all(per_machine).await.into_iter().flatten() {
        if let Some(slot) = out.get_mut(m.0) {
            *slot = report;
        }
    }
    out
}

/// An Ollama server's card for `backend`.
async fn card(fleet: &Fleet, machine: MachineId, backend: &str) -> Asked {
    let body = json!({ "model": backend }).to_string();
    let upstream = &fleet.upstreams[machine];
    match upstream.native("/api/show", Some(body.into())).await {
        Ok((status, body)) if status.is_success() => match serde_json::from_slice::<Value>(&body) {
            Ok(card @ Value::Object(_)) => Asked::Card(body, Report::of_card(&card)),
            _ => Asked::Down,
        },
        Ok((StatusCode::NOT_FOUND, _)) => Asked::Unknown,
        _ => Asked::Down,
    }
}

/// An OpenAI-compatible machine's model list: None when it did not answer; Some(None) when
/// it answered with something other than a JSON list (it is up, and says nothing).
async fn list(fleet: &Fleet, machine: MachineId) -> Option<Option<Value>> {
    let url = &fleet.registry.machines[machine].url;
    let (status, body) = fleet.upstreams[machine]
        .native(models_path(url), None)
        .await
        .ok()?;
    let list = serde_json::from_slice::<Value>(&body).ok();
    Some(list.filter(|_| status.is_success()))
}

/// Where `{url}/models` is for [`crate::upstream::Upstream::native`], which asks under the
/// machine's URL without its `/v1`.
fn models_path(url: &str) -> &'static str {
    if url.ends_with("/v1") {
        "/v1/models"
    } else {
        "/models"
    }
}
