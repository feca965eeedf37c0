//! Text from outside (admin `by`/`why`, reasons, header values) on its way to logs, the
//! ledger, Telegram or an error message: at most [`MAX_CHARS`] characters, and control
//! characters escaped so no one can forge a log line (README "Safety").

/// The most characters of outside text any one field keeps.
pub const MAX_CHARS: usize = 200;

/// `s` with control characters escaped (`\n`, `\u{1b}`), cut to [`MAX_CHARS`] characters
/// (with `…` when cut).
pub fn bounded(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_CHARS * 2));
    for (kept, c) in s.chars().enumerate() {
        if kept == MAX_CHARS {
            out.push('…');
            return out;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Rows as left-aligned columns two spaces apart, each line without trailing spaces (the
/// CLI's tables).
pub fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_length_is_bounded() {
        assert_eq!(bounded("ok"), "ok");
        assert_eq!(bounded("a\nb"), "a\\nb");
        assert_eq!(bounded("\u{1b}[31m"), "\\u{1b}[31m");
        let long = "x".repeat(5000);
        let b = bounded(&long);
        assert_eq!(b.chars().count(), MAX_CHARS + 1);
        assert!(b.ends_with('…'));
    }
}
