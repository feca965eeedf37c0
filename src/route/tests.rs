//! Unit tests of routing (docs/api.md "Routing a request"): names, headers and keywords to a route
//! or a model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

use super::*;
use crate::outcome::{Kind, ModelId, RouteId};

/// The lab of docs/registry.md, inline so the tests do not depend on the shipped file.
const LAB: &str = r#"
machines:
  gpu-box: { url: "http://gpu-box.local:11434/v1" }
  ubuntu-box: { url: "http://ubuntu-box.local:8080/v1" }
  local: { url: "http://127.0.0.1:11434/v1" }
models:
  coder-gpu:  { machine: gpu-box,    name: "qwen3-coder:30b" }
  coder-cpu:  { machine: ubuntu-box, name: "qwen3-coder:30b" }
  vision-gpu: { machine: gpu-box,    name: "qwen2.5vl:7b" }
  vision-cpu: { machine: ubuntu-box, name: "qwen2.5vl:7b" }
  small:      { machine: local,      name: "qwen3:4b" }
routes:
  - name: code
    keywords: [code, refactor, function, bug, compile, "unit test", rust, python]
    chain: [coder-gpu, coder-cpu, small]
  - name: vision
    keywords: [image, photo, picture, screenshot, ocr]
    images: true
    chain: [vision-gpu, vision-cpu]
  - name: chat
    default: true
    chain: [small]
"#;

const CODE: RouteId = RouteId(0);
const VISION: RouteId = RouteId(1);
const CHAT: RouteId = RouteId(2);

fn lab() -> (Registry, Matcher) {
    from_yaml(LAB)
}

fn from_yaml(yaml: &str) -> (Registry, Matcher) {
    let reg = Registry::parse(yaml, "registry.yaml").expect("test registry is valid");
    let router = Matcher::new(&reg);
    (reg, router)
}

/// Keyword routing of `text` (model `auto`, no header, no image).
fn route_of(reg: &Registry, router: &Matcher, text: &str) -> Routed {
    router.decide(reg, None, Some("auto"), text, false).unwrap()
}

fn keywords(words: &[&str]) -> Why {
    Why::Keywords(words.iter().map(|w| w.to_string()).collect())
}

/// A registry of one machine and model with the given routes (`name`, keywords, images).
fn routes_yaml(routes: &[(&str, &[&str], bool)]) -> String {
    let mut y = String::from(
        "machines:\n  m: { url: \"http://127.0.0.1:9/v1\" }\nmodels:\n  only: { machine: m, name: \"x:1b\" }\nroutes:\n",
    );
    for (name, kws, images) in routes {
        let kws: Vec<String> = kws.iter().map(|k| format!("\"{k}\"")).collect();
        writeln!(y, "  - name: {name}").unwrap();
        writeln!(y, "    keywords: [{}]", kws.join(", ")).unwrap();
        if *images {
            writeln!(y, "    images: true").unwrap();
        }
        writeln!(y, "    chain: [only]").unwrap();
    }
    y
}

// === keywords ===

#[test]
fn keywords_match_case_insensitively() {
    let (reg, router) = lab();
    for text in [
        "help me with Rust",
        "RUST please",
        "rust",
        "why does rust, of all things, do this?",
    ] {
        let d = route_of(&reg, &router, text);
        assert_eq!(d.choice, Choice::Route(CODE), "{text:?}");
        assert_eq!(d.why, keywords(&["rust"]), "{text:?}");
    }
    let d = route_of(&reg, &router, "Fix this BUG in my PyThOn");
    assert_eq!(d.choice, Choice::Route(CODE));
    assert_eq!(d.why, keywords(&["bug", "python"]));
}

#[test]
fn keywords_match_whole_words_only() {
    let (reg, router) = lab();
    for text in [
        "a trusty old car",
        "there are bugs in the garden",
        "rusty nails",
        "debug the day",
        "encode decode",
        "rust_lang",
        "rust2",
        "2rust",
        "photography",
        "functional",
    ] {
        let d = route_of(&reg, &router, text);
        assert_eq!(d.choice, Choice::Route(CHAT), "{text:?} hit {:?}", d.why);
        assert_eq!(d.why, Why::NoKeyword, "{text:?}");
    }
    // A later whole-word occurrence still counts after an earlier one inside a word.
    assert_eq!(
        route_of(&reg, &router, "trusty rust").choice,
        Choice::Route(CODE)
    );
    assert_eq!(route_of(&reg, &router, "bugs bug").why, keywords(&["bug"]));
    // Punctuation and line breaks are word edges.
    for text in [
        "(rust)",
        "rust.",
        "\"rust\"",
        "x\nrust\ny",
        "rust-analyzer",
        "¿rust?",
    ] {
        assert_eq!(
            route_of(&reg, &router, text).choice,
            Choice::Route(CODE),
            "{text:?}"
        );
    }
}

#[test]
fn phrases_match_across_one_space() {
    let (reg, router) = lab();
    for text in ["write a unit test for this", "Unit Test it", "UNIT TEST"] {
        let d = route_of(&reg, &router, text);
        assert_eq!(d.choice, Choice::Route(CODE), "{text:?}");
        assert_eq!(d.why, keywords(&["unit test"]), "{text:?}");
    }
    for text in ["unit tests", "unittest", "community test", "unit testing"] {
        assert_eq!(
            route_of(&reg, &router, text).choice,
            Choice::Route(CHAT),
            "{text:?}"
        );
    }
}

#[test]
fn a_route_scores_distinct_keywords() {
    // `berry` first: a tie goes to it; `apple` five times must not outscore two keywords.
    let yaml = routes_yaml(&[
        ("berries", &["berry", "cherry"], false),
        ("apples", &["apple"], false),
    ]);
    let (reg, router) = from_yaml(&yaml);
    let d = route_of(&reg, &router, "apple apple apple apple apple berry");
    assert_eq!(
        d.choice,
        Choice::Route(RouteId(0)),
        "1 distinct keyword each: a tie, to the earlier route"
    );
    assert_eq!(d.why, keywords(&["berry"]));
    let d = route_of(&reg, &router, "apple apple apple apple apple berry cherry");
    assert_eq!(d.choice, Choice::Route(RouteId(0)));
    assert_eq!(d.why, keywords(&["berry", "cherry"]));
    let d = route_of(&reg, &router, "Apple APPLE apple apple apple");
    assert_eq!(d.choice, Choice::Route(RouteId(1)));
    assert_eq!(d.why, keywords(&["apple"]));
}

#[test]
fn the_highest_score_wins() {
    let (reg, router) = lab();
    let d = route_of(&reg, &router, "refactor the code in this photo");
    assert_eq!(d.choice, Choice::Route(CODE));
    assert_eq!(d.why, keywords(&["code", "refactor"]));
    let d = route_of(&reg, &router, "OCR of a screenshot that shows code");
    assert_eq!(d.choice, Choice::Route(VISION));
    assert_eq!(d.why, keywords(&["screenshot", "ocr"]));
}

#[test]
fn ties_go_to_the_earlier_route() {
    let (reg, router) = lab();
    assert_eq!(
        route_of(&reg, &router, "the code in this photo").choice,
        Choice::Route(CODE)
    );
    // The same text with the routes the other way round.
    let yaml = routes_yaml(&[("vision", &["photo"], false), ("code", &["code"], false)]);
    let (reg, router) = from_yaml(&yaml);
    assert_eq!(
        route_of(&reg, &router, "the code in this photo").choice,
        Choice::Route(RouteId(0))
    );
    let yaml = routes_yaml(&[("code", &["code"], false), ("vision", &["photo"], false)]);
    let (reg, router) = from_yaml(&yaml);
    assert_eq!(
        route_of(&reg, &router, "the code in this photo").choice,
        Choice::Route(RouteId(0))
    );
}

#[test]
fn a_keyword_shared_by_two_routes_scores_for_both() {
    let yaml = routes_yaml(&[
        ("a", &["shared"], false),
        ("b", &["shared", "extra"], false),
    ]);
    let (reg, router) = from_yaml(&yaml);
    assert_eq!(
        route_of(&reg, &router, "shared").choice,
        Choice::Route(RouteId(0))
    );
    let d = route_of(&reg, &router, "shared extra");
    assert_eq!(d.choice, Choice::Route(RouteId(1)));
    assert_eq!(d.why, keywords(&["shared", "extra"]));
}

#[test]
fn an_image_part_picks_the_images_route() {
    let (reg, router) = lab();
    let d = router
        .decide(&reg, None, Some("auto"), "refactor this code", true)
        .unwrap();
    assert_eq!(d.choice, Choice::Route(VISION));
    assert_eq!(d.why, Why::Image);
    let d = router.decide(&reg, None, None, "", true).unwrap();
    assert_eq!(d.choice, Choice::Route(VISION));
    // Without the image, the keywords decide.
    let d = router
        .decide(&reg, None, Some("auto"), "refactor this code", false)
        .unwrap();
    assert_eq!(d.choice, Choice::Route(CODE));
}

#[test]
fn an_image_part_without_an_images_route_falls_back_to_keywords() {
    let yaml = routes_yaml(&[("chat", &["hello"], false), ("code", &["code"], false)]);
    let (reg, router) = from_yaml(&yaml);
    let d = router.decide(&reg, None, None, "code", true).unwrap();
    assert_eq!(d.choice, Choice::Route(RouteId(1)));
    let d = router.decide(&reg, None, None, "nothing", true).unwrap();
    assert_eq!(
        (d.choice, d.why),
        (Choice::Route(RouteId(0)), Why::NoKeyword)
    );
}

#[test]
fn no_hit_goes_to_the_default_route() {
    let (reg, router) = lab();
    for text in ["", "hello there", "what is the weather like?"] {
        let d = route_of(&reg, &router, text);
        assert_eq!(d.choice, Choice::Route(CHAT), "{text:?}");
        assert_eq!(d.why, Why::NoKeyword);
        assert_eq!(d.label(&reg), "chat");
        assert_eq!(d.chain(&reg), &[ModelId(4)]);
    }
}

#[test]
fn non_ascii_keywords_match_case_insensitively() {
    let yaml = routes_yaml(&[
        ("code", &["rust"], false),
        ("translate", &["Übersetzung", "größe"], false),
    ]);
    let (reg, router) = from_yaml(&yaml);
    for text in [
        "Bitte eine ÜBERSETZUNG",
        "übersetzung bitte",
        "Die Übersetzung.",
        "GRÖßE",
    ] {
        let d = route_of(&reg, &router, text);
        assert_eq!(d.choice, Choice::Route(RouteId(1)), "{text:?}");
    }
    let d = route_of(&reg, &router, "Übersetzung der Größe");
    assert_eq!(d.why, keywords(&["übersetzung", "größe"]));
    // Whole words still: a longer German word does not hit.
    let d = route_of(&reg, &router, "Übersetzungen und Größenordnung");
    assert_eq!(d.why, Why::NoKeyword);
    // ASCII keywords still fold when the text is lower-cased for Unicode.
    assert_eq!(
        route_of(&reg, &router, "RUST").choice,
        Choice::Route(RouteId(0))
    );
    // Non-ASCII letters are word characters: `rust` inside `rustä` is no hit.
    assert_eq!(route_of(&reg, &router, "rustä").why, Why::NoKeyword);
}

// === names and headers ===

#[test]
fn the_header_forces_a_route() {
    let (reg, router) = lab();
    let d = router
        .decide(
            &reg,
            Some("vision"),
            Some("coder-gpu"),
            "refactor this code",
            false,
        )
        .unwrap();
    assert_eq!(d.choice, Choice::Route(VISION));
    assert_eq!(d.why, Why::Header);
    assert_eq!(d.label(&reg), "vision");
    assert_eq!(d.chain(&reg), &[ModelId(2), ModelId(3)]);
}

#[test]
fn an_unknown_header_route_is_an_error() {
    let (reg, router) = lab();
    let e = unknown(
        router
            .decide(&reg, Some("nosuch"), None, "code", false)
            .unwrap_err(),
    );
    assert_eq!(e.what, "route");
    assert_eq!(e.name, "nosuch");
    assert_eq!(e.valid, "code, vision, chat");
    assert_eq!(
        e.to_string(),
        "route 'nosuch' does not exist; expected one of: code, vision, chat"
    );
    // A model name is not a route.
    assert!(router
        .decide(&reg, Some("coder-gpu"), None, "", false)
        .is_err());
}

#[test]
fn model_naming_a_route_takes_its_chain() {
    let (reg, router) = lab();
    let d = router
        .decide(&reg, None, Some("code"), "hello", false)
        .unwrap();
    assert_eq!(d.choice, Choice::Route(CODE));
    assert_eq!(d.why, Why::RouteName);
    assert_eq!(d.chain(&reg), &[ModelId(0), ModelId(1), ModelId(4)]);
}

#[test]
fn model_naming_a_logical_model_takes_it_alone() {
    let (reg, router) = lab();
    let d = router
        .decide(&reg, None, Some("coder-cpu"), "photo", true)
        .unwrap();
    assert_eq!(d.choice, Choice::Model(ModelId(1)));
    assert_eq!(d.why, Why::ModelName);
    assert_eq!(d.label(&reg), "coder-cpu");
    assert_eq!(d.chain(&reg), &[ModelId(1)]);
}

#[test]
fn model_naming_a_backend_held_by_one_model_takes_it() {
    let (reg, router) = lab();
    let d = router
        .decide(&reg, None, Some("qwen3:4b"), "refactor", false)
        .unwrap();
    assert_eq!(d.choice, Choice::Model(ModelId(4)));
    assert_eq!(d.why, Why::BackendName);
    assert_eq!(d.label(&reg), "small");
    assert_eq!(d.chain(&reg), &[ModelId(4)]);
}

#[test]
fn model_auto_or_absent_routes_by_keyword() {
    let (reg, router) = lab();
    for model in [Some("auto"), None] {
        let d = router.decide(&reg, None, model, "refactor", false).unwrap();
        assert_eq!(d.choice, Choice::Route(CODE), "{model:?}");
        assert_eq!(d.why, keywords(&["refactor"]));
        let d = router.decide(&reg, None, model, "hi", false).unwrap();
        assert_eq!(d.choice, Choice::Route(CHAT), "{model:?}");
    }
}

#[test]
fn an_ambiguous_backend_name_is_an_error_listing_valid_names() {
    let (reg, router) = lab();
    let e = unknown(
        router
            .decide(&reg, None, Some("qwen3-coder:30b"), "code", false)
            .unwrap_err(),
    );
    assert_eq!(e.what, "model");
    assert_eq!(e.name, "qwen3-coder:30b");
    assert_eq!(
        e.valid,
        "auto, code, vision, chat, coder-gpu, coder-cpu, vision-gpu, vision-cpu, small"
    );
    assert!(e.to_string().contains("qwen3-coder:30b"), "{e}");
    assert!(e.to_string().contains("coder-gpu"), "{e}");
}

#[test]
fn an_unknown_model_is_an_error_listing_valid_names() {
    let (reg, router) = lab();
    for name in ["gpt-4o", "Code", "CODER-GPU", "auto "] {
        let e = unknown(
            router
                .decide(&reg, None, Some(name), "code", false)
                .unwrap_err(),
        );
        assert_eq!(e.name, name);
        assert_eq!(
            e.to_string(),
            format!(
                "model '{name}' does not exist; expected one of: auto, code, vision, chat, coder-gpu, coder-cpu, vision-gpu, vision-cpu, small"
            )
        );
    }
}

#[test]
fn why_words_explain_the_decision() {
    let (reg, router) = lab();
    let d = route_of(&reg, &router, "refactor this function");
    assert_eq!(d.why_words(), "keywords matched: refactor, function");
    let d = route_of(&reg, &router, "hi");
    assert_eq!(d.why_words(), "no keyword matched: default route");
}

#[test]
fn a_registry_without_keywords_routes_everything_to_the_default() {
    let yaml = routes_yaml(&[("a", &[], false), ("b", &[], false)]);
    let (reg, router) = from_yaml(&yaml);
    let d = route_of(&reg, &router, "anything at all");
    assert_eq!(
        (d.choice, d.why),
        (Choice::Route(RouteId(0)), Why::NoKeyword)
    );
}

// === scale ===

/// 1,000 routes × 5 keywords and a 10 KB prompt: the right route is chosen. No timing here
/// (that is a benchmark's job); this checks the decision stays right at that size.
#[test]
fn a_thousand_routes_and_a_ten_kilobyte_prompt() {
    let kw = |r: usize, k: usize| format!("k{r:04}x{k}");
    let mut y = String::from(
        "machines:\n  m: { url: \"http://127.0.0.1:9/v1\" }\nmodels:\n  only: { machine: m, name: \"x:1b\" }\nroutes:\n",
    );
    for r in 0..1000 {
        let kws: Vec<String> = (0..5).map(|k| kw(r, k)).collect();
        writeln!(
            y,
            "  - name: r{r:04}\n    keywords: [{}]\n    chain: [only]",
            kws.join(", ")
        )
        .unwrap();
        if r == 0 {
            writeln!(y, "    default: true").unwrap();
        }
    }
    let (reg, router) = from_yaml(&y);
    assert_eq!(reg.routes.len(), 1000);

    let mut prompt = String::new();
    let filler = "the quick brown fox jumps over the lazy dog while we wait ";
    let mut i = 0usize;
    while prompt.len() < 10 * 1024 {
        prompt.push_str(filler);
        match i % 40 {
            // Route 123: one keyword, many times.
            3 => prompt.push_str(&kw(123, 0).to_uppercase()),
            // Route 500: two distinct keywords.
            10 => prompt.push_str(&kw(500, 1)),
            11 => prompt.push_str(&kw(500, 2)),
            // Near misses that are not whole words.
            20 => prompt.push_str(&format!("x{} {}y {}_", kw(7, 0), kw(7, 1), kw(7, 2))),
            _ => {}
        }
        prompt.push(' ');
        i += 1;
    }
    // Route 999 (the last one): three distinct keywords, once each, near the end.
    prompt.push_str(&format!(
        "{}, {} and {}.",
        kw(999, 4),
        kw(999, 0),
        kw(999, 2)
    ));
    assert!(prompt.len() >= 10 * 1024);

    let d = route_of(&reg, &router, &prompt);
    assert_eq!(d.choice, Choice::Route(RouteId(999)), "why: {:?}", d.why);
    assert_eq!(
        d.why,
        Why::Keywords(vec![kw(999, 0), kw(999, 2), kw(999, 4)])
    );

    // Without route 999's words, route 500 (two distinct) beats route 123 (one, many times).
    let cut = prompt.rfind(&kw(999, 4)).unwrap();
    let d = route_of(&reg, &router, &prompt[..cut]);
    assert_eq!(d.choice, Choice::Route(RouteId(500)), "why: {:?}", d.why);
    // A 10 KB prompt with no keyword goes to the default route.
    let plain = filler.repeat(10 * 1024 / filler.len() + 1);
    assert_eq!(
        route_of(&reg, &router, &plain).choice,
        Choice::Route(RouteId(0))
    );
}

// === equivalence with the rule as written ===

/// docs/api.md "Routing a request" as written, the slow way: a keyword hits where it occurs (ASCII
/// letters in either case; the whole text lower-cased first when some keyword is not ASCII) with no
/// letter, digit or `_` touching either end; the most distinct keywords win, ties to the earlier
/// route; no hit, the default route. `Why::Keywords` lists the winner's hits in the order the
/// registry first names them.
fn reference(reg: &Registry, text: &str) -> Routed {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut order: Vec<&str> = Vec::new();
    for r in reg.routes.iter() {
        for k in &r.keywords {
            if !order.contains(&k.as_str()) {
                order.push(k);
            }
        }
    }
    let t = if order.iter().any(|k| !k.is_ascii()) {
        text.to_lowercase()
    } else {
        text.to_string()
    };
    let hit = |k: &str| {
        (0..=t.len()).any(|i| {
            let end = i + k.len();
            t.is_char_boundary(i)
                && end <= t.len()
                && t.is_char_boundary(end)
                && t.as_bytes()[i..end].eq_ignore_ascii_case(k.as_bytes())
                && !t[..i].chars().next_back().is_some_and(word)
                && !t[end..].chars().next().is_some_and(word)
        })
    };
    let hits: Vec<&str> = order.iter().copied().filter(|k| hit(k)).collect();
    let mut best: Option<(usize, usize)> = None;
    for (i, r) in reg.routes.iter().enumerate() {
        let score = r
            .keywords
            .iter()
            .filter(|k| hits.contains(&k.as_str()))
            .count();
        if score > 0 && best.is_none_or(|(_, s)| score > s) {
            best = Some((i, score));
        }
    }
    match best {
        None => Routed {
            choice: Choice::Route(reg.default_route),
            why: Why::NoKeyword,
        },
        Some((i, _)) => Routed {
            choice: Choice::Route(RouteId(i)),
            why: Why::Keywords(
                hits.iter()
                    .filter(|k| reg.routes[RouteId(i)].keywords.iter().any(|m| m == *k))
                    .map(|k| k.to_string())
                    .collect(),
            ),
        },
    }
}

/// xorshift64*: reproducible randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Pieces of text: word characters (ASCII, Latin, Greek with a final-sigma context, Cyrillic,
/// CJK, a title-case digraph, Deseret above the BMP, a Kelvin sign and a dotted capital I
/// that lower-case to other lengths), words longer than 16 bytes, edges (space, punctuation,
/// `¿`, a curly apostrophe, an emoji), a combining mark, control characters.
#[rustfmt::skip]
const TEXT_PIECES: &[&str] = &[
    "a", "b", "c", "ab", "ba", "abc", "A", "B", "C", "AB", "_", "1", "2", " ", " ", " ", "  ", ".",
    "-", "+", "#", "\n", "\t", "ä", "Ä", "ß", "é", "É", "İ", "\u{212A}", "k", "Σ", "σ", "ς", "字",
    "😀", "¿", "\u{301}", "\u{0}", "abcabcabcabcabcabc", "ABCabcABCabcABCabcAB", "ẞ", "ǅ", "Ж", "ж",
    "\u{10400}", "\u{10428}", "\u{2019}", "ΑΣ",
];

const KEYWORD_LETTERS: &[&str] = &[
    "a",
    "b",
    "c",
    "ab",
    "A",
    "B",
    "ä",
    "Ä",
    "é",
    "ß",
    "k",
    "σ",
    "字",
    "1",
    "_",
    "ж",
    "ǆ",
    "\u{10428}",
];

fn random_text(rng: &mut Rng, pieces: usize) -> String {
    (0..pieces).map(|_| rng.pick(TEXT_PIECES)).collect()
}

fn random_keyword(rng: &mut Rng, texts: &[String], ascii: bool) -> String {
    let k = match rng.below(4) {
        // A piece of a text, so odd keywords hit too.
        0 => {
            let t = &texts[rng.below(texts.len())];
            let chars: Vec<char> = t.chars().collect();
            let from = rng.below(chars.len().max(1));
            let longest = if rng.below(4) == 0 { 30 } else { 6 };
            let len = 1 + rng.below(longest);
            chars.iter().skip(from).take(len).collect()
        }
        _ => {
            let mut k = String::new();
            if rng.below(8) == 0 {
                k.push_str(rng.pick(&[".", "#", "+", "¿"]));
            }
            for w in 0..1 + rng.below(3) {
                if w > 0 {
                    k.push_str(rng.pick(&[" ", " ", "-", ".", "  "]));
                }
                // Now and then a word longer than 16 bytes.
                let letters = if rng.below(6) == 0 {
                    6 + rng.below(8)
                } else {
                    1 + rng.below(3)
                };
                for _ in 0..letters {
                    k.push_str(rng.pick(KEYWORD_LETTERS));
                }
            }
            if rng.below(8) == 0 {
                k.push_str(rng.pick(&["+", "++", "."]));
            }
            k
        }
    };
    // What YAML and the registry take: no quotes, backslashes or control characters.
    let k: String = k
        .chars()
        .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
        .filter(|c| !ascii || c.is_ascii())
        .collect();
    if k.trim().is_empty() {
        "a".into()
    } else {
        k
    }
}

/// Random registries and texts: the matcher decides as the rule as written does.
#[test]
fn keyword_routing_matches_the_rule_as_written() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut decisions = 0;
    let mut hit = 0;
    for case in 0..400 {
        let texts: Vec<String> = (0..12)
            .map(|i| {
                let n = if i % 3 == 0 {
                    20 + rng.below(200)
                } else {
                    rng.below(40)
                };
                random_text(&mut rng, n)
            })
            .collect();
        // Half the registries are all ASCII (the text is searched as it is), half not.
        let ascii = case % 2 == 0;
        let n_routes = 1 + rng.below(6);
        let mut routes: Vec<(String, Vec<String>)> = Vec::new();
        for r in 0..n_routes {
            let kws = (0..rng.below(5))
                .map(|_| random_keyword(&mut rng, &texts, ascii))
                .collect();
            routes.push((format!("r{r}"), kws));
        }
        let spec: Vec<(&str, Vec<&str>)> = routes
            .iter()
            .map(|(n, k)| (n.as_str(), k.iter().map(String::as_str).collect()))
            .collect();
        let spec: Vec<(&str, &[&str], bool)> = spec
            .iter()
            .map(|(n, k)| (*n, k.as_slice(), false))
            .collect();
        let (reg, router) = from_yaml(&routes_yaml(&spec));
        for text in &texts {
            let want = reference(&reg, text);
            let got = route_of(&reg, &router, text);
            assert_eq!(got, want, "text {text:?}\nroutes {routes:?}");
            decisions += 1;
            hit += usize::from(want.why != Why::NoKeyword);
        }
    }
    assert!(
        hit > decisions / 8,
        "only {hit} of {decisions} decisions hit a keyword"
    );
}

/// Multi-byte characters across the 64-byte blocks the text is read in, and words that
/// end where the text ends, at every offset around a block edge.
#[test]
fn words_across_block_edges() {
    let yaml = routes_yaml(&[
        ("code", &["rust", "unit test"], false),
        ("odd", &[".net", "c++"], false),
    ]);
    let (reg, router) = from_yaml(&yaml);
    let yaml = routes_yaml(&[("de", &["größe", "rust"], false)]);
    let (reg_de, router_de) = from_yaml(&yaml);
    for pad in 0..200 {
        for filler in [" ", "a", "ä", "😀", "字"] {
            let lead = filler.repeat(pad / filler.len());
            for tail in [
                "rust",
                "ärust",
                "¿rust",
                "rustä",
                "rust😀",
                "字rust",
                "unit test",
                "unit tests",
                " .net",
                "a.net",
                "c++",
                "c++x",
                "GRÖSSE",
                "GRÖßE",
                "größe",
            ] {
                let text = format!("{lead}{tail}");
                assert_eq!(
                    route_of(&reg, &router, &text),
                    reference(&reg, &text),
                    "{text:?}"
                );
                assert_eq!(
                    route_of(&reg_de, &router_de, &text),
                    reference(&reg_de, &text),
                    "{text:?}"
                );
                let text = format!("{lead}{tail} and more");
                assert_eq!(
                    route_of(&reg, &router, &text),
                    reference(&reg, &text),
                    "{text:?}"
                );
            }
        }
    }
}

/// Many phrases that begin with one word (more than are checked one by one): each text
/// decides as the rule as written does.
#[test]
fn many_phrases_with_one_first_word() {
    let phrases = [
        "how", "how a", "how ab", "how b", "how-a", "how  a", "how a b", "how b a", "how.ab",
        "how ab-", "how é", "how_a x",
    ];
    let yaml = routes_yaml(&[
        ("first", &phrases[..6], false),
        ("second", &phrases[6..], false),
        ("third", &["how ab", "b"], false),
    ]);
    let (reg, router) = from_yaml(&yaml);
    let mut rng = Rng(0x0dd5_eed5_0000_0042);
    let pieces = [
        "how", "HOW", "How", " ", " ", "  ", "a", "ab", "AB", "b", "-", ".", "é", "É", "x", "_",
    ];
    for _ in 0..3000 {
        let n = 1 + rng.below(12);
        let text: String = (0..n).map(|_| rng.pick(&pieces)).collect();
        assert_eq!(
            route_of(&reg, &router, &text),
            reference(&reg, &text),
            "{text:?}"
        );
    }
}

/// The unknown name a routing error says.
fn unknown(e: RouteError) -> UnknownName {
    match e {
        RouteError::Unknown(u) => u,
        other => panic!("expected an unknown name, got {other:?}"),
    }
}

// === kinds ===

const KINDS: &str = r#"
machines:
  gpu-box: { url: "http://gpu-box.local:11434/v1" }
models:
  coder-gpu: { machine: gpu-box, name: "qwen3-coder:30b" }
  sdxl:      { machine: gpu-box, name: "sdxl", kind: image }
  flux:      { machine: gpu-box, name: "flux", kind: image }
  bge:       { machine: gpu-box, name: "bge-m3", kind: embed }
routes:
  - name: draw
    keywords: [code, picture]
    images: true
    chain: [sdxl]
  - name: paint
    default: true
    chain: [flux]
  - name: code
    keywords: [code]
    chain: [coder-gpu]
"#;

fn ask<'a>(kind: Kind, model: Option<&'a str>, text: &'a str) -> Ask<'a> {
    Ask {
        kind,
        path: "/v1/images/generations",
        header: None,
        model,
        text,
        has_image: false,
    }
}

#[test]
fn keyword_routing_scores_chat_routes_only() {
    let (reg, router) = from_yaml(KINDS);
    // `draw` lists "code" and "picture", but draws images: a chat request never goes there.
    let r = router
        .decide(&reg, None, None, "code a picture", true)
        .unwrap();
    assert_eq!(r.choice, Choice::Route(RouteId(2)));
}

#[test]
fn auto_on_an_image_endpoint_takes_the_default_image_route() {
    let (reg, router) = from_yaml(KINDS);
    let r = router
        .decide_for(&reg, &ask(Kind::Image, None, "code"))
        .unwrap();
    assert_eq!(
        r.choice,
        Choice::Route(RouteId(1)),
        "paint is marked default"
    );
    let r = router
        .decide_for(&reg, &ask(Kind::Image, Some("draw"), ""))
        .unwrap();
    assert_eq!(r.choice, Choice::Route(RouteId(0)));
    let r = router
        .decide_for(&reg, &ask(Kind::Image, Some("sdxl"), ""))
        .unwrap();
    assert_eq!(r.choice, Choice::Model(ModelId(1)));
}

#[test]
fn a_name_of_another_kind_is_wrong_kind_and_names_the_model_and_the_endpoint() {
    let (reg, router) = from_yaml(KINDS);
    let e = router
        .decide_for(&reg, &ask(Kind::Image, Some("coder-gpu"), ""))
        .unwrap_err();
    assert!(
        matches!(
            e,
            RouteError::WrongKind {
                kind: Kind::Chat,
                needed: Kind::Image,
                ..
            }
        ),
        "{e:?}"
    );
    let words = e.to_string();
    assert!(
        words.contains("coder-gpu") && words.contains("/v1/images/generations"),
        "{words}"
    );
    assert!(words.contains("draw, paint, sdxl, flux"), "{words}");
    let e = router
        .decide(&reg, None, Some("sdxl"), "", false)
        .unwrap_err();
    assert!(matches!(
        e,
        RouteError::WrongKind {
            kind: Kind::Image,
            needed: Kind::Chat,
            ..
        }
    ));
    // Embeddings take an embed model or a chat one (which served them before kinds).
    for name in ["bge", "coder-gpu"] {
        assert!(
            router
                .decide_for(&reg, &ask(Kind::Embed, Some(name), ""))
                .is_ok(),
            "{name}"
        );
    }
}

#[test]
fn auto_on_an_endpoint_whose_kind_has_no_route_is_model_required() {
    let (reg, router) = from_yaml(KINDS);
    let e = router
        .decide_for(&reg, &ask(Kind::Speech, None, ""))
        .unwrap_err();
    assert!(
        matches!(
            e,
            RouteError::Required {
                needed: Kind::Speech,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("(none in the registry)"), "{e}");
}
