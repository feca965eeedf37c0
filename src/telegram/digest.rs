//! The daily digest (README "Telegram") as a pure function of its inputs: ledger rows, counter
//! samples, `now`, the time zone, the machines' current states and the host's health.
//! No clock, no store, no network: the caller gathers, [`render`] words.
//!
//! Words used: a *trip* is a breaker opening from closed (a failed probe re-opening it is
//! the same outage, not a new trip); *time open* runs from the trip to the next `closed`
//! (or now), clipped to the last 24 h; *rejected locally* is calls the breaker or the
//! bulkhead kept from the machine without a network call (the counter delta over the 24 h);
//! *rerouted* counts requests this machine skipped or failed that another target then
//! served (a counter the chain walk keeps; its delta over the 24 h, like rejections).
//!
//! Tasks (docs/api.md "Tasks"), when the store has any: how many *finished* in the last 24 h by
//! status; how many *waited out an outage* — succeeded after being held back by breakers,
//! walked and found nothing to serve them, or queued behind such a task (see
//! [`outage_wait`]) — and the longest such wait; and which failed or expired.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::text::{bold, escape, gib, split, LIMIT};
use crate::outcome::words::rounded as human;
use crate::outcome::Phase;

mod tasks;

use tasks::tasks_paragraph;
pub use tasks::{
    down_spans, outage_wait, waits, FailedTask, Succeeded, Tasks, Waits, FAILED_SHOWN,
};

/// The window of the per-machine lines.
pub const DAY_MS: i64 = 24 * 3600 * 1000;
/// The window of "tripped most".
pub const MONTH_MS: i64 = 30 * DAY_MS;

/// One ledger row, as much as the digest needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub at_ms: i64,
    pub machine: String,
    pub from: Phase,
    pub to: Phase,
    pub reason: String,
    pub failures: i64,
}

/// A periodic snapshot of one machine's cumulative counters. Counters restart at zero
/// with the process, so each sample names its process by start time (`boot_ms`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub boot_ms: i64,
    pub machine: String,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    /// Requests this machine skipped or failed that another target served.
    pub rerouted: u64,
}

/// A machine as it is now.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineNow {
    pub name: String,
    pub state: Phase,
    /// The live counters, when rendered inside the router (a final sample at `now`).
    pub counters: Option<Sample>,
}

/// The orchestrator's own health (from [`crate::host::stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Host {
    pub hostname: Option<String>,
    pub uptime_s: Option<u64>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub load_1m: Option<f64>,
}

impl From<&crate::host::Stats> for Host {
    fn from(s: &crate::host::Stats) -> Host {
        Host {
            hostname: s.hostname.clone(),
            uptime_s: s.uptime_s,
            mem_used_bytes: s.mem_used_bytes,
            mem_total_bytes: s.mem_total_bytes,
            load_1m: s.load_1m.flatten(),
        }
    }
}

/// Everything one digest is made of.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub now: Timestamp,
    pub tz: &'a TimeZone,
    /// Ledger rows, oldest first; at least the last 30 days (earlier ones tell the state at
    /// the window's start). Rows of machines not in `machines` are ignored.
    pub rows: &'a [Row],
    /// Counter samples, oldest first.
    pub samples: &'a [Sample],
    /// Trips per machine in the last 30 days as the store counted them; `None`: count
    /// them from `rows`, which then hold the 30 days.
    pub month_trips: Option<&'a [(String, u32)]>,
    /// The machines of the current registry, in registry order.
    pub machines: &'a [MachineNow],
    pub host: &'a Host,
    /// The day's tasks; `None` when the store has none (then no task lines).
    pub tasks: Option<&'a Tasks>,
}

/// One machine's last 24 hours.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Day {
    pub trips: u32,
    /// Trip reasons in plain words with how often each came, most frequent first.
    pub reasons: Vec<(String, u32)>,
    pub open_total: Duration,
    pub open_longest: Duration,
    pub rejected: u64,
    pub rerouted: u64,
}

/// A trip: closed (or nothing known) to any not-closed state other than half-open.
fn is_trip(r: &Row) -> bool {
    Phase::is_trip(r.from, r.to)
}

/// The counted figures of one machine (public so tests can check numbers, not wording).
pub fn day(input: &Input<'_>, machine: &MachineNow) -> Day {
    let now = input.now.as_millisecond();
    let start = now - DAY_MS;
    let rows: Vec<&Row> = input
        .rows
        .iter()
        .filter(|r| r.machine == machine.name)
        .collect();
    let mut d = Day::default();
    let mut reasons: BTreeMap<String, u32> = BTreeMap::new();
    let mut down_since: Option<i64> = None;
    let close = |from: i64, to: i64, d: &mut Day| {
        let (a, b) = (from.max(start), to.min(now));
        if b > a {
            let len = Duration::from_millis((b - a) as u64);
            d.open_total += len;
            d.open_longest = d.open_longest.max(len);
        }
    };
    for r in &rows {
        match (down_since, r.to.is_down()) {
            (None, true) => down_since = Some(r.at_ms),
            (Some(since), false) => {
                close(since, r.at_ms, &mut d);
                down_since = None;
            }
            _ => {}
        }
        if r.at_ms < start || r.at_ms > now {
            continue;
        }
        if is_trip(r) {
            d.trips += 1;
            *reasons.entry(r.reason.clone()).or_default() += 1;
        }
    }
    if let Some(since) = down_since {
        // Still down by the ledger. If the router now says closed (a stale verdict was
        // dropped at start without a row), the outage ended at the last row we have.
        let end = if machine.state.is_down() {
            now
        } else {
            rows.last().map_or(now, |r| r.at_ms)
        };
        close(since, end, &mut d);
    }
    let mut reasons: Vec<(String, u32)> = reasons.into_iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    d.reasons = reasons;
    d.rejected = increase(input, machine, start, |s| s.local_rejections);
    d.rerouted = increase(input, machine, start, |s| s.rerouted);
    d
}

/// The increase of one counter over the window, summed across restarts.
fn increase(
    input: &Input<'_>,
    machine: &MachineNow,
    start: i64,
    counter: impl Fn(&Sample) -> u64,
) -> u64 {
    let mut samples: Vec<&Sample> = input
        .samples
        .iter()
        .filter(|s| s.machine == machine.name)
        .collect();
    samples.extend(machine.counters.as_ref());
    let mut prev: Option<&Sample> = samples.iter().rev().find(|s| s.at_ms <= start).copied();
    let mut total = 0u64;
    for s in samples.iter().filter(|s| s.at_ms > start) {
        total += match prev {
            Some(p) if p.boot_ms == s.boot_ms => counter(s).saturating_sub(counter(p)),
            // A process that started inside the window counted from zero.
            _ if s.boot_ms > start => counter(s),
            // No baseline for a process older than the window: nothing we can attribute.
            _ => 0,
        };
        prev = Some(s);
    }
    total
}

/// The machine with most trips in the last 30 days, with its count (ties: registry order).
pub fn most_tripped(input: &Input<'_>) -> Option<(String, u32)> {
    let start = input.now.as_millisecond() - MONTH_MS;
    let mut best: Option<(String, u32)> = None;
    for m in input.machines {
        let n = match input.month_trips {
            Some(counted) => counted
                .iter()
                .find(|(name, _)| *name == m.name)
                .map_or(0, |(_, n)| *n),
            None => input
                .rows
                .iter()
                .filter(|r| r.machine == m.name && r.at_ms >= start && is_trip(r))
                .count() as u32,
        };
        if n > 0 && best.as_ref().is_none_or(|b| n > b.1) {
            best = Some((m.name.clone(), n));
        }
    }
    best
}

fn host_line(host: &Host) -> String {
    let mut parts = Vec::new();
    if let Some(up) = host.uptime_s {
        parts.push(format!("up {}", human(Duration::from_secs(up))));
    }
    if let (Some(used), Some(total)) = (host.mem_used_bytes, host.mem_total_bytes) {
        parts.push(format!("memory {}/{} GiB", gib(used), gib(total)));
    }
    if let Some(load) = host.load_1m {
        parts.push(format!("load {load:.2}"));
    }
    let name = host.hostname.as_deref().unwrap_or("orchestrator");
    if parts.is_empty() {
        format!(
            "Orchestrator {}: no health figures on this platform",
            bold(name)
        )
    } else {
        format!("Orchestrator {}: {}", bold(name), parts.join(", "))
    }
}

fn machine_paragraph(m: &MachineNow, d: &Day) -> String {
    let mut lines = vec![format!("{} — {} now", bold(&m.name), m.state.describe())];
    if d.trips > 0 {
        let reasons: Vec<String> = d
            .reasons
            .iter()
            .map(|(r, n)| {
                if *n > 1 {
                    format!("{} (×{n})", escape(r))
                } else {
                    escape(r)
                }
            })
            .collect();
        let s = if d.trips == 1 { "" } else { "s" };
        lines.push(format!("• {} trip{s}: {}", d.trips, reasons.join("; ")));
    }
    if !d.open_total.is_zero() {
        lines.push(format!(
            "• open {} in all, longest {}",
            human(d.open_total),
            human(d.open_longest)
        ));
    }
    lines.push(format!(
        "• {} requests rerouted, {} rejected locally",
        d.rerouted, d.rejected
    ));
    lines.join("\n")
}

/// The digest as Telegram messages (HTML parse mode), each under the length limit.
pub fn render(input: &Input<'_>) -> Vec<String> {
    render_with_limit(input, LIMIT)
}

/// [`render`] with a chosen message limit (tests prove the split with a small one).
pub fn render_with_limit(input: &Input<'_>, limit: usize) -> Vec<String> {
    let local = input.now.to_zoned_datetime(input.tz.clone());
    let when = local.strftime("%a %-d %b %H:%M %Z").to_string();
    let days: Vec<(&MachineNow, Day)> = input.machines.iter().map(|m| (m, day(input, m))).collect();
    let trips: u32 = days.iter().map(|(_, d)| d.trips).sum();
    let eventful: Vec<&(&MachineNow, Day)> = days
        .iter()
        .filter(|(m, d)| {
            d.trips > 0 || !d.open_total.is_zero() || m.state.is_down() || d.rejected > 0
        })
        .collect();
    let month = most_tripped(input);
    let host = host_line(input.host);
    let tasks = input
        .tasks
        .filter(|t| !t.is_empty())
        .map(|t| tasks_paragraph(t, waits(input)));
    if eventful.is_empty() {
        let n = input.machines.len();
        let quiet = format!(
            "✅ {} {}: a quiet day — no breaker trips in the last 24 h, all {n} machines closed. {host}.",
            bold("labrouter"),
            escape(&when),
        );
        let paragraphs: Vec<String> = std::iter::once(quiet).chain(tasks).collect();
        return split(&paragraphs, limit);
    }
    let mut paragraphs = vec![format!(
        "📋 {} — {}\n{} trip{} in the last 24 h on {} of {} machines.",
        bold("labrouter daily digest"),
        escape(&when),
        trips,
        if trips == 1 { "" } else { "s" },
        days.iter().filter(|(_, d)| d.trips > 0).count(),
        input.machines.len()
    )];
    for (m, d) in &eventful {
        paragraphs.push(machine_paragraph(m, d));
    }
    paragraphs.extend(tasks);
    let fine: Vec<String> = days
        .iter()
        .filter(|x| !eventful.iter().any(|e| e.0.name == x.0.name))
        .map(|(m, _)| bold(&m.name))
        .collect();
    let mut tail = Vec::new();
    if !fine.is_empty() {
        tail.push(format!("Closed all day: {}.", fine.join(", ")));
    }
    tail.push(match month {
        Some((name, n)) => format!("Most trips in 30 days: {} ({n}).", bold(&name)),
        None => "No trips in the last 30 days.".to_string(),
    });
    tail.push(format!("{host}."));
    paragraphs.push(tail.join("\n"));
    split(&paragraphs, limit)
}
