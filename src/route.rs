//! Routing (SPEC §2): from what a request names and says to a route and its chain. Pure.
//!
//! Keywords of every route are compiled once into one Aho-Corasick automaton, so a decision
//! is one pass over the prompt however many routes and keywords there are.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// Up to this many distinct keywords, compile a DFA (see [`Matcher::new`]).
const DFA_LIMIT: usize = 10_000;

use crate::outcome::{ModelId, RouteId};
use crate::registry::Registry;

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
    automaton: Option<AhoCorasick>,
    /// pattern id -> the routes that list that keyword.
    owners: Vec<Vec<u32>>,
    patterns: Vec<String>,
    /// Some keyword is not ASCII: lower-case the text first (ASCII case folding is built in).
    fold_unicode: bool,
}

impl Matcher {
    pub fn new(reg: &Registry) -> Matcher {
        let mut patterns: Vec<String> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        for (ri, route) in reg.routes.iter().enumerate() {
            for kw in &route.keywords {
                let pid = match patterns.iter().position(|p| p == kw) {
                    Some(p) => p,
                    None => {
                        patterns.push(kw.clone());
                        owners.push(Vec::new());
                        patterns.len() - 1
                    }
                };
                owners[pid].push(ri as u32);
            }
        }
        let fold_unicode = patterns.iter().any(|p| !p.is_ascii());
        let automaton = if patterns.is_empty() {
            None
        } else {
            // A DFA is the fastest search (one table lookup per byte): a 10 KB prompt over
            // 5,000 keywords takes ~40 µs instead of ~70 µs, for a few MB and a slower build.
            // Past DFA_LIMIT keywords the library picks its own (smaller) automaton.
            let build = |kind| {
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .kind(kind)
                    .build(&patterns)
            };
            let dfa = (patterns.len() <= DFA_LIMIT)
                .then(|| build(Some(AhoCorasickKind::DFA)).ok())
                .flatten();
            match dfa {
                Some(ac) => Some(ac),
                None => build(None)
                    .map_err(|e| tracing::error!(error = %e, "keyword automaton failed to build: keyword routing is off"))
                    .ok(),
            }
        };
        Matcher {
            automaton,
            owners,
            patterns,
            fold_unicode,
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
        let hits = self.hits(text);
        if hits.is_empty() {
            return Routed {
                choice: Choice::Route(reg.default_route),
                why: Why::NoKeyword,
            };
        }
        let mut scores = vec![0u32; reg.routes.len()];
        for &pid in &hits {
            for &r in &self.owners[pid] {
                scores[r as usize] += 1;
            }
        }
        // max_by_key keeps the last maximum; iterate in reverse so ties go to the earlier route.
        let best = (0..scores.len())
            .rev()
            .max_by_key(|&r| scores[r])
            .map_or(reg.default_route, RouteId);
        let matched = hits
            .iter()
            .filter(|&&pid| self.owners[pid].contains(&(best.0 as u32)))
            .map(|&pid| self.patterns[pid].clone())
            .collect();
        Routed {
            choice: Choice::Route(best),
            why: Why::Keywords(matched),
        }
    }

    /// Distinct keyword (pattern) ids found in `text` as whole words, sorted.
    fn hits(&self, text: &str) -> Vec<usize> {
        let Some(ac) = &self.automaton else {
            return Vec::new();
        };
        let folded;
        let text = if self.fold_unicode {
            folded = text.to_lowercase();
            folded.as_str()
        } else {
            text
        };
        let mut hits: Vec<usize> = Vec::new();
        for m in ac.find_overlapping_iter(text) {
            if is_word_edge(text, m.start(), m.end()) {
                hits.push(m.pattern().as_usize());
            }
        }
        hits.sort_unstable();
        hits.dedup();
        hits
    }
}

/// A match is a whole word when no letter, digit or `_` touches either end.
fn is_word_edge(text: &str, start: usize, end: usize) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(word) && !after.is_some_and(word)
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
