//! The unit strings of registry.yaml: durations (`250ms`, `5s`, `1m30s`, `7d`) and sizes
//! (`16MiB`).
//!
//! Every duration that enters from outside (registry.yaml, headers, query strings) passes
//! through [`parse_duration`], which bounds it, so no later `Instant + Duration` overflows.

use std::time::Duration;

/// The longest duration any text may name: ten years.
pub const DURATION_MAX: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Parses `250ms`, `5s`, `1m`, `1h`, `1d`, or a sum of them such as `1m30s`, up to
/// [`DURATION_MAX`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_duration_max(s, DURATION_MAX)
}

/// [`parse_duration`] with a tighter bound; the error names it.
pub fn parse_duration_max(s: &str, max: Duration) -> Result<Duration, String> {
    let d = parse_unbounded(s)?;
    if d > max {
        return Err(at_most(s, max));
    }
    Ok(d)
}

fn at_most(s: &str, max: Duration) -> String {
    format!(
        "expected a duration of at most {}, got '{}'",
        crate::outcome::words(max),
        s.trim()
    )
}

fn parse_unbounded(s: &str) -> Result<Duration, String> {
    let expected = || format!("expected a duration like 250ms, 5s, 1m or 1m30s, got '{s}'");
    let too_long = || at_most(s, DURATION_MAX);
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(expected());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(expected());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| too_long())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => return Err(expected()),
        };
        total = total.checked_add(part).ok_or_else(too_long)?;
        if total > DURATION_MAX {
            return Err(too_long());
        }
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Parses `512`, `64KiB`, `16MiB`, `1GiB` (also `KB`, `MB`, `GB` as powers of ten).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let expected = || format!("expected a size like 16MiB, 512KiB or 1048576, got '{s}'");
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(expected());
    }
    let n: usize = t[..digits].parse().map_err(|_| expected())?;
    let mult: usize = match t[digits..].trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(expected()),
    };
    n.checked_mul(mult).ok_or_else(expected)
}
