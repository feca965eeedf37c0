//! The demo's words: timestamped narration lines, the live progress line, breaker
//! transitions and reroutes in plain words, and the closing summary.

use std::io::{self, Write};
use std::time::Duration;

use tokio::time::Instant;

use super::traffic::{Done, Served};
use crate::breaker::Phase;
use crate::fleet::Fleet;
use crate::machines::Transitioned;
use crate::outcome::{words, MachineId, Reason};

/// Writes narration to `out`; with `progress`, keeps a `\r`-rewritten status line under it.
pub struct Narrator<'a> {
    out: &'a mut dyn Write,
    start: Instant,
    progress: bool,
    /// The progress line is on screen and must be wiped before the next line.
    drawn: bool,
}

impl<'a> Narrator<'a> {
    pub fn new(out: &'a mut dyn Write, start: Instant, progress: bool) -> Self {
        Narrator {
            out,
            start,
            progress,
            drawn: false,
        }
    }

    /// Stamps later lines from `start`.
    pub fn restart(&mut self, start: Instant) {
        self.start = start;
    }

    fn wipe(&mut self) -> io::Result<()> {
        if self.drawn {
            self.drawn = false;
            write!(self.out, "\r\x1b[K")?;
        }
        Ok(())
    }

    /// One line, stamped with the seconds since the start.
    pub fn say(&mut self, text: &str) -> io::Result<()> {
        self.wipe()?;
        let t = self.start.elapsed().as_secs_f64();
        writeln!(self.out, "[{t:>5.1}s] {text}")?;
        self.out.flush()
    }

    /// Lines as they are (the header, the summary).
    pub fn plain(&mut self, text: &str) -> io::Result<()> {
        self.wipe()?;
        writeln!(self.out, "{text}")?;
        self.out.flush()
    }

    /// Rewrites the live progress line (only when asked for one).
    pub fn progress(&mut self, text: &str) -> io::Result<()> {
        if !self.progress {
            return Ok(());
        }
        self.wipe()?;
        write!(self.out, "{text}")?;
        self.drawn = true;
        self.out.flush()
    }

    /// Removes the progress line for good.
    pub fn done(&mut self) -> io::Result<()> {
        self.wipe()?;
        self.out.flush()
    }
}

fn phase_word(p: Phase) -> String {
    match p {
        Phase::HalfOpen => "HALF-OPEN".into(),
        other => other.as_str().to_uppercase(),
    }
}

/// One breaker transition in plain words. `down_for`: since the machine's trip, when it
/// closes again.
pub fn transition(t: &Transitioned, fleet: &Fleet, down_for: Option<Duration>) -> String {
    let m = &t.machine;
    let tr = &t.transition;
    let cooldown = words(t.verdict.cooldown);
    match (tr.from, tr.to) {
        (Phase::Closed, Phase::Open) => format!(
            "{m} OPEN after {} failures in a row, last: {}. Skipped with no network for {cooldown}; {}",
            tr.failures,
            tr.reason,
            reroutes(fleet, m)
        ),
        (Phase::HalfOpen, Phase::Open) => format!(
            "{m} OPEN again, {}; cooldown backs off to {cooldown}",
            tr.reason
        ),
        (Phase::Open, Phase::HalfOpen) => format!(
            "{m} HALF-OPEN: {}; the next request is the probe, the rest still skip it",
            tr.reason
        ),
        (_, Phase::Closed) => {
            let after = down_for
                .map(|d| format!(" after {:.1}s", d.as_secs_f64()))
                .unwrap_or_default();
            format!("{m} CLOSED: {}; back in service{after}", tr.reason)
        }
        (from, to) => format!(
            "{m} {} -> {}: {}",
            phase_word(from),
            phase_word(to),
            tr.reason
        ),
    }
}

/// Where the routes that start on `machine` go now that it is open.
fn reroutes(fleet: &Fleet, machine: &str) -> String {
    let reg = &fleet.registry;
    let Some(mi) = reg.machine_index(machine) else {
        return String::new();
    };
    let open = |i: MachineId| {
        matches!(
            fleet.machines.phase(i),
            Phase::Open | Phase::ForcedOpen | Phase::AuthFailed
        )
    };
    let mut parts = Vec::new();
    for route in &reg.routes {
        let Some(&first) = route.chain.first() else {
            continue;
        };
        if reg.models[first].machine != mi {
            continue;
        }
        let next = route.chain.iter().find(|&&m| {
            let at = reg.models[m].machine;
            at != mi && !open(at)
        });
        let verb = if parts.is_empty() {
            "now served by"
        } else {
            "by"
        };
        parts.push(match next {
            Some(&m) => format!("{} {verb} {}", route.name, reg.target_name(m)),
            None => format!("{} has nothing left to serve it", route.name),
        });
    }
    parts.join(", ")
}

/// What a skip or failure token of `x-labrouter-skipped` means.
fn why(token: &str) -> &str {
    token
        .parse::<Reason>()
        .map_or(token, |r: Reason| r.describe())
}

/// A rerouted request: where it went and what it passed over.
pub fn reroute(d: &Done, s: &Served) -> String {
    let passed: Vec<String> = s
        .skipped
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((target, token)) => format!("{target} ({})", why(token)),
            None => p.to_string(),
        })
        .collect();
    format!(
        "  reroute: {} request #{} served by {}, passed over {}",
        d.kind.route(),
        d.n,
        s.target,
        passed.join(", ")
    )
}
