//! Alert decisions (README "Telegram") as a pure state machine over breaker transitions, and their
//! wording. No clock, no network: [`Alerts::on`] takes one transition and says what, if
//! anything, to send.
//!
//! One outage, few messages: a trip sends one alert (never one per rejected request, which
//! makes no transition at all); failed probes re-open the breaker silently until it has
//! been open for `page_after_cycles` cooldowns, which sends one louder page; closing again
//! after a page sends one all-clear. `auth_failed` always alerts, whatever `alert_on_trip`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::text::{bold, escape};
use crate::breaker::Transitioned;
use crate::outcome::words::rounded as human;
use crate::outcome::{MachineId, Phase};
use crate::registry::Registry;

/// The part of a transition alerts look at.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub machine: String,
    pub from: Phase,
    pub to: Phase,
    pub reason: String,
    pub failures: u32,
    pub at: SystemTime,
    pub cooldown_until: Option<SystemTime>,
}

impl From<&Transitioned> for Change {
    fn from(t: &Transitioned) -> Change {
        Change {
            machine: t.machine.clone(),
            from: t.transition.from,
            to: t.transition.to,
            reason: t.transition.reason.clone(),
            failures: t.transition.failures,
            at: t.at,
            cooldown_until: t.cooldown_until,
        }
    }
}

/// What to tell the chat.
#[derive(Clone, Debug, PartialEq)]
pub enum Alert {
    /// A breaker opened (a trip, or opened by hand).
    Opened { change: Change, by_hand: bool },
    /// Still open after `cycles` cooldowns.
    Page {
        change: Change,
        since: SystemTime,
        cycles: u32,
    },
    /// Closed again after a page.
    Recovered { change: Change, since: SystemTime },
    /// 401/403: paused until a reload or a reset.
    AuthFailed { change: Change },
}

impl Alert {
    pub fn machine(&self) -> &str {
        match self {
            Alert::Opened { change, .. }
            | Alert::Page { change, .. }
            | Alert::Recovered { change, .. }
            | Alert::AuthFailed { change } => &change.machine,
        }
    }
}

/// One machine's outage as alerts track it.
#[derive(Clone, Debug)]
struct Outage {
    since: SystemTime,
    /// Failed probes so far: each one is a cooldown that ended with the machine still down.
    cycles: u32,
    paged: bool,
}

/// The alert state of every machine.
#[derive(Debug)]
pub struct Alerts {
    alert_on_trip: bool,
    page_after_cycles: u32,
    outages: HashMap<String, Outage>,
}

impl Alerts {
    pub fn new(alert_on_trip: bool, page_after_cycles: u32) -> Alerts {
        Alerts {
            alert_on_trip,
            page_after_cycles: page_after_cycles.max(1),
            outages: HashMap::new(),
        }
    }

    /// The alert one transition calls for, if any.
    pub fn on(&mut self, c: &Change) -> Option<Alert> {
        let change = c.clone();
        match (c.from, c.to) {
            (_, Phase::Closed) => {
                let outage = self.outages.remove(&c.machine)?;
                outage.paged.then_some(Alert::Recovered {
                    change,
                    since: outage.since,
                })
            }
            (_, Phase::AuthFailed) => {
                self.outages.entry(c.machine.clone()).or_insert(Outage {
                    since: c.at,
                    cycles: 0,
                    paged: false,
                });
                Some(Alert::AuthFailed { change })
            }
            (Phase::HalfOpen, Phase::Open) => {
                // Without a known outage (we started while it was open), it begins here.
                let page_after = self.page_after_cycles;
                let o = self.outages.entry(c.machine.clone()).or_insert(Outage {
                    since: c.at,
                    cycles: 0,
                    paged: false,
                });
                o.cycles += 1;
                if o.cycles >= page_after && !o.paged {
                    o.paged = true;
                    return Some(Alert::Page {
                        change,
                        since: o.since,
                        cycles: o.cycles,
                    });
                }
                None
            }
            (_, Phase::Open | Phase::ForcedOpen) => {
                if self.outages.contains_key(&c.machine) {
                    return None;
                }
                self.outages.insert(
                    c.machine.clone(),
                    Outage {
                        since: c.at,
                        cycles: 0,
                        paged: false,
                    },
                );
                let by_hand = c.to == Phase::ForcedOpen;
                self.alert_on_trip
                    .then_some(Alert::Opened { change, by_hand })
            }
            _ => None,
        }
    }
}

/// Where a route goes when `machine` is out: the chain's targets after the machine's first
/// one, on other machines, each marked when its own breaker is not closed.
#[derive(Clone, Debug, PartialEq)]
pub struct Fallback {
    pub route: String,
    /// `(target, its machine is down too)`.
    pub to: Vec<(String, bool)>,
}

/// The fallbacks of every route that uses `machine`; `down(i)` says whether machine `i`'s
/// breaker is not closed.
pub fn fallbacks(reg: &Registry, machine: &str, down: impl Fn(MachineId) -> bool) -> Vec<Fallback> {
    let Some(mi) = reg.machine_index(machine) else {
        return Vec::new();
    };
    reg.routes
        .iter()
        .filter_map(|r| {
            let first = r.chain.iter().position(|&m| reg.models[m].machine == mi)?;
            let to = r.chain[first + 1..]
                .iter()
                .filter(|&&m| reg.models[m].machine != mi)
                .map(|&m| (reg.target_name(m), down(reg.models[m].machine)))
                .collect();
            Some(Fallback {
                route: r.name.clone(),
                to,
            })
        })
        .collect()
}

fn clock(t: SystemTime, tz: &TimeZone) -> String {
    Timestamp::try_from(t)
        .map(|ts| {
            ts.to_zoned_datetime(tz.clone())
                .strftime("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| "?".into())
}

fn since(a: SystemTime, b: SystemTime) -> Duration {
    b.duration_since(a).unwrap_or(Duration::ZERO)
}

fn next_probe(c: &Change, tz: &TimeZone) -> Option<String> {
    let until = c.cooldown_until?;
    Some(format!(
        "Next probe in {} (at {} {})",
        human(since(c.at, until).max(Duration::from_secs(1))),
        clock(until, tz),
        escape(tz.iana_name().unwrap_or("UTC"))
    ))
}

fn fallback_line(machine: &str, fbs: &[Fallback]) -> Option<String> {
    if fbs.is_empty() {
        return None;
    }
    let parts: Vec<String> = fbs
        .iter()
        .map(|f| {
            if f.to.is_empty() {
                format!(
                    "{} → nothing: its requests fail until {} is back",
                    bold(&f.route),
                    escape(machine)
                )
            } else {
                let to: Vec<String> =
                    f.to.iter()
                        .map(|(t, down)| {
                            if *down {
                                format!("{} (down too)", escape(t))
                            } else {
                                escape(t)
                            }
                        })
                        .collect();
                format!("{} → {}", bold(&f.route), to.join(", "))
            }
        })
        .collect();
    Some(format!("Falls back: {}", parts.join(" · ")))
}

/// The alert as a Telegram message (HTML parse mode).
pub fn render(alert: &Alert, fallbacks: &[Fallback], tz: &TimeZone) -> String {
    let m = alert.machine();
    let mut lines = Vec::new();
    match alert {
        Alert::Opened { change, by_hand } => {
            if *by_hand {
                lines.push(format!("🔴 {} breaker opened by hand", bold(m)));
                lines.push(format!("Why: {}", escape(&change.reason)));
            } else {
                lines.push(format!("🔴 {} is down: breaker opened", bold(m)));
                let n = change.failures;
                let count = if n > 1 {
                    format!(" ({n} failures in a row)")
                } else {
                    String::new()
                };
                lines.push(format!("Why: {}{count}", escape(&change.reason)));
            }
            lines.extend(next_probe(change, tz));
        }
        Alert::Page {
            change,
            since: from,
            cycles,
        } => {
            lines.push(format!(
                "🚨 {} is STILL DOWN after {cycles} cooldowns",
                bold(m)
            ));
            lines.push(format!(
                "Open since {} ({}); last: {}",
                clock(*from, tz),
                human(since(*from, change.at)),
                escape(&change.reason)
            ));
            lines.extend(next_probe(change, tz));
        }
        Alert::Recovered {
            change,
            since: from,
        } => {
            lines.push(format!(
                "🟢 {} is back: breaker closed after {} open",
                bold(m),
                human(since(*from, change.at))
            ));
            lines.push(format!("Why: {}", escape(&change.reason)));
            return lines.join("\n");
        }
        Alert::AuthFailed { change } => {
            lines.push(format!("🔑 {} rejected our credentials", bold(m)));
            lines.push(format!("Why: {}", escape(&change.reason)));
            lines.push(format!(
                "Paused until the registry is reloaded or POST /admin/breakers/{}/reset",
                escape(m)
            ));
        }
    }
    lines.extend(fallback_line(m, fallbacks));
    lines.join("\n")
}
