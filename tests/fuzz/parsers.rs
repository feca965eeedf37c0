//! Target 4: Retry-After, durations, sizes and the saturating clock.

use std::time::Duration;

use arbitrary::Unstructured;
use labrouter::clock::{after, Instant};
use labrouter::registry::{parse_duration, parse_duration_max, parse_size, DURATION_MAX};
use labrouter::upstream::classify::{retry_after_str, RETRY_AFTER_MAX};

use super::harness::{accepted, nasty, one_in, pick, show};

type R<T> = arbitrary::Result<T>;

const DAYS: &[&str] = &["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Fry", ""];
const MONTHS: &[&str] = &[
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Foo",
];

/// An HTTP date (RFC 2822 / 7231 shapes), often with fields out of range.
fn date(u: &mut Unstructured<'_>) -> R<String> {
    let year = *pick(
        u,
        &[0i64, 1, 1900, 1970, 2026, 2027, 9999, 10000, 99999, -1],
    )?;
    let year = if one_in(u, 2)? {
        year
    } else {
        u.int_in_range(1900..=2100)?
    };
    let day = u.int_in_range(0..=32)?;
    let (h, m, s) = (
        u.int_in_range(0..=25)?,
        u.int_in_range(0..=61)?,
        u.int_in_range(0..=61)?,
    );
    let zone = *pick(
        u,
        &[
            "GMT", "UT", "UTC", "+0000", "-2359", "+2400", "EST", "Z", "",
        ],
    )?;
    let wd = *pick(u, DAYS)?;
    let mon = *pick(u, MONTHS)?;
    Ok(match u.int_in_range(0..=2)? {
        0 => format!("{wd}, {day:02} {mon} {year} {h:02}:{m:02}:{s:02} {zone}"),
        1 => format!("{day} {mon} {year} {h}:{m} {zone}"),
        _ => format!("{wd} {mon} {day} {h:02}:{m:02}:{s:02} {year}"),
    })
}

fn number(u: &mut Unstructured<'_>) -> R<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => u.arbitrary::<u64>()?.to_string(),
        1 => u.arbitrary::<i64>()?.to_string(),
        2 => u.arbitrary::<f64>()?.to_string(),
        3 => format!("{:e}", u.arbitrary::<f64>()?),
        4 => format!(
            "{}.{}",
            u.int_in_range(0..=200_000u32)?,
            u.int_in_range(0..=999u32)?
        ),
        _ => (*pick(
            u,
            &[
                "NaN",
                "inf",
                "-inf",
                "1e30",
                "-5",
                "-0.0",
                "18446744073709551615",
                "18446744073709551616",
                "86400",
                "86401",
                "86400.000000001",
                "1e-10",
                "0x10",
                "+5",
                " 5 ",
                "5s",
            ],
        )?)
        .to_string(),
    })
}

/// A duration's text: digit runs and unit runs, valid or not.
fn duration_text(u: &mut Unstructured<'_>) -> R<String> {
    let mut s = String::new();
    if one_in(u, 8)? {
        s.push(' ');
    }
    for _ in 0..u.int_in_range(0..=4)? {
        s.push_str(&match u.int_in_range(0..=3)? {
            0 => u.arbitrary::<u64>()?.to_string(),
            1 => "9".repeat(u.int_in_range(1..=30)?),
            _ => u.int_in_range(0..=100_000u32)?.to_string(),
        });
        s.push_str(pick(
            u,
            &[
                "ms", "s", "m", "h", "d", "", "S", "us", " ", "ms ", "µs", "y",
            ],
        )?);
    }
    Ok(s)
}

/// Independent reference for `parse_duration_max`: exact sums in u128 nanoseconds.
fn duration_oracle(s: &str, max: Duration) -> Option<Duration> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        // More digits than fit a u128 are far beyond any bound anyway.
        let n: u128 = rest[..digits].parse().unwrap_or(u128::MAX / 2);
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let nanos: u128 = match &rest[..unit_len] {
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return None,
        };
        total = total.saturating_add(n.saturating_mul(nanos));
        rest = &rest[unit_len..];
    }
    let total = u64::try_from(total / 1_000_000_000)
        .ok()
        .map(|secs| Duration::new(secs, (total % 1_000_000_000) as u32))?;
    (total <= max).then_some(total)
}

fn size_text(u: &mut Unstructured<'_>) -> R<String> {
    let n = match u.int_in_range(0..=2)? {
        0 => u.arbitrary::<u64>()?.to_string(),
        1 => "9".repeat(u.int_in_range(1..=25)?),
        _ => u.int_in_range(0..=4096u32)?.to_string(),
    };
    let unit = *pick(
        u,
        &[
            "", "B", "KiB", "MiB", "GiB", "KB", "kB", "MB", "GB", " MiB", "TiB", "k", "-1",
        ],
    )?;
    Ok(format!("{n}{unit}"))
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    // Retry-After: never more than a day, never a panic.
    let ra = match u.int_in_range(0..=3)? {
        0 => number(u)?,
        1 => date(u)?,
        2 => (*pick(
            u,
            &[
                "Fri, 31 Dec 9999 23:59:59 GMT",
                "Thu, 01 Jan 1970 00:00:00 GMT",
                "Mon, 01 Jan 0001 00:00:00 GMT",
                "Sun, 06 Nov 1994 08:49:37 GMT",
            ],
        )?)
        .to_string(),
        _ => nasty(u)?,
    };
    show("retry-after", &ra);
    let got = retry_after_str(&ra);
    show("retry_after_str", &got);
    if let Some(d) = got {
        assert!(d <= RETRY_AFTER_MAX, "Retry-After {ra:?} gave {d:?}");
    }
    if let Ok(secs) = ra.trim().parse::<u64>() {
        assert_eq!(got, Some(Duration::from_secs(secs).min(RETRY_AFTER_MAX)));
    } else if let Ok(secs) = ra.trim().parse::<f64>() {
        assert_eq!(
            got.is_some(),
            secs.is_finite() && secs >= 0.0,
            "{ra:?} gave {got:?}"
        );
    }

    // Durations: the library agrees with an exact reference, and stays within its bounds.
    let text = if one_in(u, 4)? {
        nasty(u)?
    } else {
        duration_text(u)?
    };
    show("duration", &text);
    let d = parse_duration(&text);
    if d.is_ok() {
        accepted();
    }
    assert_eq!(
        d.as_ref().ok().copied(),
        duration_oracle(&text, DURATION_MAX),
        "parse_duration({text:?}) = {d:?}"
    );
    let max = Duration::from_millis(u.arbitrary::<u64>()? % (DURATION_MAX.as_millis() as u64 + 1));
    let dm = parse_duration_max(&text, max);
    assert_eq!(
        dm.as_ref().ok().copied(),
        duration_oracle(&text, max),
        "parse_duration_max({text:?}, {max:?}) = {dm:?}"
    );

    // Sizes: exact or an error.
    let size = if one_in(u, 4)? {
        nasty(u)?
    } else {
        size_text(u)?
    };
    show("size", &size);
    if let Ok(n) = parse_size(&size) {
        let t = size.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let base: u128 = t[..digits].parse().expect("Ok means digits");
        let mult: u128 = match t[digits..].trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            other => panic!("parse_size({size:?}) accepted unit {other:?}"),
        };
        assert_eq!(n as u128, base * mult, "parse_size({size:?})");
    }

    // The clock: `now + d` saturates, never panics, never goes back.
    let d = match u.int_in_range(0..=3)? {
        0 => Duration::MAX,
        1 => Duration::new(u.arbitrary()?, u.int_in_range(0..=999_999_999)?),
        2 => Duration::from_secs(u.int_in_range(0..=200 * 365 * 86_400)?),
        _ => d.unwrap_or(RETRY_AFTER_MAX),
    };
    show("clock duration", &d);
    let now = Instant::now();
    let then = after(now, d);
    assert!(then >= now);
    if let Some(exact) = now.checked_add(d) {
        assert_eq!(then, exact);
    } else {
        assert!(then > now, "a huge duration still lands in the future");
    }
    Ok(())
}
