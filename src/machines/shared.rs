//! The breakers of shared machines, as the link to the other routers meets them: a probe
//! asks the pool for its lease, and the link reads and sets verdicts through the narrow
//! [`Pool`] this file implements (the link never holds a tracker).

use std::sync::Arc;

use tokio::time::Instant;

use super::tracker::{announce, lock};
use super::{Lease, Machines, Rejected};
use crate::breaker::{Adopted, Breaker};
use crate::cluster::{Pool, Taken};
use crate::outcome::MachineId;
use crate::store::Msg;

impl Machines {
    /// [`Machines::admit`], then [`Machines::pooled`] when the call is a probe: what the
    /// request path and the task walk ask.
    pub async fn admit_pooled(&self, i: MachineId) -> Result<Lease, Rejected> {
        match self.admit(i) {
            Ok(lease) if lease.is_probe() => self.pooled(lease).await,
            admitted => admitted,
        }
    }

    /// Asks the pool of routers for the probe lease when `lease` is a shared machine's
    /// probe: won, or Redis unavailable (then this router's own breaker decides, as
    /// without `cluster`), the lease goes on; lost, the probe is another router's and
    /// this breaker answers `probe_in_flight` until that lease would expire. Bounded by
    /// `cluster.timeout`; a lease that is no shared probe passes at once.
    pub async fn pooled(&self, mut lease: Lease) -> Result<Lease, Rejected> {
        let (Some(link), true) = (self.bus.cluster(), lease.is_probe()) else {
            return Ok(lease);
        };
        let Some(share) = lock(&lease.tracker().state).share.clone() else {
            return Ok(lease);
        };
        match link.take_probe(share, lease.watch()).await {
            Taken::Won(hold) => {
                lease.hold(hold);
                Ok(lease)
            }
            Taken::Unavailable => Ok(lease),
            Taken::Lost(left) => Err(lease.peer_probe(left)),
        }
    }

    /// The key machine `i`'s verdict is shared under, if shared (the cluster benchmark
    /// reads its probe lease by it).
    pub fn share(&self, i: MachineId) -> Option<Arc<str>> {
        lock(&self.trackers[i.0].state).share.clone()
    }
}

impl Pool for Machines {
    fn shares(&self) -> Vec<Arc<str>> {
        let mut keys: Vec<Arc<str>> = self
            .trackers
            .iter()
            .filter_map(|t| lock(&t.state).share.clone())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn adopt(&self, share: &str, adopted: &Adopted) -> Vec<String> {
        let mut changed = Vec::new();
        for tracker in &self.trackers {
            let now = Instant::now();
            let (transition, wall) = {
                let mut g = lock(&tracker.state);
                if g.share.as_deref() != Some(share) {
                    continue;
                }
                let g = &mut *g;
                let state = std::mem::replace(&mut g.breaker, Breaker::new(&g.policy));
                let before = (state.phase, state.open_until);
                let (next, transition) = state.adopt(adopted, now, &g.policy);
                if before != (next.phase, next.open_until) {
                    changed.push(tracker.name.clone());
                }
                g.breaker = next;
                (transition, crate::clock::wall())
            };
            if let Some(t) = transition {
                announce(tracker, &self.bus, t, now, wall);
            }
        }
        self.bus.wake();
        changed
    }

    fn breakers(&self) -> Vec<(Arc<str>, Breaker)> {
        self.trackers
            .iter()
            .filter_map(|t| {
                let g = lock(&t.state);
                Some((g.share.clone()?, g.breaker.clone()))
            })
            .collect()
    }

    fn wake(&self) {
        self.bus.wake();
    }

    fn ledger(&self, msg: Msg) {
        self.bus.ledger(msg);
    }
}
