//! What a word character is ([`is_word`]: the one rule keyword edges use), and for
//! characters that are not ASCII, fast: is it a word character, and is it its own lower
//! case. Both answers for the Basic Multilingual Plane (every living script) come from
//! 8 KB bit tables built once per process; the rare characters above it ask `char`.

use std::sync::OnceLock;

use super::bytes::masks;

/// The characters that make up words: an edge is where none touches.
pub(super) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

pub(super) struct Tables {
    /// Bit `c`: `c` is a letter, a digit or `_`.
    word: [u64; 1024],
    /// Bit `c`: `c.to_lowercase()` is `c` alone.
    own_lower: [u64; 1024],
}

/// The tables, built on first use.
pub(super) fn tables() -> &'static Tables {
    static T: OnceLock<Box<Tables>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Box::new(Tables {
            word: [0; 1024],
            own_lower: [0; 1024],
        });
        for c in (0..0x1_0000).filter_map(char::from_u32) {
            let (w, b) = (c as usize / 64, 1u64 << (c as u32 % 64));
            if is_word(c) {
                t.word[w] |= b;
            }
            if own_lower(c) {
                t.own_lower[w] |= b;
            }
        }
        t
    })
}

fn own_lower(c: char) -> bool {
    let mut l = c.to_lowercase();
    l.next() == Some(c) && l.next().is_none()
}

/// Builds the tables now (a few milliseconds), so no request waits for them.
pub(super) fn warm() {
    tables();
}

/// The character that begins at `at` (a lead byte, 0xC0 or more, of valid UTF-8) and its
/// length in bytes.
#[inline(always)]
fn decode(text: &str, at: usize) -> (u32, usize) {
    let t = &text.as_bytes()[at..];
    let b0 = u32::from(t[0]);
    let next = |i: usize| u32::from(t[i] & 0x3F);
    if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | next(1), 2)
    } else if b0 < 0xF0 {
        (((b0 & 0x0F) << 12) | (next(1) << 6) | next(2), 3)
    } else {
        (
            ((b0 & 0x07) << 18) | (next(1) << 12) | (next(2) << 6) | next(3),
            4,
        )
    }
}

fn bit(table: &[u64; 1024], c: u32) -> bool {
    table[c as usize / 64] & (1 << (c % 64)) != 0
}

/// Whether the non-ASCII character at `at` is a word character, and its length in bytes.
#[inline(always)]
pub(super) fn word_char_at(tables: &Tables, text: &str, at: usize) -> (bool, usize) {
    let (c, len) = decode(text, at);
    let word = match c {
        0..=0xFFFF => bit(&tables.word, c),
        _ => char::from_u32(c).is_some_and(is_word),
    };
    (word, len)
}

/// Is the non-ASCII character at `at` its own lower case? Its length in bytes.
#[inline(always)]
fn own_lower_at(tables: &Tables, text: &str, at: usize) -> (bool, usize) {
    let (c, len) = decode(text, at);
    let own = match c {
        0..=0xFFFF => bit(&tables.own_lower, c),
        _ => char::from_u32(c).is_some_and(own_lower),
    };
    (own, len)
}

/// `text.to_lowercase()` but for the case of ASCII letters (the search folds those itself),
/// or `None` when that is `text` itself: only the characters that change are converted, and
/// nothing is copied when none does.
pub(super) fn lower_case(text: &str) -> Option<String> {
    let (t, tables) = (text.as_bytes(), tables());
    let mut out: Option<String> = None;
    // `out` holds the lower case of `text[..copied]`.
    let mut copied = 0;
    let mut base = 0;
    while base < t.len() {
        let (_, mut lead) = match t.get(base..base + 64) {
            Some(block) => masks(block),
            None => {
                let mut pad = [0u8; 64];
                pad[..t.len() - base].copy_from_slice(&t[base..]);
                masks(&pad)
            }
        };
        while lead != 0 {
            let at = base + lead.trailing_zeros() as usize;
            lead &= lead - 1;
            if let (false, len) = own_lower_at(tables, text, at) {
                let c = text[at..].chars().next()?;
                if c == 'Σ' {
                    // Σ lower-cases by its context (final ς or σ): the library knows how.
                    return Some(text.to_lowercase());
                }
                let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                out.push_str(&text[copied..at]);
                out.extend(c.to_lowercase());
                copied = at + len;
            }
        }
        base += 64;
    }
    let mut out = out?;
    out.push_str(&text[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_agree_with_char() {
        let t = tables();
        for c in (0..0x1_0000).filter_map(char::from_u32) {
            assert_eq!(bit(&t.word, c as u32), is_word(c), "{c:?}");
            assert_eq!(bit(&t.own_lower, c as u32), own_lower(c), "{c:?}");
        }
        let text = "aé字😀\u{10400}ÄΣ";
        for (at, c) in text.char_indices().filter(|(_, c)| !c.is_ascii()) {
            assert_eq!(decode(text, at), (c as u32, c.len_utf8()), "{c:?}");
            assert_eq!(
                word_char_at(t, text, at),
                (is_word(c), c.len_utf8()),
                "{c:?}"
            );
        }
    }

    #[test]
    fn lower_case_is_the_library_s_but_for_ascii() {
        for text in [
            "",
            "plain ascii TEXT",
            "schon klein: größe über",
            "GRÖßE Über",
            "ΣΑΣ σας ΟΔΟΣ.",
            "İstanbul \u{212A}elvin ẞ ǅ",
            "\u{10400}\u{10428} 😀 字",
            "Почему ТЕСТЫ",
        ] {
            let want = text.to_lowercase();
            match lower_case(text) {
                Some(got) => assert_eq!(got.to_ascii_lowercase(), want, "{text:?}"),
                None => assert_eq!(text.to_ascii_lowercase(), want, "{text:?}"),
            }
        }
        assert_eq!(lower_case("schon klein: größe über 字"), None);
        assert_eq!(lower_case("ASCII ONLY"), None);
    }
}
