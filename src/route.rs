//! Routing (docs/api.md "Routing a request"): from what a request names and says to a route and its
//! chain. Pure.
//!
//! Keywords of every route are indexed once (`keywords.rs`), so a decision is one pass over
//! the prompt however many routes and keywords there are.

use crate::outcome::{Kind, ModelId, RouteId};
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

/// Why a request could not be routed: a name that does not exist, a name of another kind
/// than the endpoint's, or no name where the endpoint has no default route.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Unknown(#[from] UnknownName),
    #[error("{what} '{name}' is a {kind} {what}, but {path} needs a {needed} model; expected one of: {valid}")]
    WrongKind {
        what: &'static str,
        name: String,
        kind: Kind,
        needed: Kind,
        path: &'static str,
        valid: String,
    },
    #[error("{path} needs a model: no route serves {needed} models; expected one of: {valid}")]
    Required {
        needed: Kind,
        path: &'static str,
        valid: String,
    },
}

/// What a request asks of routing: the endpoint's kind and path, and what it names and says.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The kind of model the endpoint sends to.
    pub kind: Kind,
    /// The endpoint, as the client called it (for the error's words).
    pub path: &'static str,
    /// `x-labrouter-route`.
    pub header: Option<&'a str>,
    /// The body's `model`.
    pub model: Option<&'a str>,
    /// The last user message (chat kinds only).
    pub text: &'a str,
    pub has_image: bool,
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

    /// Decides where a chat request goes. `header` is `x-labrouter-route`; `model` the
    /// body's `model`; `text` the last user message; `has_image` whether it carries an
    /// image part.
    pub fn decide(
        &self,
        reg: &Registry,
        header: Option<&str>,
        model: Option<&str>,
        text: &str,
        has_image: bool,
    ) -> Result<Routed, RouteError> {
        let ask = Ask {
            kind: Kind::Chat,
            path: "/v1/chat/completions",
            header,
            model,
            text,
            has_image,
        };
        self.decide_for(reg, &ask)
    }

    /// Decides where a request to an endpoint of `ask.kind` goes: a route or model it names
    /// must serve that kind (`wrong_kind` otherwise); `auto` (or none) routes by keyword
    /// among the chat routes for chat, and takes the kind's default route for the others.
    pub fn decide_for(&self, reg: &Registry, ask: &Ask<'_>) -> Result<Routed, RouteError> {
        let routed = if let Some(h) = ask.header {
            match reg.routes.position(|r| r.name == h) {
                Some(r) => Routed {
                    choice: Choice::Route(r),
                    why: Why::Header,
                },
                None => {
                    return Err(RouteError::Unknown(UnknownName {
                        what: "route",
                        name: h.to_string(),
                        valid: names(reg.routes.iter().map(|r| r.name.as_str())),
                    }))
                }
            }
        } else {
            match ask.model {
                None | Some("auto") | Some("") if ask.kind == Kind::Chat => {
                    self.by_content(reg, ask.text, ask.has_image)
                }
                None | Some("auto") | Some("") => default_of(reg, ask)?,
                Some(name) => by_name(reg, name)?,
            }
        };
        served(reg, ask, routed)
    }

    /// Keyword routing among the chat routes: images first, then the most distinct
    /// keywords, ties to the earlier route.
    pub fn by_content(&self, reg: &Registry, text: &str, has_image: bool) -> Routed {
        if has_image {
            if let Some(r) = reg.routes.position(|r| r.images && r.kind == Kind::Chat) {
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
            if reg.routes[RouteId(run[0] as usize)].kind != Kind::Chat {
                continue;
            }
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

/// `auto` on an endpoint that is not chat: the default route of its kind.
fn default_of(reg: &Registry, ask: &Ask<'_>) -> Result<Routed, RouteError> {
    match reg.defaults.iter().find(|(k, _)| *k == ask.kind) {
        Some(&(_, r)) => Ok(Routed {
            choice: Choice::Route(r),
            why: Why::NoKeyword,
        }),
        None => Err(RouteError::Required {
            needed: ask.kind,
            path: ask.path,
            valid: serving(reg, ask.kind),
        }),
    }
}

/// The routing decision, if what it chose serves the endpoint's kind.
fn served(reg: &Registry, ask: &Ask<'_>, routed: Routed) -> Result<Routed, RouteError> {
    let (what, name, kind) = match routed.choice {
        Choice::Route(r) => ("route", &reg.routes[r].name, reg.routes[r].kind),
        Choice::Model(m) => ("model", &reg.models[m].name, reg.models[m].kind),
    };
    if kind.serves(ask.kind) {
        return Ok(routed);
    }
    Err(RouteError::WrongKind {
        what,
        name: name.clone(),
        kind,
        needed: ask.kind,
        path: ask.path,
        valid: serving(reg, ask.kind),
    })
}

/// The routes and models that serve endpoints of `kind`, for an error's words.
fn serving(reg: &Registry, kind: Kind) -> String {
    let routes = reg
        .routes
        .iter()
        .filter(|r| r.kind.serves(kind))
        .map(|r| r.name.as_str());
    let models = reg
        .models
        .iter()
        .filter(|m| m.kind.serves(kind))
        .map(|m| m.name.as_str());
    let all = names(routes.chain(models));
    if all.is_empty() {
        "(none in the registry)".into()
    } else {
        all
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
