//! Message text: HTML escaping for Telegram's HTML parse mode, splitting under the
//! 4,096-character limit, the plain-text view the CLI prints, and durations in words.
//!
//! Every message is sent with `parse_mode = HTML`. Only `<b>` is used; everything that
//! comes from the registry or the ledger (machine names, reasons) goes through [`escape`],
//! so a machine called `gpu<1>&co` cannot break the markup or inject a link.

/// Telegram's limit is 4,096 characters of text after entity parsing; the HTML source is
/// never shorter than what it renders to, so counting source characters with a margin is
/// safe.
pub const LIMIT: usize = 4000;

/// Longest name or reason shown, in characters: one line must always fit a message.
pub const MAX_FIELD: usize = 300;

/// Escapes `<`, `>` and `&` (all that Telegram's HTML mode needs outside attributes), and
/// shortens very long fields so no single line can exceed a message.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        if i == MAX_FIELD {
            out.push('…');
            break;
        }
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `<b>escaped</b>`.
pub fn bold(s: &str) -> String {
    format!("<b>{}</b>", escape(s))
}

/// What a person sees in Telegram: the markup removed, the entities decoded.
pub fn plain(html: &str) -> String {
    html.replace("<b>", "")
        .replace("</b>", "")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Packs paragraphs (each one or more whole lines, markup balanced per line) into messages
/// of at most `limit` characters. Paragraphs stay whole when they fit; a paragraph too long
/// for one message is cut between lines, never inside a line (so never inside a tag).
pub fn split(paragraphs: &[String], limit: usize) -> Vec<String> {
    let mut messages = Vec::new();
    let mut current = String::new();
    let len = |s: &str| s.chars().count();
    let mut push = |current: &mut String, piece: &str, sep: &str| {
        if !current.is_empty() && len(current) + len(sep) + len(piece) > limit {
            messages.push(std::mem::take(current));
        }
        if !current.is_empty() {
            current.push_str(sep);
        }
        current.push_str(piece);
    };
    for p in paragraphs {
        if len(p) <= limit {
            push(&mut current, p, "\n\n");
            continue;
        }
        for (i, line) in p.lines().enumerate() {
            // A line never exceeds the limit: fields are capped by `escape`.
            let line: String = line.chars().take(limit).collect();
            push(&mut current, &line, if i == 0 { "\n\n" } else { "\n" });
        }
    }
    if !current.is_empty() {
        messages.push(current);
    }
    messages
}

/// Bytes as GiB with one decimal.
pub fn gib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_plain_are_inverse_for_names() {
        let name = "gpu<1>&co";
        assert_eq!(escape(name), "gpu&lt;1&gt;&amp;co");
        assert_eq!(plain(&bold(name)), name);
    }

    #[test]
    fn split_keeps_lines_whole_and_under_the_limit() {
        let paras: Vec<String> = (0..50)
            .map(|i| format!("<b>m{i}</b>\nline one\nline two"))
            .collect();
        let msgs = split(&paras, 100);
        assert!(msgs.len() > 1);
        for m in &msgs {
            assert!(m.chars().count() <= 100, "{m}");
            assert_eq!(m.matches("<b>").count(), m.matches("</b>").count());
        }
        let long = vec![(0..40)
            .map(|i| format!("row {i}"))
            .collect::<Vec<_>>()
            .join("\n")];
        for m in split(&long, 50) {
            assert!(m.chars().count() <= 50);
        }
    }
}
