//! What the cluster asks of this router's breakers, and nothing more. The machines module
//! implements it; the link never holds a tracker nor reaches into one, and finds the
//! current breakers through a closure its caller hands it ([`Breakers`]).

use std::sync::Arc;

use crate::breaker::{Adopted, Breaker};
use crate::store::Msg;

/// This router's breakers, as the link to the other routers sees them.
pub trait Pool {
    /// The keys the shared machines' verdicts go under, each once, sorted.
    fn shares(&self) -> Vec<Arc<str>>;

    /// Takes over a peer's verdict on every machine shared under `share`; the names of the
    /// machines whose breaker changed.
    fn adopt(&self, share: &str, adopted: &Adopted) -> Vec<String>;

    /// Every shared machine's breaker as it is now, with its share key: told again when a
    /// transition could not be queued.
    fn breakers(&self) -> Vec<(Arc<str>, Breaker)>;

    /// Wakes the requests and tasks waiting for a breaker (a verdict arrived, a lease went).
    fn wake(&self);

    /// Queues a row for the ledger (the link went up or down).
    fn ledger(&self, msg: Msg);
}

/// Where the worker finds this router's breakers each time it needs them: a registry
/// reload replaces them, so it never keeps them. Its caller (the service) hands it a
/// closure that runs a function on the current ones.
pub(super) type Breakers<'a> = &'a (dyn Fn(&mut dyn FnMut(&dyn Pool)) + Send + Sync);

/// Runs `f` on the breakers `breakers` finds now.
pub(super) fn on<R: Default>(breakers: Breakers<'_>, f: impl FnOnce(&dyn Pool) -> R) -> R {
    let mut f = Some(f);
    let mut out = R::default();
    breakers(&mut |pool| {
        if let Some(f) = f.take() {
            out = f(pool);
        }
    });
    out
}
