//! `routes:`: names, keywords and fallback chains, and which route is the default.

use serde_saphyr::{Location, Spanned};

use super::invalid::{err, Invalid};
use super::raw::{RawLink, RawRoute, RawTierItem};
use super::{Model, Route};
use crate::outcome::{Kind, ModelId};

/// Each kind's default route, by index.
type Defaults = Vec<(Kind, usize)>;

/// The routes, and each kind's default route (the one of that kind marked `default`,
/// else the first of that kind).
pub(super) fn validate_routes(
    raw: &Spanned<Vec<RawRoute>>,
    models: &[Model],
) -> Result<(Vec<Route>, Defaults), Invalid> {
    if raw.value.is_empty() {
        return err(raw.referenced, "routes: expected at least one route");
    }
    let mut routes: Vec<Route> = Vec::with_capacity(raw.value.len());
    let mut marked: Vec<(Kind, usize)> = Vec::new();
    for r in &raw.value {
        let name = &r.name.value;
        check_name(r, &routes, models)?;
        let Chain { chain, tiers, kind } = chain(r, models)?;
        let keywords = keywords(r)?;
        if let Some(d) = r.default.as_ref().filter(|d| d.value) {
            if let Some(&(_, first)) = marked.iter().find(|(k, _)| *k == kind) {
                return err(
                    d.referenced,
                    format!(
                        "route '{name}': a second default {kind} route (the first is '{}'); expected one per kind",
                        routes[first].name
                    ),
                );
            }
            marked.push((kind, routes.len()));
        }
        routes.push(Route {
            name: name.clone(),
            keywords,
            images: r.images,
            chain,
            tiers,
            kind,
        });
    }
    let defaults = Kind::ALL
        .into_iter()
        .filter_map(|kind| {
            let chosen = marked.iter().find(|(k, _)| *k == kind).map(|&(_, i)| i);
            chosen
                .or_else(|| routes.iter().position(|r| r.kind == kind))
                .map(|i| (kind, i))
        })
        .collect();
    Ok((routes, defaults))
}

/// A route's name: not empty, not `auto` (which asks for keyword routing), and not
/// another route's or a model's, so `model: NAME` means one thing.
fn check_name(r: &RawRoute, routes: &[Route], models: &[Model]) -> Result<(), Invalid> {
    let name = &r.name.value;
    if name.is_empty() || name == "auto" {
        return err(
            r.name.referenced,
            format!("route name '{name}' is reserved or empty; expected another name"),
        );
    }
    if routes.iter().any(|x| &x.name == name) {
        return err(
            r.name.referenced,
            format!("duplicate route name '{name}'; expected each route name once"),
        );
    }
    if models.iter().any(|m| &m.name == name) {
        return err(
            r.name.referenced,
            format!("route name '{name}' is also a model name; expected distinct names"),
        );
    }
    Ok(())
}

/// A route's fallback chain: at least one model, each one of `models:` and named once, all
/// of one kind (a model without `kind` is a chat model), a list inside it a tier of at least
/// one model; the flat chain, its tiers of two or more and that kind.
fn chain(r: &RawRoute, models: &[Model]) -> Result<Chain, Invalid> {
    let name = &r.name.value;
    let chain_raw = match &r.chain {
        Some(c) if !c.value.is_empty() => c,
        Some(c) => {
            return err(
                c.referenced,
                format!("route '{name}': expected a chain of at least one model"),
            )
        }
        None => {
            return err(
                r.name.referenced,
                format!("route '{name}': missing chain (expected a list of models)"),
            )
        }
    };
    let mut out = Chain {
        chain: Vec::with_capacity(chain_raw.value.len()),
        tiers: Vec::new(),
        kind: Kind::Chat,
    };
    for link in &chain_raw.value {
        match &link.value {
            RawLink::One(model) => out.push(name, model, link.referenced, models)?,
            RawLink::Tier(items) if items.is_empty() => {
                return err(
                    link.referenced,
                    format!("route '{name}': an empty tier; expected a list of at least one model"),
                )
            }
            RawLink::Tier(items) => {
                let start = out.chain.len();
                for item in items {
                    let RawTierItem::One(model) = &item.value else {
                        return err(
                            item.referenced,
                            format!("route '{name}': a tier inside a tier; expected model names in a tier"),
                        );
                    };
                    out.push(name, model, item.referenced, models)?;
                }
                if items.len() > 1 {
                    out.tiers.push(out.chain[start..].to_vec());
                }
            }
        }
    }
    Ok(out)
}

/// A chain being validated.
struct Chain {
    chain: Vec<ModelId>,
    tiers: Vec<Vec<ModelId>>,
    kind: Kind,
}

impl Chain {
    /// Adds `model` (written at `at`): known, not yet in the chain, of the chain's kind.
    fn push(
        &mut self,
        route: &str,
        model: &str,
        at: Location,
        models: &[Model],
    ) -> Result<(), Invalid> {
        let Some(i) = models.iter().position(|m| m.name == model) else {
            let known: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
            return err(
                at,
                format!(
                    "route '{route}': unknown model '{}' in chain; expected one of: {}",
                    crate::text::bounded(model),
                    known.join(", ")
                ),
            );
        };
        if self.chain.contains(&ModelId(i)) {
            return err(
                at,
                format!("route '{route}': model '{model}' is named twice in its chain; expected each model once"),
            );
        }
        let (first, this) = (self.chain.first().map(|&m| &models[m.0]), &models[i]);
        if let Some(first) = first.filter(|f| f.kind != this.kind) {
            return err(
                at,
                format!(
                    "route '{route}': model '{}' is a {} model but '{}' before it is {}; expected a chain of one kind (a model without kind is chat)",
                    this.name, this.kind, first.name, first.kind
                ),
            );
        }
        self.kind = this.kind;
        self.chain.push(ModelId(i));
        Ok(())
    }
}

/// A route's keywords, trimmed and lower-cased (the matcher compares them so), each once.
fn keywords(r: &RawRoute) -> Result<Vec<String>, Invalid> {
    let mut keywords: Vec<String> = Vec::with_capacity(r.keywords.len());
    for k in &r.keywords {
        let k_norm = k.value.trim().to_lowercase();
        if k_norm.is_empty() {
            return err(
                k.referenced,
                format!("route '{}': expected a non-empty keyword", r.name.value),
            );
        }
        if !keywords.contains(&k_norm) {
            keywords.push(k_norm);
        }
    }
    Ok(keywords)
}
