//! How many callback attempts may be on the wire at once: per receiver, per owner and in
//! all. A receiver that accepts and never answers holds each attempt for the whole attempt
//! timeout; counted per receiver and per owner, it delays only deliveries to itself, and
//! one owner's many callbacks cannot take every attempt the router allows.
//!
//! [`Counts`] is the pure rule (does an attempt fit, take it, give it back); [`Slots`] wraps
//! it with a queue of deliveries waiting, served oldest first among those that fit.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Attempts on the wire at once to one receiver (scheme, host, port): a receiver that
/// never answers holds this many deliveries at a time, the rest of its own wait their turn.
pub const PER_RECEIVER: usize = 2;

/// Attempts on the wire at once for one owner (the API key that submitted the task; all
/// tasks share one owner without keys): twice [`PER_RECEIVER`], so one dead receiver of an
/// owner leaves room for its healthy ones.
pub const PER_OWNER: usize = 4;

/// Attempts on the wire at once, all receivers and owners together: a bound on sockets and
/// memory, large enough that no one receiver or owner reaches it.
pub const IN_FLIGHT: usize = 32;

/// Who an attempt counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// Scheme, host and port of the callback URL (the port the scheme implies when absent),
    /// as [`crate::registry::AllowRule`] compares them.
    pub receiver: (String, String, u16),
    /// The task's owner: a hash of the API key that submitted it, '' without keys.
    pub owner: String,
}

impl Key {
    pub fn new(url: &reqwest::Url, owner: &str) -> Key {
        Key {
            receiver: (
                url.scheme().to_ascii_lowercase(),
                url.host_str().unwrap_or("").to_ascii_lowercase(),
                url.port_or_known_default().unwrap_or(0),
            ),
            owner: owner.to_owned(),
        }
    }
}

/// The limits [`Counts`] keeps to.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub per_receiver: usize,
    pub per_owner: usize,
    pub in_flight: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            per_receiver: PER_RECEIVER,
            per_owner: PER_OWNER,
            in_flight: IN_FLIGHT,
        }
    }
}

/// Attempts on the wire now. Pure; a receiver or owner with none has no entry, so the maps
/// hold only those with an attempt under way (at most [`IN_FLIGHT`] entries each).
#[derive(Debug, Default)]
pub struct Counts {
    limits: Limits,
    total: usize,
    receivers: HashMap<(String, String, u16), usize>,
    owners: HashMap<String, usize>,
}

impl Counts {
    pub fn new(limits: Limits) -> Counts {
        Counts {
            limits,
            ..Counts::default()
        }
    }

    /// Whether one more attempt for `key` stays within every limit.
    pub fn fits(&self, key: &Key) -> bool {
        let of = |n: Option<&usize>| n.copied().unwrap_or(0);
        self.total < self.limits.in_flight
            && of(self.receivers.get(&key.receiver)) < self.limits.per_receiver
            && of(self.owners.get(&key.owner)) < self.limits.per_owner
    }

    /// Whether any attempt at all fits (the overall bound is not reached).
    fn room(&self) -> bool {
        self.total < self.limits.in_flight
    }

    /// Counts an attempt for `key` (the caller checked [`Counts::fits`]).
    pub fn take(&mut self, key: &Key) {
        self.total += 1;
        *self.receivers.entry(key.receiver.clone()).or_default() += 1;
        *self.owners.entry(key.owner.clone()).or_default() += 1;
    }

    /// An attempt for `key` is over.
    pub fn give_back(&mut self, key: &Key) {
        self.total = self.total.saturating_sub(1);
        fn down<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, k: &K) {
            if let Some(n) = map.get_mut(k) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(k);
                }
            }
        }
        down(&mut self.receivers, &key.receiver);
        down(&mut self.owners, &key.owner);
    }

    #[cfg(test)]
    fn total(&self) -> usize {
        self.total
    }
}

/// The counts and the deliveries waiting for room, oldest first. After every change, no
/// waiting delivery fits (it would have been let through), so a newcomer that fits jumps
/// no one who could go.
pub struct Slots {
    inner: Mutex<Inner>,
}

struct Inner {
    counts: Counts,
    /// Each waiter's key and where to hand its [`Slot`]. A waiter that went away (its
    /// delivery aborted) is dropped at the next release.
    waiting: VecDeque<(Key, oneshot::Sender<Slot>)>,
}

/// One attempt's room on the wire; given back when dropped.
pub struct Slot {
    slots: Arc<Slots>,
    key: Option<Key>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.slots.release(&key);
        }
    }
}

impl Slots {
    pub fn new(limits: Limits) -> Arc<Slots> {
        Arc::new(Slots {
            inner: Mutex::new(Inner {
                counts: Counts::new(limits),
                waiting: VecDeque::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Room for one attempt for `key`, as soon as every limit allows it. `None` only if
    /// the slots went away (the deliveries are stopping).
    pub async fn take(self: &Arc<Self>, key: Key) -> Option<Slot> {
        let granted = {
            let mut inner = self.lock();
            if inner.counts.fits(&key) {
                inner.counts.take(&key);
                return Some(Slot {
                    slots: Arc::clone(self),
                    key: Some(key),
                });
            }
            let (tx, rx) = oneshot::channel();
            inner.waiting.push_back((key, tx));
            rx
        };
        granted.await.ok()
    }

    /// Gives `key`'s attempt back and lets through every waiter that now fits, oldest
    /// first. The slots are handed over after the lock is let go: a waiter that went away
    /// drops its slot, which comes back here.
    fn release(self: &Arc<Self>, key: &Key) {
        let granted: Vec<(oneshot::Sender<Slot>, Slot)> = {
            let mut inner = self.lock();
            let Inner { counts, waiting } = &mut *inner;
            counts.give_back(key);
            let mut granted = Vec::new();
            let mut still = VecDeque::with_capacity(waiting.len());
            while let Some((k, tx)) = waiting.pop_front() {
                if tx.is_closed() {
                    continue;
                }
                if counts.room() && counts.fits(&k) {
                    counts.take(&k);
                    let slot = Slot {
                        slots: Arc::clone(self),
                        key: Some(k),
                    };
                    granted.push((tx, slot));
                } else {
                    still.push_back((k, tx));
                }
            }
            *waiting = still;
            granted
        };
        for (tx, slot) in granted {
            let _ = tx.send(slot);
        }
    }

    /// Attempts on the wire now and deliveries waiting for room.
    #[cfg(test)]
    fn load(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.counts.total(), inner.waiting.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16, owner: &str) -> Key {
        let url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/hook")).unwrap();
        Key::new(&url, owner)
    }

    #[test]
    fn counts_keep_to_each_limit_and_forget_what_is_idle() {
        let mut c = Counts::default();
        for _ in 0..PER_RECEIVER {
            assert!(c.fits(&key(1, "a")));
            c.take(&key(1, "a"));
        }
        assert!(!c.fits(&key(1, "a")), "per receiver");
        assert!(!c.fits(&key(1, "b")), "per receiver, whoever owns the task");
        c.take(&key(2, "a"));
        c.take(&key(2, "a"));
        assert!(!c.fits(&key(3, "a")), "per owner");
        assert!(c.fits(&key(3, "b")), "another owner, another receiver");
        for k in [key(1, "a"), key(1, "a"), key(2, "a"), key(2, "a")] {
            c.give_back(&k);
        }
        assert_eq!(c.total(), 0);
        assert!(c.receivers.is_empty() && c.owners.is_empty(), "{c:?}");
    }

    #[test]
    fn the_overall_bound_holds_across_owners_and_receivers() {
        let mut c = Counts::default();
        for i in 0..IN_FLIGHT {
            let k = key(i as u16 + 1, &format!("owner {i}"));
            assert!(c.fits(&k));
            c.take(&k);
        }
        assert!(!c.fits(&key(9999, "someone new")));
        const { assert!(IN_FLIGHT >= 4 * PER_OWNER && PER_OWNER >= 2 * PER_RECEIVER) };
    }

    #[test]
    fn the_same_host_on_another_port_or_scheme_is_another_receiver() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert_eq!(
            Key::new(&url("http://LOCALHOST/a"), "").receiver,
            Key::new(&url("http://localhost:80/b?c"), "").receiver
        );
        assert_ne!(
            Key::new(&url("http://localhost/"), "").receiver,
            Key::new(&url("https://localhost/"), "").receiver
        );
    }

    #[tokio::test]
    async fn a_waiter_that_fits_goes_first_when_room_comes_back() {
        let slots = Slots::new(Limits::default());
        let held = (slots.take(key(1, "a")).await, slots.take(key(1, "a")).await);
        assert_eq!(slots.load(), (2, 0));
        // Behind the full receiver 1: another of its own, then one to receiver 2.
        let same = tokio::spawn({
            let s = Arc::clone(&slots);
            async move { s.take(key(1, "b")).await }
        });
        tokio::task::yield_now().await;
        assert_eq!(slots.load(), (2, 1), "receiver 1 is full");
        let other = slots.take(key(2, "b")).await;
        assert!(other.is_some(), "receiver 2 is not held up by receiver 1");
        assert_eq!(slots.load(), (3, 1));
        drop(held);
        let got = same.await.unwrap();
        assert!(got.is_some());
        assert_eq!(slots.load(), (2, 0));
        drop((got, other));
        assert_eq!(slots.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_waiter_that_went_away_takes_no_room() {
        let slots = Slots::new(Limits {
            per_receiver: 1,
            per_owner: 1,
            in_flight: 1,
        });
        let held = slots.take(key(1, "a")).await;
        let gone = tokio::spawn({
            let s = Arc::clone(&slots);
            async move { s.take(key(1, "a")).await }
        });
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert_eq!(slots.load(), (0, 0), "the aborted waiter holds nothing");
        assert!(slots.take(key(1, "a")).await.is_some());
    }
}
