//! `models:`: each logical model, the machine it runs on and the name that machine knows it by.

use indexmap::IndexMap;
use serde_saphyr::Spanned;

use super::invalid::{err, Invalid};
use super::raw::RawModel;
use super::{Machine, Model};
use crate::outcome::{Kind, MachineId};

pub(super) fn validate_models(
    raw: &Spanned<IndexMap<String, RawModel>>,
    machines: &[Machine],
) -> Result<Vec<Model>, Invalid> {
    if raw.value.is_empty() {
        return err(raw.referenced, "models: expected at least one model");
    }
    let mut models = Vec::with_capacity(raw.value.len());
    for (name, m) in &raw.value {
        let Some(machine) = machines.iter().position(|x| x.name == m.machine.value) else {
            let known: Vec<&str> = machines.iter().map(|x| x.name.as_str()).collect();
            return err(
                m.machine.referenced,
                format!(
                    "model '{name}': unknown machine '{}'; expected one of: {}",
                    m.machine.value,
                    known.join(", ")
                ),
            );
        };
        if m.name.trim().is_empty() {
            return err(
                m.machine.referenced,
                format!("model '{name}': expected a backend name"),
            );
        }
        let kind = match &m.kind {
            None => Kind::Chat,
            Some(k) => Kind::parse(k.value.trim()).ok_or_else(|| {
                let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                (
                    k.referenced,
                    format!(
                        "model '{name}': kind '{}' is unknown; expected one of: {}",
                        k.value,
                        kinds.join(", ")
                    ),
                )
            })?,
        };
        models.push(Model {
            name: name.clone(),
            machine: MachineId(machine),
            backend: m.name.clone(),
            kind,
        });
    }
    Ok(models)
}
