//! The worker: connects to Redis (and reconnects), subscribes, re-syncs, publishes this
//! router's transitions in order, releases probe leases, and beats once a second so peers
//! are seen and a silent Redis is noticed. Every operation is bounded by `cluster.timeout`;
//! any failure is "Redis down" until the next connect succeeds.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::heard::{millis, Told};
use super::pool::{on, Breakers};
use super::{bounded, Endpoint, Job, Jobs, Link, Pool, State, VERDICT_TTL};
use crate::store::Msg;

/// How often a router says it is alive, and checks that Redis is.
const BEAT: Duration = Duration::from_secs(1);
/// A peer not heard for this long is no longer listed.
const PEER_WINDOW: Duration = Duration::from_secs(5);
/// Every verdict is read again this often, whatever pub/sub delivered.
const RESYNC: Duration = Duration::from_secs(15);
/// Connecting (and subscribing) at most; a background matter, never a request's.
const CONNECT_MAX: Duration = Duration::from_secs(2);
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Verdicts not yet published, the latest per share key: what this router decided while
/// Redis was away goes out first when it returns.
type Pending = BTreeMap<Arc<str>, Told>;

/// Runs the link until the service stops (the task is aborted).
/// `breakers` runs a function on this router's breakers as they are then (see [`Pool`]).
pub async fn run(
    link: Arc<Link>,
    endpoint: Endpoint,
    jobs: Jobs,
    breakers: impl Fn(&mut dyn FnMut(&dyn Pool)) + Send + Sync,
) {
    let Jobs(mut rx) = jobs;
    let mut pending = Pending::new();
    let mut retry = RETRY_FIRST;
    loop {
        let why = match connect(&link, &endpoint).await {
            Ok((conn, stream)) => {
                retry = RETRY_FIRST;
                set_conn(&link, Some(conn.clone()));
                let mut w = Worker {
                    link: &link,
                    breakers: &breakers,
                    endpoint: &endpoint,
                    conn,
                    pending: &mut pending,
                };
                w.session(stream, &mut rx).await
            }
            Err(why) => {
                metrics::counter!("labrouter_cluster_redis_errors_total").increment(1);
                endpoint.hide(&why)
            }
        };
        set_conn(&link, None);
        went(&link, &breakers, State::Down, &why);
        // Until the next try, transitions wait in `pending`; nothing else can be done.
        let until = Instant::now() + retry;
        loop {
            tokio::select! {
                job = rx.recv() => match job {
                    Some(Job::Publish { share, told }) => { pending.insert(share, told); }
                    // The lease expires by itself; nothing waits on its release any more.
                    Some(Job::Release { share, token }) => link.released(&share, &token),
                    Some(Job::Check) => {}
                    None => return,
                },
                () = tokio::time::sleep_until(until) => break,
            }
        }
        retry = (retry * 2).min(RETRY_MAX);
    }
}

fn set_conn(link: &Link, conn: Option<MultiplexedConnection>) {
    *link.conn.lock().unwrap_or_else(|e| e.into_inner()) = conn;
}

/// A command connection and a subscription to the verdicts channel.
async fn connect(
    link: &Link,
    endpoint: &Endpoint,
) -> Result<(MultiplexedConnection, redis::aio::PubSubStream), String> {
    let bound = link.config.timeout.max(Duration::from_millis(1));
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_MAX))
        .set_response_timeout(Some(bound));
    let connecting = async {
        let conn = endpoint
            .client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        let mut pubsub = endpoint
            .client()
            .get_async_pubsub()
            .await
            .map_err(|e| e.to_string())?;
        pubsub
            .subscribe(link.channel())
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((conn, pubsub.into_on_message()))
    };
    tokio::time::timeout(CONNECT_MAX, connecting)
        .await
        .map_err(|_| format!("no answer from {} within {CONNECT_MAX:?}", endpoint.host()))?
}

/// The connection's state changed: said once in the log, the ledger, `/metrics`.
fn went(link: &Link, breakers: Breakers<'_>, to: State, why: &str) {
    let from = link.state();
    {
        let mut seen = link.seen.lock().unwrap_or_else(|e| e.into_inner());
        if to == State::Down {
            seen.last_error = Some(why.to_string());
        }
        if from != to {
            seen.since = Some(SystemTime::now());
        }
        if to == State::Down {
            seen.peers.clear();
        }
    }
    if from == to {
        return;
    }
    link.state.send_replace(to);
    metrics::gauge!("labrouter_cluster_up").set(if to == State::Up { 1.0 } else { 0.0 });
    match to {
        State::Down => {
            tracing::warn!(node = %link.node, error = %why, "cluster: Redis is down; this router runs on its own breakers until it returns")
        }
        _ => tracing::info!(node = %link.node, "cluster: Redis is up; verdicts re-synced"),
    }
    let row = Msg::Cluster {
        at: SystemTime::now(),
        from: from.as_str().into(),
        to: to.as_str().into(),
        reason: why.to_string(),
    };
    on(breakers, |pool| pool.ledger(row));
}

pub(super) struct Worker<'a> {
    pub link: &'a Arc<Link>,
    breakers: Breakers<'a>,
    endpoint: &'a Endpoint,
    pub conn: MultiplexedConnection,
    pending: &'a mut Pending,
}

impl Worker<'_> {
    /// Runs `f` on this router's breakers as they are now.
    pub fn pool<R: Default>(&self, f: impl FnOnce(&dyn Pool) -> R) -> R {
        on(self.breakers, f)
    }

    /// One connected session: sync, then serve until something fails; returns why.
    async fn session(
        &mut self,
        mut stream: redis::aio::PubSubStream,
        rx: &mut mpsc::Receiver<Job>,
    ) -> String {
        if let Err(why) = self.sync().await {
            return why;
        }
        went(
            self.link,
            self.breakers,
            State::Up,
            "connected and re-synced",
        );
        let mut beat = tokio::time::interval(BEAT);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut resync = tokio::time::interval_at(Instant::now() + RESYNC, RESYNC);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let done = tokio::select! {
                msg = stream.next() => match msg {
                    Some(m) => self.heard(m.get_payload_bytes()).await,
                    None => {
                        metrics::counter!("labrouter_cluster_redis_errors_total").increment(1);
                        Err("the subscription closed".to_string())
                    }
                },
                job = rx.recv() => match job {
                    Some(Job::Publish { share, told }) => {
                        self.pending.insert(share, told);
                        self.flush().await
                    }
                    Some(Job::Release { share, token }) => self.release(&share, &token).await,
                    Some(Job::Check) => self.beat().await,
                    None => Err("the router is stopping".to_string()),
                },
                _ = beat.tick() => self.beat().await,
                _ = resync.tick() => self.read_all().await,
            };
            if let Err(why) = done {
                return self.endpoint.hide(&why);
            }
            if self.link.overflowed.swap(false, Ordering::AcqRel) {
                self.tell_all();
                if let Err(why) = self.flush().await {
                    return self.endpoint.hide(&why);
                }
            }
        }
    }

    /// What this router decided while away goes out first; then every verdict is read.
    async fn sync(&mut self) -> Result<(), String> {
        self.flush().await?;
        self.read_all().await?;
        self.beat().await
    }

    /// Every breaker that is open, forced open or closed, told again (after a dropped job).
    fn tell_all(&mut self) {
        for (share, breaker) in self.pool(|p| p.breakers()) {
            if let Some(told) = Told::of_breaker(&breaker) {
                self.pending.insert(share, told);
            }
        }
    }

    /// Publishes every pending verdict, oldest share key first. A share whose keys cannot
    /// be used is skipped (its verdict dropped, the share named) and the others go on;
    /// Redis failing stops at once, and the rest stay pending.
    async fn flush(&mut self) -> Result<(), String> {
        while let Some((share, told)) = self.pending.pop_first() {
            match self.publish(&share, &told).await {
                Ok(Ok(())) => self.link.usable(&share),
                Ok(Err(why)) => self.link.spoiled(&share, &why),
                Err(why) => {
                    self.pending.insert(share, told);
                    return Err(why);
                }
            }
        }
        Ok(())
    }

    /// One verdict out: `Err` when Redis failed, `Ok(Err(why))` when this share's keys in
    /// Redis cannot be used (nothing was written).
    async fn publish(
        &mut self,
        share: &Arc<str>,
        told: &Told,
    ) -> Result<Result<(), String>, String> {
        let link = self.link;
        // Our lease on this machine goes with the verdict it produced.
        let token = link.lock_held().remove(share).unwrap_or_default();
        let left = told.left_ms(Instant::now());
        let mut call = link.scripts.publish.prepare_invoke();
        call.key(link.key("gen", share))
            .key(link.key("verdict", share))
            .key(link.key("cooldown", share))
            .key(link.key("probe", share))
            .arg(link.channel())
            .arg(told.state.as_str())
            .arg(millis(told.cooldown))
            .arg(left)
            .arg(link.node.as_ref())
            .arg(&link.instance)
            .arg(&told.reason)
            .arg(told.failures)
            .arg(&token)
            .arg(share.as_ref())
            .arg(millis(VERDICT_TTL));
        let call = call.invoke_async::<(u64, String)>(&mut self.conn);
        let (generation, why) = bounded(link, call).await?;
        if generation == 0 {
            return Ok(Err(why));
        }
        let mut known = link.known.lock().unwrap_or_else(|e| e.into_inner());
        let k = known.entry(Arc::clone(share)).or_insert(0);
        *k = (*k).max(generation);
        tracing::debug!(share = %share, generation, state = %told.state, "cluster: verdict published");
        Ok(Ok(()))
    }

    async fn release(&mut self, share: &str, token: &str) -> Result<(), String> {
        let link = self.link;
        let mut call = link.scripts.release.prepare_invoke();
        call.key(link.key("probe", share)).arg(token);
        let released = bounded(link, call.invoke_async::<i64>(&mut self.conn)).await;
        link.released(share, token);
        released?;
        // A request of ours may have found this lease on its way out: it may probe now.
        self.pool(|p| p.wake());
        Ok(())
    }

    /// Says this router is alive and learns who else is.
    async fn beat(&mut self) -> Result<(), String> {
        let link = self.link;
        let mut call = link.scripts.heartbeat.prepare_invoke();
        call.key(format!("{}:nodes", link.config.prefix))
            .arg(link.node.as_ref())
            .arg(millis(PEER_WINDOW));
        let mut peers = bounded(link, call.invoke_async::<Vec<String>>(&mut self.conn)).await?;
        peers.retain(|p| p.len() <= 64);
        peers.truncate(64);
        let mut seen = link.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.peers = peers;
        Ok(())
    }
}
