//! Durations as people say them. [`words`] is exact, for a timeout or a cooldown
//! (`250ms`, `1.5s`, `1m30s`); [`rounded`] keeps the two largest units, for how long an
//! outage lasted (`3h 5m`, `2d 4h`).

use std::time::Duration;

/// Days, hours, minutes, seconds of a whole number of seconds.
fn units(s: u64) -> [(u64, &'static str); 4] {
    [
        (s / 86_400, "d"),
        ((s % 86_400) / 3600, "h"),
        ((s % 3600) / 60, "m"),
        (s % 60, "s"),
    ]
}

/// Exact: `250ms`, `1.5s`, `5s`, `1m30s`, `15m`, `2h`, `3d`.
pub fn words(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if !ms.is_multiple_of(1000) {
        return format!("{:.1}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    if s >= 86_400 && s.is_multiple_of(86_400) {
        return format!("{}d", s / 86_400);
    }
    // Days only as a whole number of them; otherwise hours carry on past 24.
    let [_, _, m, sec] = units(s);
    let h = s / 3600;
    let parts = [(h, "h"), (m.0, "m"), (sec.0, "s")];
    join(&parts, "", usize::MAX)
}

/// Rounded to the two largest units, spaced: `45s`, `12m`, `3h 5m`, `2d 4h`.
pub fn rounded(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        return format!("{s}s");
    }
    // Seconds only below a minute.
    let [days, hours, mins, _] = units(s);
    join(&[days, hours, mins], " ", 2)
}

/// The nonzero parts from the largest, at most `keep` of them counting from the first
/// nonzero one (a zero between two kept parts ends the list: `2d 4h`, `1h`, not `1h 0m`).
fn join(parts: &[(u64, &str)], sep: &str, keep: usize) -> String {
    let start = parts
        .iter()
        .position(|p| p.0 > 0)
        .unwrap_or(parts.len() - 1);
    let shown: Vec<String> = parts[start..]
        .iter()
        .take(keep)
        .filter(|p| p.0 > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if shown.is_empty() {
        return format!("0{}", parts[parts.len() - 1].1);
    }
    shown.join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_words() {
        let s = Duration::from_secs;
        assert_eq!(words(Duration::from_millis(250)), "250ms");
        assert_eq!(words(Duration::from_millis(1500)), "1.5s");
        assert_eq!(words(s(5)), "5s");
        assert_eq!(words(s(90)), "1m30s");
        assert_eq!(words(s(900)), "15m");
        assert_eq!(words(s(7200)), "2h");
        assert_eq!(words(s(3 * 86_400)), "3d");
        assert_eq!(words(s(3600 + 60)), "1h1m");
        assert_eq!(words(s(3600 + 1)), "1h1s");
        assert_eq!(words(s(3600 + 61)), "1h1m1s");
        assert_eq!(words(s(25 * 3600)), "25h");
    }

    #[test]
    fn rounded_words() {
        let s = Duration::from_secs;
        assert_eq!(rounded(s(0)), "0s");
        assert_eq!(rounded(s(45)), "45s");
        assert_eq!(rounded(s(12 * 60 + 5)), "12m");
        assert_eq!(rounded(s(3 * 3600 + 300)), "3h 5m");
        assert_eq!(rounded(s(3 * 3600)), "3h");
        assert_eq!(rounded(s(2 * 86_400 + 4 * 3600)), "2d 4h");
        assert_eq!(rounded(s(2 * 86_400 + 4 * 60)), "2d");
        assert_eq!(rounded(s(86_400 + 30)), "1d");
    }
}
