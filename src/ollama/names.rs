//! Names as Ollama's clients write them: `coder` and `coder:latest` are one model. Both
//! sides of the front door read names so (`/api/*`, and `/v1/models/{id}`).

use crate::outcome::Kind;
use crate::registry::Registry;
use crate::route::{Ask, Matcher, RouteError, Routed};

/// A name as Ollama reads it: `coder` and `coder:latest` are one model.
pub fn untagged(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// Routes by the name as sent, else by it with `:latest` dropped or added; the error is
/// the one for the name as sent.
pub fn resolve(matcher: &Matcher, reg: &Registry, ask: Ask<'_>) -> Result<Routed, RouteError> {
    let decide = |m: Option<&str>| matcher.decide_for(reg, &Ask { model: m, ..ask });
    let first = decide(ask.model);
    let unknown = matches!(first, Err(RouteError::Unknown(_)));
    let Some(name) = ask.model.filter(|_| unknown) else {
        return first;
    };
    let other = match name.strip_suffix(":latest") {
        Some(bare) => bare.to_string(),
        None if !name.contains(':') => format!("{name}:latest"),
        None => return first,
    };
    decide(Some(&other)).or(first)
}

/// Finds what `name` names, whatever its kind: a model's card and its entry in the model
/// list are shown for a model of any kind. `path` is the endpoint, for the error's words;
/// the error is the one a chat request naming it would get.
pub fn resolve_any(
    matcher: &Matcher,
    reg: &Registry,
    path: &'static str,
    name: &str,
) -> Result<Routed, RouteError> {
    let ask = |kind| Ask {
        kind,
        path,
        header: None,
        model: Some(name),
        text: "",
        has_image: false,
    };
    let found = Kind::ALL
        .iter()
        .find_map(|&k| resolve(matcher, reg, ask(k)).ok());
    match found {
        Some(routed) => Ok(routed),
        None => resolve(matcher, reg, ask(Kind::Chat)),
    }
}
