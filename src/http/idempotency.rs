//! `Idempotency-Key` on non-streamed `POST /v1/chat/completions`, `/v1/completions` and
//! `/v1/embeddings` (docs/api.md "Tasks"): one generation per key, whoever asks and however often.
//!
//! - **Single flight.** The first request with a key starts a *flight*: its work runs in a
//!   task of its own, so it reaches its end even if its client goes away. A duplicate sent
//!   meanwhile waits on the flight's `watch` channel for that same answer.
//! - **Kept.** A machine's whole answer (the walk marks it [`MachineAnswer`]: a 2xx, or a
//!   4xx passed through) of at most [`ANSWER_MAX`] is kept for [`ANSWERS_KEEP`] and replayed
//!   with `idempotent-replayed: true`. The router's own failures (503 `circuit_open`, 502,
//!   504, ...) go to the requests of that flight and are then forgotten, so a retry can
//!   still succeed.
//! - **Where.** In the store when the service has one; otherwise in memory, bounded
//!   ([`MEMORY_ENTRIES`], [`MEMORY_BYTES`], oldest out first). A flight ends only once its
//!   answer can be read where it is kept, so no request falls between the two.
//! - **Detached, within bounds.** A flight whose requests all went away runs on only within
//!   `server.max_detached` and `server.max_detached_bytes`, and only if its walk would do
//!   more than wait for a breaker (`detach`); otherwise it is cut, as an unkeyed request
//!   is when its client leaves.
//! - **Landed on shutdown.** [`Idempotency::land`] waits for the flights still in the air,
//!   so the answers of requests in flight at shutdown are kept for the retry after it.
//! - **Scoped and hashed.** A key belongs to the [`Owner`] that sent it; only
//!   SHA-256(owner, NUL, key) is kept, and the request's SHA-256 (its path, NUL, its body
//!   bytes) as its fingerprint: the same key with another request is 422.
//!
//! This file holds the flights; `key` the header, slot and fingerprint; `done` a finished
//! answer; `recent` the answers kept in memory; `kept` the store's side; `detach` the
//! bounds on flights without clients.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use axum::http::HeaderName;
use axum::response::Response;
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;

use super::error::{AppError, Code};
use crate::clock::Instant;
use crate::service::Service;
use crate::store::Store;

mod detach;
mod done;
mod kept;
mod key;
mod recent;

pub use detach::Detach;
use detach::{Budget, Permit};
use done::Done;
use kept::{Kept, Wall};
pub use key::{key_of, streamed, Keyed};
use key::{reused, Slot};
use recent::Recent;

#[cfg(doc)]
use {super::Owner, crate::proxy::MachineAnswer, crate::store::ANSWERS_KEEP};

/// On every answer that was not generated for the request it answers.
pub static REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// The largest answer kept: a larger one is served, not replayed.
pub const ANSWER_MAX: usize = 1 << 20;
/// Without a store: at most this many answers in memory...
pub const MEMORY_ENTRIES: usize = 10_000;
/// ... and at most this many bytes of their bodies.
pub const MEMORY_BYTES: usize = 64 << 20;

/// One key's request in flight.
#[derive(Debug)]
struct Flight {
    /// Tells this flight from a later one under the same slot.
    id: u64,
    /// The request it generates for; `None` while it is still looking for a kept answer.
    fingerprint: Option<String>,
    done: watch::Receiver<Option<Arc<Done>>>,
    /// Requests waiting on it now.
    waiters: usize,
    /// The terms on which it may run on once they are gone.
    detach: Detach,
    /// Its room among the detached flights, from when it first ran on without a client.
    permit: Option<Permit>,
    /// Cuts its task: a flight nobody waits for and that may not run on detached.
    abort: AbortHandle,
}

/// Flights and, without a store, the answers kept in memory. Behind a std mutex: it is held
/// for map operations only, never across an await.
#[derive(Debug, Default)]
struct State {
    flights: HashMap<Slot, Flight>,
    recent: Recent,
    next_id: u64,
}

/// Flight tasks that have not ended, and a wake-up each time one does.
#[derive(Debug, Default)]
struct Aloft {
    count: AtomicUsize,
    landed: Notify,
}

/// The service's idempotency: flights, and where answers are kept.
#[derive(Debug)]
pub struct Idempotency {
    state: Arc<Mutex<State>>,
    store: Option<Kept>,
    wall: Wall,
    /// What the detached flights hold.
    budget: Arc<Budget>,
    aloft: Arc<Aloft>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The service's one [`Idempotency`], made on first use.
pub fn of(svc: &Service) -> Arc<Idempotency> {
    svc.shared(|| Idempotency::new(svc.store()))
}

impl Idempotency {
    /// Answers kept in `store`, or in memory without one.
    pub fn new(store: Option<&Store>) -> Idempotency {
        Idempotency {
            state: Arc::default(),
            store: store.map(|s| Kept {
                path: s.path().to_path_buf(),
                writer: s.sender(),
            }),
            wall: Wall {
                at_ms: crate::store::ms(SystemTime::now()),
                since: Instant::now(),
            },
            budget: Arc::default(),
            aloft: Arc::default(),
        }
    }

    /// Answers a keyed request: with the answer kept for its key, with the answer of the
    /// same request in flight, or with `work`'s, which runs to its end if this request goes
    /// away, as `detach` allows. `limit` bounds the answer read whole
    /// (`server.max_upstream_body`).
    pub async fn answer<W>(
        &self,
        keyed: Keyed,
        limit: usize,
        detach: Detach,
        work: W,
    ) -> Result<Response, AppError>
    where
        W: Future<Output = Response> + Send + 'static,
    {
        let (mut done, leads, _waiting) = {
            let mut st = lock(&self.state);
            if let Some(f) = st.flights.get_mut(&keyed.slot) {
                if f.fingerprint
                    .as_ref()
                    .is_some_and(|fp| *fp != keyed.fingerprint)
                {
                    return Err(reused());
                }
                f.waiters += 1;
                (f.done.clone(), false, self.waiter(&keyed.slot, f.id))
            } else if let Some(a) = self
                .store
                .is_none()
                .then(|| st.recent.get(&keyed.slot, self.wall.since_ms()))
                .flatten()
            {
                return replay(&Done::from_kept(a.clone()), &keyed);
            } else {
                let (tx, rx) = watch::channel(None);
                let id = st.next_id;
                st.next_id += 1;
                let landing = Landing::new(self, &keyed.slot, id);
                let (store, wall) = (self.store.clone(), self.wall);
                let fingerprint = keyed.fingerprint.clone();
                let task = tokio::spawn(fly(landing, store, wall, fingerprint, limit, work, tx));
                let flight = Flight {
                    id,
                    // In memory, the kept answers were just looked at: this flight generates.
                    fingerprint: self.store.is_none().then(|| keyed.fingerprint.clone()),
                    done: rx.clone(),
                    waiters: 1,
                    detach,
                    permit: None,
                    abort: task.abort_handle(),
                };
                st.flights.insert(keyed.slot.clone(), flight);
                (rx, true, self.waiter(&keyed.slot, id))
            }
        };
        // A value once sent is returned even after the sender is gone.
        let finished = done
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|d| d.clone());
        let Some(finished) = finished else {
            return Err(AppError::new(
                Code::IdempotentRequestLost,
                "the request in flight for this Idempotency-Key ended without an answer; send it again",
            ));
        };
        if leads && !finished.kept {
            Ok(finished.response(false))
        } else {
            replay(&finished, &keyed)
        }
    }

    /// (flights, request bytes) running on now without their clients.
    pub fn detached(&self) -> (usize, usize) {
        self.budget.now()
    }

    /// Waits until every flight has ended, its answer kept, or until `until`; returns how
    /// many had not. Requests in flight at shutdown: their answers are there for the retry.
    pub async fn land(&self, until: Instant) -> usize {
        loop {
            let landed = self.aloft.landed.notified();
            tokio::pin!(landed);
            landed.as_mut().enable();
            let aloft = self.aloft.count.load(Ordering::Acquire);
            if aloft == 0 {
                return 0;
            }
            tokio::select! {
                () = landed => {}
                () = tokio::time::sleep_until(until) => {
                    return self.aloft.count.load(Ordering::Acquire);
                }
            }
        }
    }

    fn waiter(&self, slot: &Slot, id: u64) -> Waiter {
        Waiter {
            state: Arc::clone(&self.state),
            budget: Arc::clone(&self.budget),
            slot: slot.clone(),
            id,
        }
    }
}

/// A finished answer to a request that did not generate it.
fn replay(done: &Done, keyed: &Keyed) -> Result<Response, AppError> {
    if done.fingerprint != keyed.fingerprint {
        return Err(reused());
    }
    Ok(done.response(true))
}

/// One request waiting on a flight. When the last one goes away before the answer, the
/// flight runs on detached if the budget has room for it, and is cut otherwise.
struct Waiter {
    state: Arc<Mutex<State>>,
    budget: Arc<Budget>,
    slot: Slot,
    id: u64,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let cut = {
            let mut st = lock(&self.state);
            let Some(f) = st.flights.get_mut(&self.slot).filter(|f| f.id == self.id) else {
                return;
            };
            f.waiters = f.waiters.saturating_sub(1);
            if f.waiters > 0 || f.permit.is_some() || f.done.borrow().is_some() {
                return;
            }
            match self.budget.take(&f.detach) {
                Some(permit) => {
                    f.permit = Some(permit);
                    return;
                }
                // Out of the map at once: a retry starts a flight of its own.
                None => st.flights.remove(&self.slot),
            }
        };
        if let Some(f) = cut {
            f.abort.abort();
            tracing::debug!(
                "a keyed request's client left: cut (server.max_detached, or waiting for a breaker)"
            );
        }
    }
}

/// Ends a flight when its task ends, however it ends (a panic or a cut included).
struct Landing {
    state: Arc<Mutex<State>>,
    slot: Slot,
    id: u64,
    aloft: Arc<Aloft>,
}

impl Landing {
    fn new(idem: &Idempotency, slot: &Slot, id: u64) -> Landing {
        idem.aloft.count.fetch_add(1, Ordering::AcqRel);
        Landing {
            state: Arc::clone(&idem.state),
            slot: slot.clone(),
            id,
            aloft: Arc::clone(&idem.aloft),
        }
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        let gone = {
            let mut st = lock(&self.state);
            match st.flights.get(&self.slot) {
                Some(f) if f.id == self.id => st.flights.remove(&self.slot),
                _ => None,
            }
        };
        drop(gone);
        self.aloft.count.fetch_sub(1, Ordering::AcqRel);
        self.aloft.landed.notify_waiters();
    }
}

/// A flight's task: find the kept answer or generate one, tell everyone waiting, keep it.
async fn fly<W>(
    landing: Landing,
    store: Option<Kept>,
    wall: Wall,
    fingerprint: String,
    limit: usize,
    work: W,
    tx: watch::Sender<Option<Arc<Done>>>,
) where
    W: Future<Output = Response> + Send + 'static,
{
    if let Some(store) = &store {
        if let Some(kept) = kept::read(store, &landing.slot, wall.since_ms()).await {
            tx.send_replace(Some(Arc::new(Done::from_kept(kept))));
            return;
        }
        let mut st = lock(&landing.state);
        if let Some(f) = st.flights.get_mut(&landing.slot) {
            if f.id == landing.id {
                f.fingerprint = Some(fingerprint.clone());
            }
        }
    }
    let done = Arc::new(Done::collect(work.await, fingerprint, limit).await);
    tx.send_replace(Some(Arc::clone(&done)));
    if !done.keep {
        return;
    }
    let kept = done.to_kept(&landing.slot, wall.now_ms());
    match &store {
        Some(store) => kept::write(store, kept).await,
        None => {
            // Kept and landed in one step: no request sees neither.
            let mut st = lock(&landing.state);
            st.recent
                .insert(landing.slot.clone(), kept, wall.since_ms());
            if st
                .flights
                .get(&landing.slot)
                .is_some_and(|f| f.id == landing.id)
            {
                st.flights.remove(&landing.slot);
            }
        }
    }
}
