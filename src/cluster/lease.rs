//! The pool's probe lease: taken before a shared machine's probe goes out, renewed while the
//! probe is undecided, released with its verdict or when the [`Hold`] drops. What it needs
//! of the probe is the narrow [`Probe`]: the link never holds a breaker.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::heard::millis;
use super::{Job, Link, Taken};

/// What the pool's lease needs of the probe it covers, and nothing more: whether the probe
/// is still undecided (the lease is renewed while it is) and its machine's name (metrics).
pub trait Probe: Send + Sync + 'static {
    fn machine(&self) -> &str;
    fn undecided(&self) -> bool;
}

impl Link {
    /// Asks for the pool's probe lease on `share`, bounded by `timeout`: one probe for the
    /// whole pool (see the README's "Several routers").
    pub async fn take_probe(self: &Arc<Self>, share: Arc<str>, probe: impl Probe) -> Taken {
        let Some(mut conn) = self.connection() else {
            return Taken::Unavailable;
        };
        let token = format!("{}:{}", self.node, self.known(&share));
        let mut take = self.scripts.take.prepare_invoke();
        take.key(self.key("probe", &share))
            .arg(&token)
            .arg(millis(self.config.probe_lease));
        let Some((left, holder)) = self
            .asked(take.invoke_async::<(i64, String)>(&mut conn))
            .await
        else {
            return Taken::Unavailable;
        };
        if left == -1 {
            return self.won(share, token, probe);
        }
        if left == -2 {
            // Not a lease at all: some other hand's value. This router's breaker decides,
            // as without Redis, and the share is named in /status until it is fixed.
            self.spoiled(&share, &holder);
            return Taken::Unavailable;
        }
        if holder == token {
            if self.lock_releasing().get(&share) == Some(&token) {
                // Our last probe's lease, ended without a verdict and on its way out (the
                // worker releases it, then wakes the waiting): a moment, not a lease.
                return Taken::Lost(self.config.timeout);
            }
            // Ours from before (this node restarted mid-probe): taken over, if still ours.
            return match self.renew_once(&mut conn, &share, &token).await {
                Some(1) => self.won(share, token, probe),
                Some(_) => Taken::Lost(self.config.timeout),
                None => Taken::Unavailable,
            };
        }
        metrics::counter!("labrouter_cluster_leases_total", "machine" => probe.machine().to_string(), "result" => "lost").increment(1);
        let left = u64::try_from(left)
            .unwrap_or(0)
            .min(millis(self.config.probe_lease));
        tracing::debug!(share = %share, left_ms = left, "cluster: another router probes");
        Taken::Lost(Duration::from_millis(left))
    }

    fn won(self: &Arc<Self>, share: Arc<str>, token: String, probe: impl Probe) -> Taken {
        metrics::counter!("labrouter_cluster_leases_total", "machine" => probe.machine().to_string(), "result" => "won").increment(1);
        self.lock_held().insert(Arc::clone(&share), token.clone());
        let renew = tokio::spawn(Arc::clone(self).renew(Arc::clone(&share), token.clone(), probe));
        Taken::Won(Hold {
            link: Arc::clone(self),
            share,
            token,
            renew,
        })
    }

    /// Renews the probe lease while the probe is undecided and the lease still ours.
    async fn renew(self: Arc<Self>, share: Arc<str>, token: String, probe: impl Probe) {
        loop {
            tokio::time::sleep(self.config.probe_lease / 3).await;
            if !probe.undecided() {
                return;
            }
            let Some(mut conn) = self.connection() else {
                continue;
            };
            if self.renew_once(&mut conn, &share, &token).await == Some(0) {
                return;
            }
        }
    }

    /// Compare-and-`PEXPIRE`: 1 when the lease was still `token`'s and now runs a full
    /// `probe_lease` again, 0 when it is not ours; `None` when Redis failed.
    async fn renew_once(
        &self,
        conn: &mut MultiplexedConnection,
        share: &str,
        token: &str,
    ) -> Option<i64> {
        let mut renew = self.scripts.renew.prepare_invoke();
        renew
            .key(self.key("probe", share))
            .arg(token)
            .arg(millis(self.config.probe_lease));
        self.asked(renew.invoke_async::<i64>(conn)).await
    }
}

/// This router holds the pool's probe lease for `share`: renewed while the probe is
/// undecided, released when dropped (after the lease's outcome was told).
#[derive(Debug)]
pub struct Hold {
    link: Arc<Link>,
    share: Arc<str>,
    token: String,
    renew: tokio::task::JoinHandle<()>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.renew.abort();
        // A verdict published since released it with the message; else release it now.
        let mine = {
            let mut held = self.link.lock_held();
            match held.get(&self.share) {
                Some(t) if *t == self.token => held.remove(&self.share).is_some(),
                _ => false,
            }
        };
        if mine {
            self.link
                .lock_releasing()
                .insert(Arc::clone(&self.share), self.token.clone());
            self.link.send(Job::Release {
                share: Arc::clone(&self.share),
                token: std::mem::take(&mut self.token),
            });
        }
    }
}
