//! Building the keyword index of one registry (once per load or reload).

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::{Entry, Group, Keywords, Part, Slot, EMPTY};
use crate::route::bytes::{folded, hash, lower16};
use crate::route::unicode::{self, is_word};

/// The registry's keywords by how they are searched: by first word, in the order
/// the first words first appear, or by the automaton when they begin with no word character.
#[derive(Default)]
struct FirstWords<'a> {
    /// Each first word's keywords: their pattern id and what follows the first word.
    by_word: HashMap<Vec<u8>, Vec<(u32, Vec<u8>)>>,
    order: Vec<Vec<u8>>,
    other_ids: Vec<u32>,
    other_patterns: Vec<&'a str>,
}

/// The keywords laid out for the search: groups by first word, their entries, and the
/// bytes both point into.
#[derive(Default)]
struct Layout {
    bytes: Vec<u8>,
    groups: Vec<Group>,
    entries: Vec<Entry>,
}

/// The open-addressing table from a first word's hash to its group, and the Bloom filter
/// that turns most text words away before the table is read.
struct Table {
    slots: Vec<Slot>,
    slot_shift: u32,
    bloom: Vec<u64>,
    bloom_shift: u32,
}

impl Keywords {
    /// `patterns` are distinct, non-empty and lower-cased (the registry does that).
    pub fn new(patterns: &[String]) -> Keywords {
        unicode::warm();
        let fold_unicode = patterns.iter().any(|p| !p.is_ascii());
        let words = first_words(patterns);
        let Layout {
            bytes,
            groups,
            entries,
        } = lay_out(&words);
        let table = table(&groups, &bytes);
        let lens = groups.iter().map(|g| g.word.len as usize);
        Keywords {
            patterns: patterns.len(),
            slots: table.slots,
            slot_shift: table.slot_shift,
            bloom: table.bloom,
            bloom_shift: table.bloom_shift,
            shortest: lens.clone().min().unwrap_or(usize::MAX),
            longest: lens.max().unwrap_or(0),
            groups,
            entries,
            bytes,
            others: automaton(words.other_ids, &words.other_patterns),
            fold_unicode,
        }
    }
}

/// Splits each keyword into its first word (the run of word characters it begins with)
/// and the rest; a keyword that begins with no word character goes to the automaton.
fn first_words(patterns: &[String]) -> FirstWords<'_> {
    let mut words = FirstWords::default();
    for (pid, p) in patterns.iter().enumerate() {
        let first = p.find(|c: char| !is_word(c)).unwrap_or(p.len());
        if first == 0 {
            words.other_ids.push(pid as u32);
            words.other_patterns.push(p.as_str());
            continue;
        }
        let word = p.as_bytes()[..first].to_ascii_lowercase();
        let rest = p.as_bytes()[first..].to_ascii_lowercase();
        let list = words.by_word.entry(word.clone()).or_default();
        if list.is_empty() {
            words.order.push(word);
        }
        list.push((pid as u32, rest));
    }
    words
}

/// One group per first word, in order, with its keywords' entries right after the
/// previous group's.
fn lay_out(words: &FirstWords<'_>) -> Layout {
    let mut out = Layout::default();
    for word in &words.order {
        let first = out.entries.len() as u32;
        // By length, then bytes: a large group is searched by length (see `group`).
        let mut mine = words.by_word[word].clone();
        mine.sort_unstable_by(|a, b| (a.1.len(), &a.1).cmp(&(b.1.len(), &b.1)));
        for (pid, rest) in &mine {
            let rest = part(&mut out.bytes, rest);
            out.entries.push(Entry {
                pattern: *pid,
                rest,
            });
        }
        let w = part(&mut out.bytes, word);
        let mine = &out.entries[first as usize..];
        let alone = match mine {
            [e] if e.rest.len == 0 => e.pattern,
            _ => EMPTY,
        };
        out.groups.push(Group {
            word: w,
            folded: folded_word(word),
            alone,
            entries: (first, out.entries.len() as u32 - first),
        });
    }
    out
}

/// Appends `b` to `bytes`; a part of 16 bytes or fewer also keeps them as two words.
fn part(bytes: &mut Vec<u8>, b: &[u8]) -> Part {
    let at = bytes.len() as u32;
    bytes.extend_from_slice(b);
    let mut pad = [0u8; 16];
    let key = match pad.get_mut(..b.len()) {
        Some(p) => {
            p.copy_from_slice(b);
            lower16(&pad, 0, b.len()).unwrap_or((0, 0))
        }
        None => (0, 0), // longer: compared byte by byte
    };
    Part {
        at,
        len: b.len() as u32,
        key,
    }
}

/// A first word's [`folded`] halves when it is ASCII and at most 16 bytes long, else zero.
fn folded_word(word: &[u8]) -> (u64, u64) {
    let mut pad = [0u8; 16];
    match pad.get_mut(..word.len()) {
        Some(p) if word.is_ascii() => {
            p.copy_from_slice(word);
            folded(&pad, 0, word.len()).map_or((0, 0), |(_, k)| k)
        }
        _ => (0, 0),
    }
}

/// Hashes each group's first word into the slots and the Bloom filter.
fn table(groups: &[Group], bytes: &[u8]) -> Table {
    // Slots at most half full; about 16 Bloom bits per first word (~6% false positives).
    let slot_bits = (groups.len() * 2)
        .next_power_of_two()
        .max(16)
        .trailing_zeros();
    let bloom_bits = (groups.len() * 16)
        .next_power_of_two()
        .max(1024)
        .trailing_zeros();
    let mut slots = vec![
        Slot {
            hash: 0,
            group: EMPTY
        };
        1 << slot_bits
    ];
    let mut bloom = vec![0u64; (1usize << bloom_bits) / 64];
    let (slot_shift, bloom_shift) = (64 - slot_bits, 64 - bloom_bits);
    for (g, group) in groups.iter().enumerate() {
        let h = hash(&bytes[group.word.at as usize..][..group.word.len as usize]);
        let b = (h >> bloom_shift) as usize;
        bloom[b / 64] |= 1 << (b % 64);
        let mask = slots.len() - 1;
        let mut i = (h >> slot_shift) as usize;
        while slots[i].group != EMPTY {
            i = (i + 1) & mask;
        }
        slots[i] = Slot {
            hash: h,
            group: g as u32,
        };
    }
    Table {
        slots,
        slot_shift,
        bloom,
        bloom_shift,
    }
}

/// The automaton for keywords that begin with no word character, with their pattern ids;
/// none when there are no such keywords or it fails to build (logged: they are then off).
fn automaton(ids: Vec<u32>, patterns: &[&str]) -> Option<(AhoCorasick, Vec<u32>)> {
    if patterns.is_empty() {
        return None;
    }
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(patterns)
        .map_err(|e| tracing::error!(error = %e, "keyword automaton failed to build: keywords that begin with no letter or digit are off"))
        .ok()
        .map(|ac| (ac, ids))
}
