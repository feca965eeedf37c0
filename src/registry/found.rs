//! Models found on the machines (`discover: true`, docs/registry.md "machines:"): every
//! backend name a machine lists that the file does not name (as a route, a logical model or
//! a backend name) becomes a route of that name, after the file's routes, whose chain is
//! each machine that lists it — a tier when several do — through a model named
//! `NAME@MACHINE`. The file always wins; a name no machine lists any more is gone at the next
//! [`Registry::with_found`].

use std::collections::BTreeMap;

use indexmap::IndexMap;

use super::{Model, Registry, Route};
use crate::outcome::{Kind, MachineId, ModelId, RouteId};

/// The longest name taken from a machine's list.
pub const MAX_NAME: usize = 200;

impl Registry {
    /// This registry as the file wrote it, plus the names `found` on its `discover: true`
    /// machines (by machine name; names of machines that are gone or do not discover are
    /// ignored).
    pub fn with_found(&self, found: &BTreeMap<String, Vec<String>>) -> Registry {
        let mut reg = self.clone();
        reg.models.truncate(self.file_models);
        reg.routes.truncate(self.file_routes);
        let mut names: IndexMap<&str, Vec<MachineId>> = IndexMap::new();
        for (id, machine) in reg.machines.enumerate() {
            let Some(list) = found.get(&machine.name).filter(|_| machine.discover) else {
                continue;
            };
            for name in list {
                if usable(name) && !reg.names(name) {
                    names.entry(name.as_str()).or_default().push(id);
                }
            }
        }
        for (name, machines) in names {
            let chain: Vec<ModelId> = machines
                .iter()
                .map(|&machine| {
                    reg.models.push(Model {
                        name: format!("{name}@{}", reg.machines[machine].name),
                        machine,
                        backend: name.to_string(),
                        kind: Kind::Chat,
                    })
                })
                .collect();
            let tiers = if chain.len() > 1 {
                vec![chain.clone()]
            } else {
                Vec::new()
            };
            reg.routes.push(Route {
                name: name.to_string(),
                keywords: Vec::new(),
                images: false,
                chain,
                tiers,
                kind: Kind::Chat,
            });
        }
        reg.model_ids = (0..reg.models.len()).map(ModelId).collect();
        // The ids of found models change with what is found: a version of its own, so that
        // nothing keyed by version (a task's chain) outlives them.
        let file = self.version.split('+').next().unwrap_or_default();
        let names: Vec<&str> = reg
            .routes
            .iter()
            .skip(self.file_routes)
            .flat_map(|r| {
                std::iter::once(r.name.as_str())
                    .chain(r.chain.iter().map(|&m| reg.models[m].name.as_str()))
            })
            .collect();
        reg.version = if names.is_empty() {
            file.to_string()
        } else {
            format!(
                "{file}+{}",
                &super::version::version_of(&names.join("\n"))[..8]
            )
        };
        reg
    }

    /// Whether the file names `name`: a route, a logical model, a backend name, or `auto`.
    fn names(&self, name: &str) -> bool {
        name == "auto"
            || self.routes.iter().any(|r| r.name == name)
            || self
                .models
                .iter()
                .any(|m| m.name == name || m.backend == name)
    }

    /// Whether `model` was found on a machine rather than written in the file.
    pub fn is_found(&self, model: ModelId) -> bool {
        model.0 >= self.file_models
    }

    /// Whether route `r` was found on the machines rather than written in the file.
    pub fn is_found_route(&self, r: RouteId) -> bool {
        r.0 >= self.file_routes
    }
}

/// Whether a machine's `name` may be served: not empty, at most [`MAX_NAME`] bytes, no
/// whitespace or control characters, no `@` (which names a target).
pub fn usable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '@')
}
