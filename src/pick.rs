//! The pick among a tier of equal targets (docs/registry.md "routes:"): warm and free first,
//! then free, then the fewest requests in flight (the warm one among those); ties to the
//! faster recent answers, then to the one used least recently.
//!
//! [`order`] is pure: it sees what [`Picks`] remembers of each target and what the breakers'
//! trackers count in flight, and decides. [`Picks`] is what one router remembers of its
//! targets: when each was last sent a request, a decaying average of its time to first
//! byte, when it last answered (a model that answered within its machine's `warm_for` is
//! warm) and whether its machine listed the model as loaded (read off the request path by
//! `crate::warm`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::outcome::ids::Table;
use crate::outcome::ModelId;
use crate::registry::Registry;

#[cfg(test)]
mod tests;

/// Why a tier's target was picked: `x-labrouter-pick` and `labrouter_picks_total`'s `why`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Warm and free (rule 1).
    Warm,
    /// Free (rule 2).
    Free,
    /// Every target busy: the fewest in flight (rule 3), even when warmth broke the tie.
    LeastBusy,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Warm => "warm",
            Why::Free => "free",
            Why::LeastBusy => "least_busy",
        }
    }
}

/// What the pick knows of one target of a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub model: ModelId,
    pub warm: bool,
    /// Requests in flight from this router to the target's machine.
    pub in_flight: u32,
    /// The machine's `parallel`.
    pub parallel: u32,
    /// Decaying average time to first byte, in microseconds; 0 when never measured (an
    /// untried target is tried first among equals, so every target gets measured).
    pub ttfb_us: u32,
    /// When it was last sent a request (microseconds on [`Picks`]' clock; 0: never).
    pub last_used: u64,
}

impl Seen {
    fn why(&self) -> Why {
        match (self.in_flight < self.parallel, self.warm) {
            (true, true) => Why::Warm,
            (true, false) => Why::Free,
            (false, _) => Why::LeastBusy,
        }
    }

    /// The sort key: the rule, then (for busy targets only) fewest in flight with the warm
    /// one first, then the faster, then the least recently used.
    fn key(&self) -> (u8, u32, bool, u32, u64) {
        let why = self.why();
        let (busy, cold) = match why {
            Why::LeastBusy => (self.in_flight, !self.warm),
            Why::Warm | Why::Free => (0, false),
        };
        (why as u8, busy, cold, self.ttfb_us, self.last_used)
    }
}

/// `tier` in the order to try it, each with why it stands there. Stable: equal targets keep
/// the chain's order.
pub fn order(tier: &mut [Seen]) -> impl Iterator<Item = (ModelId, Why)> + '_ {
    tier.sort_by_key(Seen::key);
    tier.iter().map(|s| (s.model, s.why()))
}

/// What one router remembers of each target, for the pick and `/status`.
#[derive(Debug)]
pub struct Picks {
    /// The zero of the microsecond clock the atomics hold.
    base: Instant,
    per: Table<ModelId, Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    ttfb_us: AtomicU32,
    /// Microseconds since `base` + 1 of the last send (0: never).
    last_used: AtomicU64,
    /// Microseconds since `base` + 1 of the last answer (0: never).
    answered: AtomicU64,
    /// Its machine's own list says the model is loaded.
    listed: AtomicBool,
}

impl Memory {
    fn copy(&self) -> Memory {
        let o = Ordering::Relaxed;
        Memory {
            ttfb_us: AtomicU32::new(self.ttfb_us.load(o)),
            last_used: AtomicU64::new(self.last_used.load(o)),
            answered: AtomicU64::new(self.answered.load(o)),
            listed: AtomicBool::new(self.listed.load(o)),
        }
    }
}

impl Picks {
    /// For `reg`'s models; `old` (a reload: its registry and picks) hands over what it knew
    /// of the models that keep their name, machine and backend.
    pub fn new(reg: &Registry, old: Option<(&Registry, &Picks)>) -> Picks {
        let base = old.map_or_else(Instant::now, |(_, o)| o.base);
        let same = |a: &crate::registry::Model, ra: &Registry, b: &crate::registry::Model| {
            a.name == b.name
                && a.backend == b.backend
                && ra.machines[a.machine].name == reg.machines[b.machine].name
        };
        let per = reg
            .models
            .iter()
            .map(|m| {
                let kept = old.and_then(|(oreg, opicks)| {
                    let i = oreg.models.position(|o| same(o, oreg, m))?;
                    opicks.per.get(i)
                });
                kept.map_or_else(Memory::default, Memory::copy)
            })
            .collect::<Vec<_>>()
            .into();
        Picks { base, per }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX) + 1
    }

    /// `model` is being sent a request.
    pub fn sending(&self, model: ModelId) {
        if let Some(m) = self.per.get(model) {
            m.last_used.store(self.now(), Ordering::Relaxed);
        }
    }

    /// `model` answered, its first byte `ttfb` after it was sent.
    pub fn answered(&self, model: ModelId, ttfb: Duration) {
        let Some(m) = self.per.get(model) else { return };
        let new = u32::try_from(ttfb.as_micros()).unwrap_or(u32::MAX).max(1);
        let old = m.ttfb_us.load(Ordering::Relaxed);
        // A decaying average: each answer weighs a fifth.
        let avg = if old == 0 {
            new
        } else {
            u32::try_from((u64::from(old) * 4 + u64::from(new)) / 5).unwrap_or(u32::MAX)
        };
        m.ttfb_us.store(avg, Ordering::Relaxed);
        m.answered.store(self.now(), Ordering::Relaxed);
    }

    /// Whether `model`'s machine listed it as loaded at its last read.
    pub fn set_listed(&self, model: ModelId, listed: bool) {
        if let Some(m) = self.per.get(model) {
            m.listed.store(listed, Ordering::Relaxed);
        }
    }

    /// Whether `model` is warm: listed as loaded, or answered within `warm_for`.
    pub fn warm(&self, model: ModelId, warm_for: Duration) -> bool {
        let Some(m) = self.per.get(model) else {
            return false;
        };
        if m.listed.load(Ordering::Relaxed) {
            return true;
        }
        let answered = m.answered.load(Ordering::Relaxed);
        let window = u64::try_from(warm_for.as_micros()).unwrap_or(u64::MAX);
        answered != 0 && self.now().saturating_sub(answered) < window
    }

    /// What the pick knows of `model`, given its machine's load.
    pub fn seen(&self, reg: &Registry, model: ModelId, in_flight: u32) -> Seen {
        let machine = &reg.machines[reg.models[model].machine];
        let (ttfb_us, last_used) = self.per.get(model).map_or((0, 0), |m| {
            (
                m.ttfb_us.load(Ordering::Relaxed),
                m.last_used.load(Ordering::Relaxed),
            )
        });
        Seen {
            model,
            warm: self.warm(model, machine.warm_for),
            in_flight,
            parallel: machine.parallel,
            ttfb_us,
            last_used,
        }
    }
}
