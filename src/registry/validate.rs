//! The raw file validated into a [`Registry`], section by section, in the order errors are
//! reported: server, defaults and machines, models, routes, telegram, tasks, cluster.

use super::cluster::validate_cluster;
use super::invalid::Invalid;
use super::machines::validate_machines;
use super::models::validate_models;
use super::raw::RawRegistry;
use super::routes::validate_routes;
use super::server::validate_server;
use super::tasks::validate_tasks;
use super::telegram::validate_telegram;
use super::Registry;
use crate::outcome::{Kind, ModelId, RouteId};

/// A [`Registry`] with an empty `version`, which the caller fills in.
pub(super) fn validate(raw: RawRegistry) -> Result<Registry, Invalid> {
    let server = validate_server(&raw.server)?;
    let machines = validate_machines(&raw.defaults, &raw.machines)?;
    let models = validate_models(&raw.models, &machines)?;
    let (routes, defaults) = validate_routes(&raw.routes, &models)?;
    let default_route = defaults
        .iter()
        .find(|(k, _)| *k == Kind::Chat)
        .map_or(0, |&(_, i)| i);
    let telegram = raw.telegram.as_ref().map(validate_telegram).transpose()?;
    let tasks = validate_tasks(&raw, &server, &machines)?;
    let cluster = raw.cluster.as_ref().map(validate_cluster).transpose()?;
    Ok(Registry {
        file_models: models.len(),
        file_routes: routes.len(),
        server,
        model_ids: (0..models.len()).map(ModelId).collect(),
        machines: machines.into(),
        models: models.into(),
        routes: routes.into(),
        default_route: RouteId(default_route),
        defaults: defaults.into_iter().map(|(k, i)| (k, RouteId(i))).collect(),
        telegram,
        tasks,
        cluster,
        version: String::new(),
    })
}
