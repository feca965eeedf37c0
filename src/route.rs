//! Routing (SPEC §2): from what a request names and says to a route and its chain. Pure.
//!
//! Keywords of every route are indexed once (`keywords.rs`), so a decision is one pass over
//! the prompt however many routes and keywords there are.

use crate::outcome::{ModelId, RouteId};
use crate::registry::Registry;

mod bytes;
mod keywords;
mod unicode;

use keywords::Keywords;

#[cfg(test)]
mod tests;

/// Where a request goes: a route's chain, or one logical model alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Route(RouteId),
    Model(ModelId),
}

/// Why that choice was made, for `labrouter route` and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    Header,
    RouteName,
    ModelName,
    BackendName,
    Image,
    Keywords(Vec<String>),
    NoKeyword,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    pub choice: Choice,
    pub why: Why,
}

impl Routed {
    /// The label responses carry in `x-labrouter-route`.
    pub fn label<'r>(&self, reg: &'r Registry) -> &'r str {
        match self.choice {
            Choice::Route(r) => &reg.routes[r].name,
            Choice::Model(m) => &reg.models[m].name,
        }
    }

    /// The chain of logical models to try, in order.
    pub fn chain<'r>(&self, reg: &'r Registry) -> &'r [ModelId] {
        match self.choice {
            Choice::Route(r) => &reg.routes[r].chain,
            Choice::Model(m) => std::slice::from_ref(&reg.model_ids[m]),
        }
    }

    pub fn why_words(&self) -> String {
        match &self.why {
            Why::Header => "forced by the x-labrouter-route header".into(),
            Why::RouteName => "the request's model names this route".into(),
            Why::ModelName => "the request's model names this logical model".into(),
            Why::BackendName => "the request's model is this logical model's backend name".into(),
            Why::Image => "the request carries an image part".into(),
            Why::Keywords(k) => format!("keywords matched: {}", k.join(", ")),
            Why::NoKeyword => "no keyword matched: default route".into(),
        }
    }
}

/// The request named something that is neither `auto`, a route nor a model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} '{name}' does not exist; expected one of: {valid}")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
    pub valid: String,
}

/// The compiled keyword matcher of one registry.
#[derive(Clone, Debug)]
pub struct Matcher {
    keywords: Keywords,
    /// pattern id -> the routes that list that keyword.
    owners: Vec<Vec<u32>>,
    /// route -> the ids of its keywords, ascending.
    owned: Vec<Vec<u32>>,
    patterns: Vec<String>,
}

impl Matcher {
    pub fn new(reg: &Registry) -> Matcher {
        let mut patterns: Vec<String> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        let mut owned: Vec<Vec<u32>> = Vec::with_capacity(reg.routes.len());
        let mut ids: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for (ri, route) in reg.routes.iter().enumerate() {
            let mut mine = Vec::with_capacity(route.keywords.len());
            for kw in &route.keywords {
                let pid = *ids.entry(kw.as_str()).or_insert_with(|| {
                    patterns.push(kw.clone());
                    owners.push(Vec::new());
                    patterns.len() as u32 - 1
                });
                owners[pid as usize].push(ri as u32);
                mine.push(pid);
            }
            mine.sort_unstable();
            owned.push(mine);
        }
        Matcher {
            keywords: Keywords::new(&patterns),
            owners,
            owned,
            patterns,
        }
    }

    /// Decides where a request goes. `header` is `x-labrouter-route`; `model` the body's
    /// `model`; `text` the last user message; `has_image` whether it carries an image part.
    pub fn decide(
        &self,
        reg: &Registry,
        header: Option<&str>,
        model: Option<&str>,
        text: &str,
        has_image: bool,
    ) -> Result<Routed, UnknownName> {
        if let Some(h) = header {
            return match reg.routes.position(|r| r.name == h) {
                Some(r) => Ok(Routed {
                    choice: Choice::Route(r),
                    why: Why::Header,
                }),
                None => Err(UnknownName {
                    what: "route",
                    name: h.to_string(),
                    valid: names(reg.routes.iter().map(|r| r.name.as_str())),
                }),
            };
        }
        match model {
            None | Some("auto") | Some("") => Ok(self.by_content(reg, text, has_image)),
            Some(name) => by_name(reg, name),
        }
    }

    /// Keyword routing: images first, then the most distinct keywords, ties to the earlier route.
    pub fn by_content(&self, reg: &Registry, text: &str, has_image: bool) -> Routed {
        if has_image {
            if let Some(r) = reg.routes.position(|r| r.images) {
                return Routed {
                    choice: Choice::Route(r),
                    why: Why::Image,
                };
            }
        }
        let hits = self.keywords.hits(text);
        // Each hit keyword counts once for every route that lists it: the routes of all hits,
        // sorted, come in runs, one per route scored, its length the score. The first longest
        // run is the earliest route with the most distinct keywords.
        let mut routes: Vec<u32> = Vec::with_capacity(hits.found.len());
        for &pid in &hits.found {
            routes.extend_from_slice(&self.owners[pid as usize]);
        }
        routes.sort_unstable();
        let (mut best, mut top) = (0, 0);
        for run in routes.chunk_by(|a, b| a == b) {
            if run.len() > top {
                (best, top) = (run[0] as usize, run.len());
            }
        }
        if top == 0 {
            return Routed {
                choice: Choice::Route(reg.default_route),
                why: Why::NoKeyword,
            };
        }
        let matched = self.owned[best]
            .iter()
            .filter(|&&pid| hits.contains(pid))
            .map(|&pid| self.patterns[pid as usize].clone())
            .collect();
        Routed {
            choice: Choice::Route(RouteId(best)),
            why: Why::Keywords(matched),
        }
    }
}

fn by_name(reg: &Registry, name: &str) -> Result<Routed, UnknownName> {
    if let Some(r) = reg.routes.position(|r| r.name == name) {
        return Ok(Routed {
            choice: Choice::Route(r),
            why: Why::RouteName,
        });
    }
    if let Some(m) = reg.models.position(|m| m.name == name) {
        return Ok(Routed {
            choice: Choice::Model(m),
            why: Why::ModelName,
        });
    }
    let mut backends = reg.models.enumerate().filter(|(_, m)| m.backend == name);
    if let (Some((m, _)), None) = (backends.next(), backends.next()) {
        return Ok(Routed {
            choice: Choice::Model(m),
            why: Why::BackendName,
        });
    }
    let valid = std::iter::once("auto")
        .chain(reg.routes.iter().map(|r| r.name.as_str()))
        .chain(reg.models.iter().map(|m| m.name.as_str()));
    Err(UnknownName {
        what: "model",
        name: name.to_string(),
        valid: names(valid),
    })
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}
