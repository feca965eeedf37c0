//! registry.yaml edited as text, so every byte already there stays as it was (comments,
//! order, blank lines, flow or block style): where a top-level block section (`machines:`,
//! `models:`) ends and how its entries are written ([`section`]), entries written the same
//! way ([`Section::entry`]), and the new text with them inserted ([`insert`]). Pure.

#[cfg(test)]
mod tests;

/// A top-level block section of the file, as written.
#[derive(Debug, PartialEq)]
pub struct Section {
    /// Byte offset where an entry appended to the section goes: just after its last
    /// indented line (an entry or a comment), before any blank lines, comments at column 0
    /// or the next top-level key.
    pub insert_at: usize,
    /// The section's last line has no line ending (it ends the file).
    pub needs_newline: bool,
    /// Spaces before each entry's key.
    pub indent: usize,
    /// Spaces before a block entry's fields.
    pub field_indent: usize,
    /// Its entries are one line each (`name: { key: value, ... }`).
    pub flow: bool,
    /// The file's line ending (`\r\n` when the section's key line has one).
    pub eol: &'static str,
}

/// One line of `text`: where it starts, its text without the line ending, and whether it
/// had one.
struct Line<'a> {
    start: usize,
    end: usize,
    body: &'a str,
    ended: bool,
}

fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    let mut start = 0;
    text.split_inclusive('\n').map(move |raw| {
        let line = Line {
            start,
            end: start + raw.len(),
            body: raw.trim_end_matches('\n').trim_end_matches('\r'),
            ended: raw.ends_with('\n'),
        };
        start += raw.len();
        line
    })
}

/// The spaces a line starts with.
fn indent_of(body: &str) -> usize {
    body.len() - body.trim_start_matches(' ').len()
}

/// Whether `body` is the top-level key line `key:`; the text after the colon when it is.
fn key_rest<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let rest = body.strip_prefix(key)?.strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
}

/// The block section `key:` of `text`, or why entries cannot be appended to it.
pub fn section(text: &str, key: &str) -> Result<Section, String> {
    let mut all = lines(text).enumerate();
    let (key_no, key_line, rest) = all
        .by_ref()
        .find_map(|(i, l)| key_rest(l.body, key).map(|rest| (i + 1, l, rest)))
        .ok_or_else(|| format!("no top-level `{key}:` line; add the machine by hand"))?;
    let value = rest.trim();
    if !value.is_empty() && !value.starts_with('#') {
        return Err(one_line(key_no, key, value));
    }
    let mut found: Option<Section> = None;
    for (i, l) in all {
        let trimmed = l.body.trim_start();
        if trimmed.is_empty() || l.body.starts_with('#') {
            continue;
        }
        if !l.body.starts_with([' ', '\t']) {
            break;
        }
        let s = found.get_or_insert_with(|| Section {
            insert_at: l.end,
            needs_newline: false,
            indent: usize::MAX,
            field_indent: 0,
            flow: false,
            eol: if key_line.body.len() + 2 == key_line.end - key_line.start {
                "\r\n"
            } else {
                "\n"
            },
        });
        s.insert_at = l.end;
        s.needs_newline = !l.ended;
        if trimmed.starts_with('#') {
            continue;
        }
        if s.indent == usize::MAX {
            if trimmed.starts_with(['{', '[', '-']) {
                return Err(one_line(i + 1, key, trimmed));
            }
            s.indent = indent_of(l.body);
            s.flow = entry_value(trimmed).starts_with('{');
        } else if s.field_indent == 0 && indent_of(l.body) > s.indent {
            s.field_indent = indent_of(l.body);
        }
    }
    let mut s = found.filter(|s| s.indent != usize::MAX).ok_or_else(|| {
        format!("line {key_no}: `{key}:` has no entries to append to; add the machine by hand")
    })?;
    if s.field_indent == 0 {
        s.field_indent = s.indent + s.indent.max(2);
    }
    Ok(s)
}

/// The refusal for a section written as one flow value (`machines: {a: ..., b: ...}`).
fn one_line(line_no: usize, key: &str, value: &str) -> String {
    let shown: String = crate::text::bounded(value).chars().take(40).collect();
    format!(
        "line {line_no}: `{key}:` is written in flow style ({shown}…); machine add appends only to a block section (one entry per line under `{key}:`): rewrite it so, or add the machine by hand"
    )
}

/// What follows an entry line's key and its colon (`{ url: ... }` of `gpu: { url: ... }`).
fn entry_value(entry: &str) -> &str {
    let after_key = match entry.chars().next() {
        Some(q @ ('"' | '\'')) => entry[1..].find(q).map_or(entry, |end| &entry[end + 2..]),
        _ => entry,
    };
    let colon = after_key
        .char_indices()
        .find(|&(i, c)| c == ':' && after_key[i + 1..].chars().next().is_none_or(|n| n == ' '));
    colon.map_or("", |(i, _)| after_key[i + 1..].trim_start())
}

impl Section {
    /// One entry `name` with `fields` (key, YAML value), written as the section's entries
    /// are: one line in flow style, else a block with a line per field.
    pub fn entry(&self, name: &str, fields: &[(&str, String)]) -> String {
        let pad = " ".repeat(self.indent);
        if self.flow {
            let inner: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            return format!("{pad}{name}: {{ {} }}{}", inner.join(", "), self.eol);
        }
        let field_pad = " ".repeat(self.field_indent);
        let mut out = format!("{pad}{name}:{}", self.eol);
        for (k, v) in fields {
            out.push_str(&format!("{field_pad}{k}: {v}{}", self.eol));
        }
        out
    }

    /// `entries` as they are inserted at [`Section::insert_at`] (a line ending first when
    /// the section's last line had none).
    pub fn addition(&self, entries: &[String]) -> (usize, String) {
        let lead = if self.needs_newline { self.eol } else { "" };
        (self.insert_at, format!("{lead}{}", entries.concat()))
    }
}

/// `text` with each `(offset, addition)` inserted at its offset of the original text.
pub fn insert(text: &str, additions: &[(usize, String)]) -> String {
    let mut sorted: Vec<&(usize, String)> = additions.iter().collect();
    sorted.sort_by_key(|(at, _)| *at);
    let mut out =
        String::with_capacity(text.len() + sorted.iter().map(|(_, a)| a.len()).sum::<usize>());
    let mut from = 0;
    for (at, addition) in sorted {
        out.push_str(&text[from..*at]);
        out.push_str(addition);
        from = *at;
    }
    out.push_str(&text[from..]);
    out
}

/// `s` as a YAML scalar: plain when it is made of characters that read the same plain
/// (`http://gpu-box.local:11434/v1`), else double-quoted with `\` and `"` escaped (the
/// caller refuses control characters).
pub fn scalar(s: &str) -> String {
    let plain = s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '.' | '_' | '-' | '%' | '~')
        })
        && !s.ends_with(':')
        && !matches!(s.to_ascii_lowercase().as_str(), "true" | "false" | "null");
    if plain {
        return s.to_owned();
    }
    quoted(s)
}

/// `s` double-quoted, `\` and `"` escaped.
pub fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
