//! The loop every target runs in: seeded random inputs, counted, bounded by a case count
//! (CI) or by wall-clock seconds (`LABROUTER_FUZZ_SECONDS=N`), on stable Rust.
//!
//! Each case is a buffer of random bytes read through [`arbitrary::Unstructured`], so a
//! target decides how structured its input is. Case `i` of seed `s` is always the same
//! input: a panic prints both, and `LABROUTER_FUZZ_SEED=s LABROUTER_FUZZ_CASE=i` reruns
//! only that case with the target's [`show`] output on.

// A fuzz budget is wall-clock seconds: std's clock on purpose.
#![allow(clippy::disallowed_types)]

use std::cell::Cell;
use std::fmt::Debug;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arbitrary::Unstructured;

/// The fixed seed of a CI run, so CI sees the same inputs every time.
const CI_SEED: u64 = 0x1ab7_007e_5f02;
/// A CI run of one target stops after this long even if its case count is not reached.
const CI_CAP: Duration = Duration::from_secs(8);

/// splitmix64: tiny, fast, and good enough to spread fuzz inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v:?}: expected a whole number"),
    }
}

/// Whether this run replays one case, and so prints what the target [`show`]s.
fn replaying() -> bool {
    static ONE: OnceLock<bool> = OnceLock::new();
    *ONE.get_or_init(|| env_u64("LABROUTER_FUZZ_CASE").is_some())
}

/// Prints `what` when one case is replayed; costs nothing otherwise.
pub fn show(label: &str, what: &dyn Debug) {
    if replaying() {
        eprintln!("  {label}: {what:?}");
    }
}

thread_local! {
    static ACCEPTED: Cell<u64> = const { Cell::new(0) };
}

/// Counts an input the code under test accepted (parsed OK), to show how deep a run went.
pub fn accepted() {
    ACCEPTED.with(|a| a.set(a.get() + 1));
}

/// Prints the seed and case of the input that panicked.
struct Witness<'a> {
    target: &'a str,
    seed: u64,
    case: u64,
}

impl Drop for Witness<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "fuzz {}: PANIC on case {} of seed {}; rerun it alone with \
                 LABROUTER_FUZZ_SEED={} LABROUTER_FUZZ_CASE={} cargo test --test fuzz {} -- --nocapture",
                self.target, self.case, self.seed, self.seed, self.case, self.target
            );
        }
    }
}

/// Runs `one` on random inputs: `ci_cases` of them by default, or as many as fit in
/// `LABROUTER_FUZZ_SECONDS`. Returns how many ran. `one` returning `Err` (input used up)
/// still counts as a case run.
pub fn fuzz(
    target: &str,
    ci_cases: u64,
    mut one: impl FnMut(&mut Unstructured<'_>) -> arbitrary::Result<()>,
) -> u64 {
    let seconds = env_u64("LABROUTER_FUZZ_SECONDS");
    let only = env_u64("LABROUTER_FUZZ_CASE");
    let seed = env_u64("LABROUTER_FUZZ_SEED").unwrap_or_else(|| match seconds {
        // A long run explores new inputs each time; its seed is printed to replay it.
        Some(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(CI_SEED, |d| d.as_nanos() as u64),
        None => CI_SEED,
    });
    let start = Instant::now();
    let (cases, deadline) = match (only, seconds) {
        (Some(case), _) => (case..case.saturating_add(1), None),
        (None, Some(s)) => (0..u64::MAX, Some(start + Duration::from_secs(s))),
        (None, None) => (0..ci_cases, Some(start + CI_CAP)),
    };
    let mut witness = Witness {
        target,
        seed,
        case: 0,
    };
    let mut buf = Vec::new();
    let mut count = 0u64;
    ACCEPTED.with(|a| a.set(0));
    for case in cases {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        witness.case = case;
        input(seed, case, &mut buf);
        let _ = one(&mut Unstructured::new(&buf));
        count += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {target}: {count} inputs, no panic ({:.0} inputs/s, {secs:.1} s, {} accepted, seed {seed})",
        count as f64 / secs.max(1e-9),
        ACCEPTED.with(Cell::get),
    );
    count
}

/// Case `case` of `seed`: random bytes, mostly short, sometimes a few KiB.
fn input(seed: u64, case: u64, buf: &mut Vec<u8>) {
    let mut rng = Rng::new(seed ^ case.wrapping_mul(0xd6e8_feb8_6659_fd93));
    let len = match rng.below(8) {
        0..=2 => rng.below(64),
        3..=6 => rng.below(1024),
        _ => rng.below(8192),
    };
    buf.resize(len, 0);
    rng.fill(buf);
}

// Small generators the targets share.

/// True one time in `n`.
pub fn one_in(u: &mut Unstructured<'_>, n: u32) -> arbitrary::Result<bool> {
    Ok(u.int_in_range(0..=n.saturating_sub(1))? == 0)
}

/// True one time in `n`, and never once the input is used up (when [`one_in`] always is).
pub fn rarely(u: &mut Unstructured<'_>, n: u32) -> arbitrary::Result<bool> {
    Ok(!u.is_empty() && one_in(u, n)?)
}

/// One of `items`.
pub fn pick<'a, T>(u: &mut Unstructured<'_>, items: &'a [T]) -> arbitrary::Result<&'a T> {
    u.choose(items)
}

/// Text that has broken parsers before: huge and negative numbers, non-finite floats,
/// durations beyond any bound, YAML and JSON syntax, odd unicode.
pub const NASTY: &[&str] = &[
    "",
    " ",
    "0",
    "-0",
    "-1",
    "-5",
    "1",
    "+5",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999",
    "340282366920938463463374607431768211456",
    "1e30",
    "1e308",
    "1e309",
    "-1e309",
    "1.7976931348623157e308",
    "4.9e-324",
    "0.5",
    "1.0",
    "0x10",
    "0o17",
    "1_000",
    "NaN",
    "nan",
    ".nan",
    "inf",
    "-inf",
    ".inf",
    "Infinity",
    "null",
    "~",
    "true",
    "false",
    "yes",
    "no",
    "[]",
    "{}",
    "99999999999999999999h",
    "18446744073709551615ms",
    "18446744073709551615s",
    "18446744073709551615d",
    "213503982334601d",
    "3650d",
    "3651d",
    "30d",
    "31d",
    "720h",
    "721h",
    "2592000s",
    "2592001s",
    "2592000000ms",
    "2592000001ms",
    "29d23h59m60s",
    "1d1ms",
    "0s",
    "0ms",
    "250ms",
    "1m30s",
    "5ms5ms",
    "5 s",
    "5",
    "s",
    "ms",
    "1h1",
    "1µs",
    "１s",
    "٣s",
    "16MiB",
    "18446744073709551615GiB",
    "17179869184GiB",
    "0B",
    "1 KiB",
    "\u{0}",
    "\u{7f}",
    "\u{feff}",
    "\u{202e}",
    "\u{2028}",
    "\u{fffd}",
    "𝕏",
    "é",
    "e\u{301}",
    "\r\n",
    "\t",
    "'",
    "\"",
    "\\",
    "\\u0000",
    "#",
    "&a",
    "*a",
    "!!str",
    "!!binary",
    "%YAML 1.2",
    "---",
    "...",
    ": ",
    "? ",
    "- ",
    "|",
    ">",
    "@",
    "`",
    "[DONE]",
    "auto",
];

/// A short string: often from [`NASTY`], else arbitrary unicode.
pub fn nasty(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0..=3)? {
        0 | 1 => (*pick(u, NASTY)?).to_string(),
        2 => format!("{}{}", pick(u, NASTY)?, pick(u, NASTY)?),
        _ => {
            let s: String = u.arbitrary()?;
            s.chars().take(24).collect()
        }
    })
}
