//! Writes the README's sample digest picture from a hand-made month of a four-machine lab.
//!
//! `cargo run --example digest_png -- docs/digest.png`
//!
//! The month: gpu-box flaky (three bad evenings, one long outage), ubuntu-box tripped once,
//! mac-mini and local clean. No store, no network: the same renderer the digest uses.

use std::collections::BTreeMap;
use std::process::ExitCode;

use labrouter::history::{Day, History};

fn day(name: &str, trips: u32, open_s: f64) -> Day {
    Day {
        day: name.to_string(),
        trips,
        open_s,
        served: 400,
        ..Day::default()
    }
}

/// 30 days to 2026-12-06 in Europe/Berlin, with trips on the days given as (days back,
/// trips, seconds open).
fn month(events: &[(usize, u32, f64)]) -> (Vec<String>, Vec<Day>) {
    let end = jiff::civil::date(2026, 12, 6);
    let days: Vec<String> = (0..30i64)
        .rev()
        .filter_map(|back| end.checked_sub(jiff::Span::new().days(back)).ok())
        .map(|d| d.to_string())
        .collect();
    let rows = days
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let back = days.len() - 1 - i;
            match events.iter().find(|(b, _, _)| *b == back) {
                Some((_, trips, open)) => day(d, *trips, *open),
                None => day(d, 0, 0.0),
            }
        })
        .collect();
    (days, rows)
}

fn main() -> ExitCode {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: cargo run --example digest_png -- FILE.png");
        return ExitCode::FAILURE;
    };
    let (days, gpu) = month(&[
        (0, 1, 95.0),
        (3, 2, 2460.0),
        (4, 1, 480.0),
        (12, 3, 5400.0),
        (20, 1, 40.0),
    ]);
    let (_, ubuntu) = month(&[(9, 1, 130.0)]);
    let (_, quiet) = month(&[]);
    let machines = BTreeMap::from([
        ("gpu-box".to_string(), gpu),
        ("ubuntu-box".to_string(), ubuntu),
        ("mac-mini".to_string(), quiet.clone()),
        ("local".to_string(), quiet),
    ]);
    let history = History {
        timezone: "Europe/Berlin".to_string(),
        days,
        machines,
    };
    let png = match labrouter::picture::render(&history) {
        Ok(png) => png,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(&out, &png) {
        eprintln!("cannot write {out}: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!("{out}: {} bytes", png.len());
    eprintln!("caption: {}", labrouter::picture::caption(&history));
    ExitCode::SUCCESS
}
