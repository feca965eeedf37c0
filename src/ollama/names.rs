//! Names as Ollama's clients write them: `coder` and `coder:latest` are one model. Both
//! sides of the front door read names so (`/api/*`, and `/v1/models/{id}`).

use crate::registry::Registry;
use crate::route::{Matcher, Routed, UnknownName};

/// A name as Ollama reads it: `coder` and `coder:latest` are one model.
pub fn untagged(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// Routes by the name as sent, else by it with `:latest` dropped or added; the error is
/// the one for the name as sent.
pub fn resolve(
    matcher: &Matcher,
    reg: &Registry,
    route: Option<&str>,
    model: Option<&str>,
    text: &str,
    has_image: bool,
) -> Result<Routed, UnknownName> {
    let decide = |m: Option<&str>| matcher.decide(reg, route, m, text, has_image);
    let first = decide(model);
    let Some(name) = model.filter(|_| first.is_err()) else {
        return first;
    };
    let other = match name.strip_suffix(":latest") {
        Some(bare) => bare.to_string(),
        None if !name.contains(':') => format!("{name}:latest"),
        None => return first,
    };
    decide(Some(&other)).or(first)
}
