//! What a routing decision costs (docs/api.md "Routing a request"): `Matcher::decide` for a 10 KB prompt over a
//! registry of 1,000 routes × 5 keywords (5,000 distinct keywords, one- and two-word).
//! Nothing is contacted: the machines only need valid URLs. Run: `cargo bench --bench route`.
//!
//! Cases: English prose with a few keywords (what prompts look like); made-up words close to
//! the keywords (near misses built from the same syllables) with keywords of a few routes, with
//! none (falls to the default route), and dense with keywords of 200 routes (worst case for
//! scoring); prose that is not ASCII, searched as it is and, when some keyword is not ASCII,
//! lower-cased first; a route named by `model` (no text scan); building the router and
//! parsing the registry (once per load or reload).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write;
use std::sync::OnceLock;

use divan::{black_box, Bencher};
use labrouter::registry::Registry;
use labrouter::route::{Matcher, Why};

const ROUTES: usize = 1_000;
const KEYWORDS: usize = 5;
const PROMPT_BYTES: usize = 10 * 1024;

fn main() {
    divan::main();
}

/// A pronounceable made-up word for `n`, so keywords look like words and share prefixes
/// with each other and with the prompt's filler (the search has real work to do).
fn word(mut n: usize) -> String {
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ren", "tas", "vo", "qui", "pel", "dor", "sen", "ba", "tri", "gu", "zel",
        "fa", "nor",
    ];
    let mut w = String::new();
    loop {
        w.push_str(SYL[n % SYL.len()]);
        n /= SYL.len();
        if n == 0 {
            break;
        }
    }
    w
}

fn keyword(route: usize, k: usize) -> String {
    let n = route * KEYWORDS + k + 100;
    // Every fifth keyword is a phrase, as registries have ("unit test").
    if k == 4 {
        format!("{} {}", word(n), word(n / 7 + 3))
    } else {
        word(n)
    }
}

struct Fixture {
    reg: Registry,
    router: Matcher,
    yaml: String,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| build_fixture(""))
}

/// The same registry with one more route whose keyword is not ASCII: a text that is not
/// ASCII is then lower-cased (a copy) before the search.
fn fixture_unicode() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| build_fixture("  - { name: de, keywords: [\"größe\"], chain: [m] }\n"))
}

fn build_fixture(extra: &str) -> Fixture {
    let mut y = String::from(
        "server: { listen: 127.0.0.1:0, state_dir: /tmp/labrouter-bench-route }\n\
         machines:\n  box: { url: \"http://127.0.0.1:9/v1\" }\n\
         models:\n  m: { machine: box, name: m }\n\
         routes:\n  - { name: chat, default: true, chain: [m] }\n",
    );
    for r in 0..ROUTES {
        let kws: Vec<String> = (0..KEYWORDS)
            .map(|k| format!("\"{}\"", keyword(r, k)))
            .collect();
        writeln!(
            y,
            "  - {{ name: r{r}, keywords: [{}], chain: [m] }}",
            kws.join(", ")
        )
        .unwrap();
    }
    y.push_str(extra);
    let reg = Registry::parse(&y, "bench.yaml").expect("the bench registry is valid");
    assert_eq!(
        reg.routes.len(),
        ROUTES + 1 + usize::from(!extra.is_empty())
    );
    let router = Matcher::new(&reg);
    Fixture {
        reg,
        router,
        yaml: y,
    }
}

/// ~10 KB of text: filler words built from the same syllables (near misses for the
/// search), with a keyword every `every` words drawn from `routes` distinct routes.
fn prompt(every: usize, routes: usize) -> String {
    let mut p = String::with_capacity(PROMPT_BYTES + 64);
    let mut i = 0usize;
    while p.len() < PROMPT_BYTES {
        let w = if every > 0 && i % every == every - 1 {
            let r = (i / every) % routes.max(1) * (ROUTES / routes.max(1));
            keyword(r, (i / every) % KEYWORDS)
        } else {
            // Filler: never a keyword (those start at 100) and never touches one as a word.
            format!("{}x", word(i % 97))
        };
        p.push_str(&w);
        p.push_str(if i % 13 == 12 { ".\n" } else { " " });
        i += 1;
    }
    p.truncate(PROMPT_BYTES);
    p
}

fn run(b: Bencher, text: String, model: Option<&'static str>, expect: fn(&Why) -> bool) {
    run_on(fixture(), b, text, model, expect);
}

fn run_on(
    f: &Fixture,
    b: Bencher,
    text: String,
    model: Option<&'static str>,
    expect: fn(&Why) -> bool,
) {
    // Prove the prompt does what its case says before timing it.
    let d = f.router.decide(&f.reg, None, model, &text, false).unwrap();
    assert!(expect(&d.why), "unexpected decision: {}", d.why_words());
    b.bench(|| {
        f.router
            .decide(&f.reg, None, black_box(model), black_box(&text), false)
            .unwrap()
    });
}

/// The usual case: keywords of three routes in the prompt, one keyword every 50 words.
#[divan::bench]
fn decide_10kb_some_hits(b: Bencher) {
    run(
        b,
        prompt(50, 3),
        Some("auto"),
        |w| matches!(w, Why::Keywords(k) if k.len() >= 2),
    );
}

/// English prose (an error report and a request) with three keywords of two routes: what
/// prompts look like; the automaton rarely gets past a word's first letters.
#[divan::bench]
fn decide_10kb_prose(b: Bencher) {
    let para = "Please look at the parser below: when the config file has an empty value it \
        returns an error instead of the default, and the tests in the module fail on the CI \
        machine but pass on my laptop. Explain what happens, step by step, and suggest a fix \
        that keeps the public interface as it is. ";
    let mut text = String::new();
    while text.len() < PROMPT_BYTES {
        if text.len() > PROMPT_BYTES / 2 && !text.contains(&keyword(7, 0)) {
            text.push_str(&format!(
                "{} {} {}. ",
                keyword(7, 0),
                keyword(7, 1),
                keyword(9, 2)
            ));
        }
        text.push_str(para);
    }
    text.truncate(PROMPT_BYTES);
    run(
        b,
        text,
        Some("auto"),
        |w| matches!(w, Why::Keywords(k) if k.len() == 2),
    );
}

/// Prose that is not ASCII (German, Russian, Chinese) with the same three keywords.
fn non_ascii_prose() -> String {
    let para = "Bitte prüfe den Parser: wenn die Konfigurationsdatei einen leeren Wert enthält, \
        gibt er einen Fehler zurück statt des Standardwerts. Почему тесты модуля падают на \
        сервере сборки, но проходят на моём ноутбуке? 请逐步解释发生了什么，并提出一个保持公共\
        接口不变的修复方案。 ";
    let mut text = String::new();
    while text.len() < PROMPT_BYTES {
        if text.len() > PROMPT_BYTES / 2 && !text.contains(&keyword(7, 0)) {
            text.push_str(&format!(
                "{} {} {}. ",
                keyword(7, 0),
                keyword(7, 1),
                keyword(9, 2)
            ));
        }
        text.push_str(para);
    }
    let mut end = PROMPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// Prose that is not ASCII: each non-ASCII character is decoded to tell letters from the
/// rest; the registry's keywords are all ASCII, so the text is searched as it is.
#[divan::bench]
fn decide_10kb_non_ascii(b: Bencher) {
    run(
        b,
        non_ascii_prose(),
        Some("auto"),
        |w| matches!(w, Why::Keywords(k) if k.len() == 2),
    );
}

/// The same prose when some keyword is not ASCII: the text is lower-cased (a copy) first.
#[divan::bench]
fn decide_10kb_non_ascii_folded(b: Bencher) {
    run_on(
        fixture_unicode(),
        b,
        non_ascii_prose(),
        Some("auto"),
        |w| matches!(w, Why::Keywords(k) if k.len() == 2),
    );
}

/// No keyword anywhere: the whole prompt is scanned, then the default route.
#[divan::bench]
fn decide_10kb_no_hit(b: Bencher) {
    run(b, prompt(0, 1), Some("auto"), |w| *w == Why::NoKeyword);
}

/// Worst case: a keyword every 4 words, from 200 different routes.
#[divan::bench]
fn decide_10kb_dense_hits(b: Bencher) {
    run(b, prompt(4, 200), Some("auto"), |w| {
        matches!(w, Why::Keywords(_))
    });
}

/// `model: code`: a route named directly; the text is never scanned.
#[divan::bench]
fn decide_by_route_name(b: Bencher) {
    run(b, prompt(50, 3), Some("r999"), |w| *w == Why::RouteName);
}

/// Compiling the 5,000 keywords (once per registry load or reload).
#[divan::bench(sample_count = 10)]
fn build_router(b: Bencher) {
    let f = fixture();
    b.bench(|| Matcher::new(black_box(&f.reg)));
}

/// Parsing and validating the 1,000-route registry YAML (once per load or reload).
#[divan::bench(sample_count = 10)]
fn parse_registry(b: Bencher) {
    let f = fixture();
    b.bench(|| Registry::parse(black_box(&f.yaml), "bench.yaml").unwrap());
}
