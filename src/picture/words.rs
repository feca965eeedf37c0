//! The picture's words: a machine's month in a few words, short dates for the day axis, and
//! the photo's one-line caption.

use crate::history::{Day, History};

/// A machine's totals over the span: trips and seconds open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    pub trips: u32,
    pub open_s: f64,
}

impl Totals {
    pub fn of(days: &[Day]) -> Totals {
        Totals {
            trips: days.iter().map(|d| d.trips).sum(),
            open_s: days
                .iter()
                .map(|d| d.open_s)
                .filter(|s| s.is_finite())
                .sum(),
        }
    }

    /// "3 trips · 41 min open", "1 trip · 20 s open", "no trips".
    pub fn words(&self) -> String {
        if self.trips == 0 && self.open_s < 1.0 {
            return "no trips".to_string();
        }
        let trips = match self.trips {
            1 => "1 trip".to_string(),
            n => format!("{n} trips"),
        };
        format!("{trips} · {} open", duration(self.open_s))
    }
}

/// Seconds in the largest one or two units that say it: "20 s", "41 min", "2 h 5 min",
/// "3 d 4 h".
pub fn duration(secs: f64) -> String {
    let s = if secs.is_finite() {
        secs.max(0.0).round() as u64
    } else {
        0
    };
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        3600..=86_399 => match (s % 3600) / 60 {
            0 => format!("{} h", s / 3600),
            m => format!("{} h {m} min", s / 3600),
        },
        _ => match (s % 86_400) / 3600 {
            0 => format!("{} d", s / 86_400),
            h => format!("{} d {h} h", s / 86_400),
        },
    }
}

/// `2026-12-06` as "6 Dec"; anything else as given.
pub fn short_date(day: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut parts = day.splitn(3, '-').skip(1);
    let month = parts.next().and_then(|m| m.parse::<usize>().ok());
    let dom = parts.next().and_then(|d| d.parse::<u32>().ok());
    match (month, dom) {
        (Some(m @ 1..=12), Some(d)) => format!("{d} {}", MONTHS[m - 1]),
        _ => day.to_string(),
    }
}

/// The photo's caption: "labrouter · 30 days to 2026-12-06 · flakiest: gpu-box (3 trips,
/// 41 min open)", or "… · no trips" for a quiet month. Plain text (no parse mode), so
/// nothing in it needs escaping.
pub fn caption(h: &History) -> String {
    let last = h.days.last().map_or("today", String::as_str);
    let head = format!("labrouter · {} days to {last}", h.days.len());
    let flakiest = h.flakiest_first().into_iter().next().and_then(|name| {
        let t = Totals::of(h.machines.get(name)?);
        (t.trips > 0 || t.open_s >= 1.0).then_some((name, t))
    });
    match flakiest {
        Some((name, t)) => {
            let trips = match t.trips {
                1 => "1 trip".to_string(),
                n => format!("{n} trips"),
            };
            format!(
                "{head} · flakiest: {name} ({trips}, {} open)",
                duration(t.open_s)
            )
        }
        None => format!("{head} · no trips"),
    }
}
