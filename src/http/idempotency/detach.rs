//! Detached flights: a keyed request whose clients all left runs on to its end so that a
//! retry gets its answer, not a second generation. That holds its request (and, once it
//! comes, its answer) with no connection open, so it is bounded: at most
//! `server.max_detached` such flights holding at most `server.max_detached_bytes` of
//! requests at once. Past the bound a flight ends with its client, as an unkeyed request
//! does; and so does one whose walk would only wait for a breaker (`x-labrouter-wait`,
//! nothing sent to a machine yet): no client is left to wait for, and no generation is lost.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderValue;
use tokio::time::Instant;

use crate::outcome::Wire;
use crate::proxy::Front;
use crate::registry::{Api, Server};
use crate::upstream::Framing;

/// The terms on which one flight may run on without its clients.
#[derive(Clone, Debug)]
pub struct Detach {
    /// The request's bytes: what the flight holds while it runs.
    bytes: usize,
    /// `server.max_detached` and `server.max_detached_bytes` when the request came.
    max_flights: usize,
    max_bytes: usize,
    /// The request asked to wait for a breaker (`x-labrouter-wait`).
    waits: bool,
    /// Set once its walk sent an attempt to a machine: a walk that sent one never waits
    /// for a breaker again (it waits only when every target was held back).
    sent: Arc<AtomicBool>,
}

impl Detach {
    /// The terms for a request of `bytes` under `server`; `waits` when it carries
    /// `x-labrouter-wait`.
    pub fn new(server: &Server, bytes: usize, waits: bool) -> Detach {
        Detach {
            bytes,
            max_flights: server.max_detached,
            max_bytes: server.max_detached_bytes,
            waits,
            sent: Arc::default(),
        }
    }

    /// `front`, telling these terms when its walk sends an attempt.
    pub fn noting<F: Front>(&self, front: F) -> Noted<F> {
        Noted {
            front,
            sent: Arc::clone(&self.sent),
        }
    }

    /// Whether the walk would only wait: it may wait and has sent nothing yet.
    fn only_waits(&self) -> bool {
        self.waits && !self.sent.load(Ordering::Acquire)
    }
}

/// What the service's detached flights hold now.
#[derive(Debug, Default)]
pub(super) struct Budget {
    flights: AtomicUsize,
    bytes: AtomicUsize,
}

impl Budget {
    /// A permit for a flight on `terms`, if it may run on detached. Called with the flights'
    /// lock held, so two flights never take the last room at once.
    pub(super) fn take(self: &Arc<Self>, terms: &Detach) -> Option<Permit> {
        if terms.only_waits() {
            return None;
        }
        let (flights, bytes) = self.now();
        let fits =
            flights < terms.max_flights && bytes.saturating_add(terms.bytes) <= terms.max_bytes;
        if !fits {
            return None;
        }
        self.flights.fetch_add(1, Ordering::AcqRel);
        self.bytes.fetch_add(terms.bytes, Ordering::AcqRel);
        Some(Permit {
            budget: Arc::clone(self),
            bytes: terms.bytes,
        })
    }

    /// (flights, bytes) detached now.
    pub(super) fn now(&self) -> (usize, usize) {
        (
            self.flights.load(Ordering::Acquire),
            self.bytes.load(Ordering::Acquire),
        )
    }
}

/// A detached flight's room in the [`Budget`], given back when the flight ends.
#[derive(Debug)]
pub(super) struct Permit {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.budget.flights.fetch_sub(1, Ordering::AcqRel);
        self.budget.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// A [`Front`] that notes when its walk sends an attempt; the rest is `F`'s.
pub struct Noted<F> {
    front: F,
    sent: Arc<AtomicBool>,
}

impl<F: Front> Front for Noted<F> {
    fn request(&self, backend: &str, api: Api) -> (Wire, crate::upstream::Payload) {
        self.sent.store(true, Ordering::Release);
        self.front.request(backend, api)
    }

    fn embeds(&self) -> bool {
        self.front.embeds()
    }

    fn answer(
        &self,
        wire: Wire,
        body: Bytes,
        started: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String> {
        self.front.answer(wire, body, started)
    }

    fn framing(&self, wire: Wire, started: Instant) -> (Framing, Option<HeaderValue>) {
        self.front.framing(wire, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(bytes: usize, waits: bool) -> Detach {
        Detach {
            bytes,
            max_flights: 2,
            max_bytes: 100,
            waits,
            sent: Arc::default(),
        }
    }

    #[test]
    fn the_budget_bounds_flights_and_bytes_and_permits_give_back_their_room() {
        let budget = Arc::new(Budget::default());
        let a = budget.take(&terms(60, false)).unwrap();
        assert!(budget.take(&terms(41, false)).is_none(), "over the bytes");
        let b = budget.take(&terms(40, false)).unwrap();
        assert_eq!(budget.now(), (2, 100));
        assert!(budget.take(&terms(0, false)).is_none(), "over the flights");
        drop(a);
        assert_eq!(budget.now(), (1, 40));
        drop(b);
        assert_eq!(budget.now(), (0, 0));
    }

    #[test]
    fn a_flight_that_would_only_wait_is_not_detached_until_it_sent_an_attempt() {
        let budget = Arc::new(Budget::default());
        let waiting = terms(1, true);
        assert!(budget.take(&waiting).is_none());
        waiting.sent.store(true, Ordering::Release);
        assert!(budget.take(&waiting).is_some());
    }
}
