//! Whole-word keyword search (docs/api.md "Routing a request") in one pass over the text, without
//! an automaton.
//!
//! A keyword hits where it occurs ASCII-case-insensitively and no word character (a letter,
//! a digit or `_`) touches either end. So a keyword that begins with a word character can
//! only begin where a word of the text begins, and that whole text word must equal the
//! keyword's first word (the run of word characters it begins with): the character after
//! that run, in the keyword and so in the text, is not a word character, or it is the
//! keyword's end, which must not touch one. One pass finds the text's words (64 bytes at a
//! time as bit masks); each word of a plausible length is hashed once and looked up among
//! the keywords' first words (a Bloom filter in L1 turns almost all of them away); a hit
//! checks the rest of the keyword (`" test"` of `"unit test"`) and the edge after it. A
//! character that is not ASCII is told a letter or not by a table (`unicode.rs`); when some
//! keyword is not ASCII, a text that is not ASCII is lower-cased first, as before, but only
//! its characters that change are converted, and nothing is copied when none does.
//!
//! A keyword that begins with anything else (`.net`) is rare; those few are searched the
//! old way, an Aho-Corasick automaton over the text with edges checked on each match.

use aho_corasick::AhoCorasick;

use super::bytes::{eq_lower, folded, hash, lower16, masks, HIGH_BITS};
use super::unicode::{self, is_word};

mod build;

const EMPTY: u32 = u32::MAX;

/// Up to this many keywords with one first word are checked one by one.
const SMALL_GROUP: usize = 8;

#[derive(Clone, Debug)]
struct Slot {
    hash: u64,
    group: u32,
}

/// ASCII-lowercased bytes of a keyword: a range of `Keywords::bytes` and, when they are
/// 16 or fewer, the same bytes as two zero-padded words, compared in two steps.
#[derive(Clone, Debug)]
struct Part {
    at: u32,
    len: u32,
    key: (u64, u64),
}

/// The keywords that begin with one first word.
#[derive(Clone, Debug)]
struct Group {
    word: Part,
    /// The word's [`folded`] halves when it is ASCII and at most 16 bytes long, else zero
    /// (which no text word folds to).
    folded: (u64, u64),
    /// The one keyword of the group when it is this word alone, else `EMPTY`.
    alone: u32,
    /// Its keywords: a range of `entries`.
    entries: (u32, u32),
}

#[derive(Clone, Debug)]
struct Entry {
    pattern: u32,
    /// What follows the first word (empty for a one-word keyword).
    rest: Part,
}

/// The keywords of one registry, indexed by first word.
#[derive(Clone, Debug)]
pub(super) struct Keywords {
    patterns: usize,
    slots: Vec<Slot>,
    slot_shift: u32,
    bloom: Vec<u64>,
    bloom_shift: u32,
    groups: Vec<Group>,
    entries: Vec<Entry>,
    bytes: Vec<u8>,
    /// Text words shorter or longer than every first word are never looked up.
    shortest: usize,
    longest: usize,
    /// Keywords that begin with no word character, and their pattern ids.
    others: Option<(AhoCorasick, Vec<u32>)>,
    /// Some keyword is not ASCII: lower-case a non-ASCII text first (ASCII case folding is
    /// built in, so an ASCII text is searched as it is).
    fold_unicode: bool,
}

/// The distinct keywords a text hits: a bit per pattern and the ids in the order found.
pub(super) struct Hits {
    bits: Vec<u64>,
    pub found: Vec<u32>,
}

impl Hits {
    fn new(patterns: usize) -> Hits {
        Hits {
            bits: vec![0; patterns.div_ceil(64)],
            found: Vec::new(),
        }
    }

    fn insert(&mut self, p: u32) {
        let (w, b) = (p as usize / 64, 1u64 << (p % 64));
        if self.bits[w] & b == 0 {
            self.bits[w] |= b;
            self.found.push(p);
        }
    }

    pub fn contains(&self, p: u32) -> bool {
        self.bits[p as usize / 64] & (1u64 << (p % 64)) != 0
    }
}

impl Keywords {
    /// The distinct keywords found in `text` as whole words.
    pub fn hits(&self, text: &str) -> Hits {
        let mut hits = Hits::new(self.patterns);
        if self.patterns == 0 {
            return hits;
        }
        let folded;
        let text = match self.fold_unicode && !text.is_ascii() {
            true => match unicode::lower_case(text) {
                Some(lower) => {
                    folded = lower;
                    folded.as_str()
                }
                None => text,
            },
            false => text,
        };
        if !self.groups.is_empty() {
            self.words(text, &mut hits);
        }
        if let Some((ac, ids)) = &self.others {
            for m in ac.find_overlapping_iter(text) {
                if is_word_edge(text, m.start(), m.end()) {
                    hits.insert(ids[m.pattern().as_usize()]);
                }
            }
        }
        hits
    }

    /// Every word of `text` (a maximal run of word characters) to [`Self::word`].
    fn words(&self, text: &str, hits: &mut Hits) {
        let t = text.as_bytes();
        // A word that began in an earlier block; is the byte before this block part of a
        // word; word bits spilling from a multi-byte character at the end of the last block.
        let mut open: Option<usize> = None;
        let (mut prev, mut carry) = (0u64, 0u64);
        let tables = unicode::tables();
        let mut base = 0;
        while base < t.len() {
            let (mut word, lead) = match t.get(base..base + 64) {
                Some(block) => masks(block),
                None => {
                    let mut pad = [0u8; 64];
                    pad[..t.len() - base].copy_from_slice(&t[base..]);
                    masks(&pad)
                }
            };
            word |= carry;
            carry = 0;
            // A character that is not ASCII: all its bytes are word bytes, or none.
            let mut lead = lead;
            while lead != 0 {
                let j = lead.trailing_zeros() as usize;
                lead &= lead - 1;
                if let (true, len) = unicode::word_char_at(tables, text, base + j) {
                    let bytes = (1u64 << len) - 1;
                    word |= bytes << j;
                    carry = bytes.checked_shr(64 - j as u32).unwrap_or(0);
                }
            }
            // Words begin where a word byte follows another byte and end (exclusive) where
            // another byte follows a word byte; they alternate.
            let shifted = (word << 1) | prev;
            let mut starts = word & !shifted;
            let mut ends = !word & shifted;
            if let Some(start) = open {
                if ends != 0 {
                    self.word(text, start, base + ends.trailing_zeros() as usize, hits);
                    ends &= ends - 1;
                    open = None;
                }
            }
            while starts != 0 {
                let start = base + starts.trailing_zeros() as usize;
                starts &= starts - 1;
                if ends == 0 {
                    open = Some(start);
                    break;
                }
                self.word(text, start, base + ends.trailing_zeros() as usize, hits);
                ends &= ends - 1;
            }
            prev = word >> 63;
            base += 64;
        }
        if let Some(start) = open {
            self.word(text, start, t.len(), hits);
        }
    }

    /// The word `text[start..end]`: the keywords it begins, if any, that hit.
    #[inline(always)]
    fn word(&self, text: &str, start: usize, end: usize, hits: &mut Hits) {
        let len = end - start;
        // One compare for `shortest <= len <= longest`.
        if len.wrapping_sub(self.shortest) > self.longest.wrapping_sub(self.shortest) {
            return;
        }
        let t = text.as_bytes();
        let (h, key) = match folded(t, start, len) {
            Some((h, key)) => (h, Some(key)),
            None => (hash(&t[start..end]), None),
        };
        let b = (h >> self.bloom_shift) as usize;
        if self.bloom[b / 64] & (1 << (b % 64)) == 0 {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.slot_shift) as usize;
        loop {
            let slot = &self.slots[i];
            if slot.group == EMPTY {
                return;
            }
            if slot.hash == h {
                let g = &self.groups[slot.group as usize];
                // Folded halves are the word but for ASCII case when the word is ASCII.
                let same = match key {
                    Some(k) if (k.0 | k.1) & HIGH_BITS == 0 => k == g.folded,
                    _ => g.word.len as usize == len && self.eq_at(t, start, &g.word),
                };
                if same {
                    if g.alone != EMPTY {
                        hits.insert(g.alone);
                    } else {
                        self.group(text, end, g, hits);
                    }
                    return;
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The keywords of `g`, whose first word `text` has just before `end`, that hit.
    #[inline(never)]
    fn group(&self, text: &str, end: usize, g: &Group, hits: &mut Hits) {
        let (first, n) = (g.entries.0 as usize, g.entries.1 as usize);
        let entries = &self.entries[first..first + n];
        let hit = |e: &Entry| e.rest.len == 0 || !word_at(text, end + e.rest.len as usize);
        if n <= SMALL_GROUP {
            for e in entries {
                if e.rest.len == 0 || (self.eq_at(text.as_bytes(), end, &e.rest) && hit(e)) {
                    hits.insert(e.pattern);
                }
            }
            return;
        }
        // Many keywords share this first word ("how to ..."): what follows it in the text,
        // lower-cased, is looked up among the rests of each length, sorted, by bisection, so
        // a word that begins hundreds of phrases costs a few steps per length, not hundreds.
        let t = text.as_bytes();
        let longest = entries.last().map_or(0, |e| e.rest.len as usize);
        let after = t[end..]
            .get(..longest)
            .unwrap_or(&t[end..])
            .to_ascii_lowercase();
        let mut rest = entries;
        while let Some(e) = rest.first() {
            let len = e.rest.len;
            let same = rest.partition_point(|e| e.rest.len == len);
            let (run, more) = rest.split_at(same);
            rest = more;
            let Some(key) = after.get(..len as usize) else {
                break; // the text ends before rests this long
            };
            if let Ok(k) = run.binary_search_by(|e| self.range(&e.rest).cmp(key)) {
                if hit(&run[k]) {
                    hits.insert(run[k].pattern);
                }
            }
        }
    }

    /// `t[at..]` begins with `part` but for the case of ASCII letters.
    #[inline(always)]
    fn eq_at(&self, t: &[u8], at: usize, part: &Part) -> bool {
        let len = part.len as usize;
        match lower16(t, at, len) {
            Some(key) => key == part.key,
            None => t.len() >= at + len && eq_lower(&t[at..at + len], self.range(part)),
        }
    }

    fn range(&self, part: &Part) -> &[u8] {
        &self.bytes[part.at as usize..][..part.len as usize]
    }
}

/// Does a word character begin at `at` (a character boundary)?
#[inline(always)]
fn word_at(text: &str, at: usize) -> bool {
    match text.as_bytes().get(at) {
        None => false,
        Some(&b) if b < 0x80 => b.is_ascii_alphanumeric() || b == b'_',
        Some(_) => text[at..].chars().next().is_some_and(is_word),
    }
}

/// A match is a whole word when no word character touches either end.
fn is_word_edge(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(is_word) && !after.is_some_and(is_word)
}
