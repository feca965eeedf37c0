//! The "did you mean …?" of `labrouter check --live`: which name a machine lists is
//! closest to one the registry names on it, by edit distance, and only when it is close
//! enough to be the same model misspelled or differently tagged.

/// Whether the machine's `listed` name is the registry's `wanted` one: equal, or equal once
/// Ollama's default `:latest` tag is dropped from both (Ollama serves `m` as `m:latest`).
pub fn same_model(wanted: &str, listed: &str) -> bool {
    untagged(wanted) == untagged(listed)
}

/// `name` without a `:latest` tag.
fn untagged(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// The name of `listed` closest to `wanted` (case aside), when it is close: within a third
/// of the longer name's length or two edits, or `wanted` followed by a tag or variant
/// (`qwen3-coder:30b` -> `qwen3-coder:30b-q4_K_M`), or the other way round. Ties go to the
/// name listed first.
pub fn closest<'a>(wanted: &str, listed: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_low = wanted.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for name in listed {
        let low = name.to_lowercase();
        let d = distance(&wanted_low, &low);
        if !close(&wanted_low, &low, d) {
            continue;
        }
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, name));
        }
    }
    best.map(|(_, name)| name)
}

/// Whether names `a` and `b`, `d` edits apart, are close enough to suggest one for the other.
fn close(a: &str, b: &str, d: usize) -> bool {
    let (la, lb) = (a.chars().count(), b.chars().count());
    let (short, long) = (la.min(lb), la.max(lb));
    if d >= short {
        return false;
    }
    d * 3 <= long || d <= 2 || variant(a, b) || variant(b, a)
}

/// Whether `longer` is `base` followed by a separator and more (a tag or a quantization).
fn variant(base: &str, longer: &str) -> bool {
    longer
        .strip_prefix(base)
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| matches!(c, ':' | '-' | '_' | '.' | '@'))
}

/// The Levenshtein distance between `a` and `b`, in characters (one row of memory).
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let replaced = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = replaced.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_insertions_deletions_and_replacements() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("qwen3:4b", "qwen3:8b"), 1);
        assert_eq!(distance("qwen3-coder:30b", "qwen3-coder:30b-q4_K_M"), 7);
        assert_eq!(distance("naïve", "naive"), 1);
    }

    #[test]
    fn a_tagged_variant_of_the_name_is_suggested() {
        let listed = [
            "llama3.2:3b",
            "qwen3-coder:30b-q4_K_M",
            "nomic-embed-text:latest",
        ];
        assert_eq!(
            closest("qwen3-coder:30b", listed),
            Some("qwen3-coder:30b-q4_K_M")
        );
        assert_eq!(
            closest("nomic-embed-text", listed),
            Some("nomic-embed-text:latest")
        );
    }

    #[test]
    fn a_typo_is_suggested_and_case_does_not_count() {
        let listed = ["qwen2.5vl:7b", "qwen3:8b"];
        assert_eq!(closest("qwen2.5-vl:7b", listed), Some("qwen2.5vl:7b"));
        assert_eq!(closest("Qwen3:8B", listed), Some("qwen3:8b"));
        assert_eq!(closest("qwen3:4b", listed), Some("qwen3:8b"));
    }

    #[test]
    fn a_different_model_is_not_suggested() {
        let listed = ["gemma3:4b", "llama3.2:3b", "mistral:7b"];
        assert_eq!(closest("qwen3:4b", listed), None);
        assert_eq!(closest("deepseek-r1:70b", listed), None);
        assert_eq!(closest("a", ["b"]), None);
        assert_eq!(closest("qwen3:4b", []), None);
    }

    #[test]
    fn the_closest_wins_and_ties_go_to_the_first_listed() {
        let listed = ["qwen3:32b", "qwen3:8b", "qwen3:7b"];
        assert_eq!(closest("qwen3:4b", listed), Some("qwen3:8b"));
    }

    #[test]
    fn latest_is_the_default_tag() {
        assert!(same_model("llama3.2", "llama3.2:latest"));
        assert!(same_model("llama3.2:latest", "llama3.2"));
        assert!(same_model("qwen3:4b", "qwen3:4b"));
        assert!(!same_model("qwen3:4b", "qwen3:8b"));
        assert!(!same_model("qwen3", "Qwen3"));
    }
}
