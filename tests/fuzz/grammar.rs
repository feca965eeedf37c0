//! Structure-aware JSON-ish inputs from a table of rules: the shapes a parser expects, with
//! JSON's escapes and whitespace, duplicate keys, and now and then any value, anywhere.

use std::collections::HashMap;

use arbitrary::Unstructured;

use super::harness::{nasty, pick, rarely};
use super::request::{object, string, value};

type R<T> = arbitrary::Result<T>;

/// Rules, one `name = body` a line (lines indented four spaces continue the one before).
/// A body is `lit:` one of the `|`-separated strings as a JSON string literal (escaped one
/// of JSON's ways); `obj:` an object of `key percent rule` fields, each there that percent
/// of the time; `list:N rule` an array of up to N; `repeat:N text` up to N copies; `nasty`
/// a [`nasty`] string literal; else one of the `|`-separated texts with each `<rule>` in
/// it made. A choice `N*x` counts N times; `\n` is a line break.
pub struct Grammar(HashMap<&'static str, String>);

impl Grammar {
    pub fn new(rules: &'static str) -> Grammar {
        let mut all: HashMap<&str, String> = HashMap::new();
        let mut last = "";
        for line in rules.lines() {
            if let Some(more) = line.strip_prefix("    ") {
                all.entry(last).or_default().push_str(more);
            } else if let Some((name, body)) = line.split_once(" = ") {
                last = name;
                all.insert(name, body.to_string());
            }
        }
        Grammar(all)
    }

    /// Rule `name` made, each rule one time in `junk` any JSON-ish value instead; lone
    /// surrogate escapes, which break a whole body, mostly dropped.
    pub fn text(&self, u: &mut Unstructured<'_>, name: &str, junk: u32) -> R<String> {
        let text = self.make(u, name, junk)?;
        Ok(if rarely(u, 4)? {
            text
        } else {
            text.replace("\\ud800", "")
        })
    }

    /// [`Grammar::text`], now and then with one byte changed, dropped or added; or, one time
    /// in `junk`, random bytes.
    pub fn bytes(&self, u: &mut Unstructured<'_>, name: &str, junk: u32) -> R<Vec<u8>> {
        if rarely(u, junk)? {
            return Ok(u.bytes(u.len().min(512))?.to_vec());
        }
        let mut out = self.text(u, name, junk)?.into_bytes();
        if rarely(u, 8)? {
            let i = u.int_in_range(0..=out.len())?;
            match u.int_in_range(0..=2)? {
                0 if i < out.len() => out[i] = u.arbitrary()?,
                1 if i < out.len() => drop(out.remove(i)),
                _ => out.insert(i, *pick(u, b"{}[]\",:\\ \n\x00\xff\x0c")?),
            }
        }
        Ok(out)
    }

    fn make(&self, u: &mut Unstructured<'_>, name: &str, junk: u32) -> R<String> {
        let body = self.0.get(name).unwrap_or_else(|| panic!("no rule {name}"));
        let mut out = String::new();
        if rarely(u, junk)? {
            value(u, 2, &mut out)?;
        } else if let Some(list) = body.strip_prefix("lit:") {
            let item = choose(u, list)?;
            string(u, &item, &mut out)?;
        } else if let Some(fields) = body.strip_prefix("obj:") {
            let mut entries = Vec::new();
            for field in fields.split(',') {
                let [key, percent, rule] = field.split(' ').collect::<Vec<_>>()[..] else {
                    panic!("{name}: {field:?} is not `key percent rule`")
                };
                if u.int_in_range(0..=99)? < percent.parse::<u8>().expect("a percent") {
                    entries.push((key.to_string(), self.make(u, rule, junk)?));
                }
            }
            if !entries.is_empty() && rarely(u, 16)? {
                entries.push(entries[u.choose_index(entries.len())?].clone());
            }
            object(u, &entries, &mut out)?;
        } else if let Some((n, rule)) = body.strip_prefix("list:").and_then(|b| b.split_once(' ')) {
            let n = u.int_in_range(0..=n.parse::<u32>().expect("a count"))?;
            let items = (0..n)
                .map(|_| self.make(u, rule, junk))
                .collect::<R<Vec<_>>>()?;
            out = format!("[{}]", items.join(","));
        } else if let Some((n, text)) = body.strip_prefix("repeat:").and_then(|b| b.split_once(' '))
        {
            out = text.repeat(u.int_in_range(0..=n.parse::<usize>().expect("a count"))?);
        } else if body == "nasty" {
            let text = nasty(u)?;
            string(u, &text, &mut out)?;
        } else {
            let mut text = choose(u, body)?;
            while let Some((before, after)) = text.split_once('<') {
                let (inner, rest) = after.split_once('>').expect("a closed <rule>");
                out = out + before + &self.make(u, inner, junk)?;
                text = rest.to_string();
            }
            out.push_str(&text);
        }
        Ok(out)
    }
}

/// One of the `|`-separated choices, `N*x` counting N times.
fn choose(u: &mut Unstructured<'_>, choices: &str) -> R<String> {
    let mut all = Vec::new();
    for choice in choices.split('|') {
        let (n, text) = choice
            .split_once('*')
            .filter(|(n, _)| n.parse::<usize>().is_ok())
            .unwrap_or(("1", choice));
        all.extend(std::iter::repeat_n(text, n.parse().unwrap_or(1)));
    }
    Ok(pick(u, &all)?.replace("\\n", "\n"))
}
