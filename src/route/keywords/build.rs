//! Building the keyword index of one registry (once per load or reload).

use aho_corasick::{AhoCorasickBuilder, MatchKind};

use super::{Entry, Group, Keywords, Part, Slot, EMPTY};
use crate::route::bytes::{folded, hash, lower16};
use crate::route::unicode::{self, is_word};

impl Keywords {
    /// `patterns` are distinct, non-empty and lower-cased (the registry does that).
    pub fn new(patterns: &[String]) -> Keywords {
        unicode::warm();
        let fold_unicode = patterns.iter().any(|p| !p.is_ascii());
        let mut bytes = Vec::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut by_word: std::collections::HashMap<Vec<u8>, Vec<(u32, Vec<u8>)>> =
            std::collections::HashMap::new();
        let mut order: Vec<Vec<u8>> = Vec::new();
        let mut other_ids = Vec::new();
        let mut other_patterns = Vec::new();
        for (pid, p) in patterns.iter().enumerate() {
            let first = p.find(|c: char| !is_word(c)).unwrap_or(p.len());
            if first == 0 {
                other_ids.push(pid as u32);
                other_patterns.push(p.as_str());
                continue;
            }
            let word = p.as_bytes()[..first].to_ascii_lowercase();
            let rest = p.as_bytes()[first..].to_ascii_lowercase();
            let list = by_word.entry(word.clone()).or_default();
            if list.is_empty() {
                order.push(word);
            }
            list.push((pid as u32, rest));
        }
        let mut entries = Vec::new();
        let push = |bytes: &mut Vec<u8>, b: &[u8]| {
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
        };
        for word in &order {
            let first = entries.len() as u32;
            // By length, then bytes: a large group is searched by length (see `group`).
            let mut mine = by_word[word].clone();
            mine.sort_unstable_by(|a, b| (a.1.len(), &a.1).cmp(&(b.1.len(), &b.1)));
            for (pid, rest) in &mine {
                let rest = push(&mut bytes, rest);
                entries.push(Entry {
                    pattern: *pid,
                    rest,
                });
            }
            let w = push(&mut bytes, word);
            let mut pad = [0u8; 16];
            let folded = match pad.get_mut(..word.len()) {
                Some(p) if word.is_ascii() => {
                    p.copy_from_slice(word);
                    folded(&pad, 0, word.len()).map_or((0, 0), |(_, k)| k)
                }
                _ => (0, 0),
            };
            let mine = &entries[first as usize..];
            let alone = match mine {
                [e] if e.rest.len == 0 => e.pattern,
                _ => EMPTY,
            };
            groups.push(Group {
                word: w,
                folded,
                alone,
                entries: (first, entries.len() as u32 - first),
            });
        }
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
        let lens = groups.iter().map(|g| g.word.len as usize);
        let others = (!other_patterns.is_empty())
            .then(|| {
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&other_patterns)
                    .map_err(|e| tracing::error!(error = %e, "keyword automaton failed to build: keywords that begin with no letter or digit are off"))
                    .ok()
            })
            .flatten()
            .map(|ac| (ac, other_ids));
        Keywords {
            patterns: patterns.len(),
            slots,
            slot_shift,
            bloom,
            bloom_shift,
            shortest: lens.clone().min().unwrap_or(usize::MAX),
            longest: lens.max().unwrap_or(0),
            groups,
            entries,
            bytes,
            others,
            fold_unicode,
        }
    }
}
