//! serde-saphyr's errors reworded for someone editing registry.yaml: our own
//! `file:line:column` prefix, the message's first line, and the key a wrong type was
//! written for.

use serde_saphyr::Location;

use super::RegistryError;

/// A YAML or type error from serde-saphyr, as [`RegistryError::Invalid`].
pub(super) fn reworded(e: &serde_saphyr::Error, text: &str, file: &str) -> RegistryError {
    let at = e.location().map(place).unwrap_or_default();
    let mut message = first_line(&e.to_string());
    // A wrong type names no field: take the key written on that line.
    if let Some(key) = e.location().and_then(|loc| key_at(text, loc)) {
        if !message.contains(&key) {
            message = format!("{key}: {message}");
        }
    }
    RegistryError::Invalid {
        file: file.to_string(),
        at,
        message,
    }
}

/// `:line:column`, or empty when the place is unknown.
pub(super) fn place(loc: Location) -> String {
    if loc.line() == 0 {
        String::new()
    } else {
        format!(":{}:{}", loc.line(), loc.column())
    }
}

/// serde-saphyr's message may carry a source snippet after its first line; we print our
/// own `file:line:column` prefix instead.
fn first_line(msg: &str) -> String {
    let line = msg.lines().next().unwrap_or(msg).trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    // "line 2 column 3: unknown field ..." -> "unknown field ..."
    let message = match line
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
    {
        Some((_, message)) => message,
        None => line,
    };
    // Say it in the words of someone editing registry.yaml, not of the YAML library.
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(", set ").next().unwrap_or(rest);
        return format!("duplicate key '{key}'; expected each name once");
    }
    if let Some(ty) = message.strip_prefix("invalid ") {
        if ty.starts_with('u') || ty.starts_with('i') {
            return format!("invalid value; expected a whole number ({ty})");
        }
        if ty.starts_with('f') {
            return format!("invalid value; expected a number ({ty})");
        }
    }
    message.to_string()
}

/// The mapping key written on the error's line, left of the error's column (`key: value`).
fn key_at(text: &str, loc: Location) -> Option<String> {
    let line = text
        .lines()
        .nth(usize::try_from(loc.line()).ok()?.checked_sub(1)?)?;
    let upto: String = line
        .chars()
        .take(usize::try_from(loc.column()).ok()?.saturating_sub(1))
        .collect();
    let before_colon = upto.rsplit_once(':')?.0;
    let key = before_colon
        .rsplit(['{', ',', '-'])
        .next()?
        .trim()
        .trim_matches('"');
    (!key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.".contains(c)))
    .then(|| key.to_string())
}
