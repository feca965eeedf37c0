//! What comes in from Redis: every verdict read on a (re)sync, and the messages on the
//! verdicts channel. All of it is outside input: a share whose keys cannot be used is
//! skipped and named, never the link's trouble; a message claiming a generation far ahead
//! of what this router knows is believed only once Redis's own counter says so.

use std::sync::Arc;
use std::time::SystemTime;

use super::heard::{millis, Heard, MAX_FIELD};
use super::worker::Worker;
use super::{bounded, Pool};

/// A message may claim at most this many generations beyond the newest this router knows
/// for its machine before the claim is checked against Redis's counter. Honest generations
/// step by one per transition in the whole pool, and a router that was away re-reads them
/// all when it reconnects; a forged message far ahead would otherwise make every real
/// verdict look old until the next re-sync.
const GENERATION_JUMP: u64 = 1000;

impl Worker<'_> {
    /// Reads every shared machine's verdict and adopts what is newer than what we know.
    /// Only Redis failing fails it: a share whose keys cannot be used is skipped.
    pub async fn read_all(&mut self) -> Result<(), String> {
        let link = self.link;
        let shares = self.pool(|p| p.shares());
        link.keep_bad(&shares);
        if !shares.is_empty() {
            let mut call = link.scripts.read.prepare_invoke();
            call.arg(MAX_FIELD);
            for share in &shares {
                call.key(link.key("verdict", share))
                    .key(link.key("cooldown", share))
                    .key(link.key("gen", share))
                    .key(link.key("probe", share))
                    .arg(share.as_ref());
            }
            let texts = bounded(link, call.invoke_async::<Vec<String>>(&mut self.conn)).await?;
            for (share, text) in shares.iter().zip(texts) {
                self.read_one(share, &text);
            }
        }
        link.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_sync = Some(SystemTime::now());
        Ok(())
    }

    /// One share's verdict as the read script gave it: '' (none), `!why` (its keys cannot
    /// be used), or the verdict.
    fn read_one(&self, share: &Arc<str>, text: &str) {
        let link = self.link;
        if text.is_empty() {
            // Redis has nothing (it restarted empty): its generations start over.
            link.known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(Arc::clone(share), 0);
            link.usable(share);
            return;
        }
        if let Some(why) = text.strip_prefix('!') {
            link.spoiled(share, why);
            return;
        }
        match Heard::parse(text.as_bytes()) {
            Ok(h) if h.share == **share => {
                link.usable(share);
                self.adopt(h, true);
            }
            Ok(_) => {}
            Err(why) => link.spoiled(share, &format!("its verdict is unreadable: {why}")),
        }
    }

    /// A message on the verdicts channel. Only Redis failing (while checking a claim) is
    /// an error.
    pub async fn heard(&mut self, bytes: &[u8]) -> Result<(), String> {
        let h = match Heard::parse(bytes) {
            Ok(h) if h.instance == self.link.instance => return Ok(()),
            Ok(h) => h,
            Err(why) => {
                tracing::warn!(error = %why, "cluster: an unreadable message on the verdicts channel; ignored");
                return Ok(());
            }
        };
        // Only machines of ours: a message about any other URL is not remembered at all.
        let Some(share) = self.ours(&h.share) else {
            return Ok(());
        };
        let known = self.link.known(&share);
        if h.generation > known.saturating_add(GENERATION_JUMP) {
            let counter = self.counter(&share).await?;
            if counter.is_none_or(|c| h.generation > c) {
                tracing::warn!(share = %share, generation = h.generation, known, counter = counter.unwrap_or(0), by = %h.adopted.node, "cluster: a message claims a generation Redis never counted; ignored");
                return Ok(());
            }
        }
        self.adopt(h, false);
        Ok(())
    }

    /// The share key of ours that `share` names, if any.
    fn ours(&self, share: &str) -> Option<Arc<str>> {
        self.pool(|p| p.shares())
            .into_iter()
            .find(|s| **s == *share)
    }

    /// `{prefix}:gen:{share}` as Redis holds it; `None` when it holds no whole number.
    async fn counter(&mut self, share: &str) -> Result<Option<u64>, String> {
        let link = self.link;
        let mut call = link.scripts.generation.prepare_invoke();
        call.key(link.key("gen", share));
        let g = bounded(link, call.invoke_async::<i64>(&mut self.conn)).await?;
        Ok(u64::try_from(g).ok())
    }

    /// Adopts `h` if it is newer than anything known for its machine. A sync read also
    /// lowers what we know to what Redis holds (it may have restarted empty).
    fn adopt(&self, h: Heard, synced: bool) {
        let link = self.link;
        let Some(share) = self.ours(&h.share) else {
            return;
        };
        {
            let mut known = link.known.lock().unwrap_or_else(|e| e.into_inner());
            let k = known.entry(Arc::clone(&share)).or_insert(0);
            // Older than what we know: a late message is ignored; a sync read that went back
            // means Redis restarted and counts again from there, and its verdict stands.
            if h.generation == *k || (h.generation < *k && !synced) {
                tracing::debug!(share = %share, generation = h.generation, known = *k, "cluster: an older verdict; ignored");
                return;
            }
            *k = h.generation;
        }
        // Our own verdict, read back on a sync: nothing to adopt.
        if synced && *h.adopted.node == *link.node {
            return;
        }
        self.pool(|pool| adopted(pool, &share, &h));
    }
}

/// Hands `h` to the breakers of `share` and says which changed.
fn adopted(pool: &dyn Pool, share: &str, h: &Heard) {
    for machine in pool.adopt(share, &h.adopted) {
        metrics::counter!("labrouter_cluster_adoptions_total", "machine" => machine.clone())
            .increment(1);
        tracing::info!(machine = %machine, state = %h.adopted.state, by = %h.adopted.node, left_ms = millis(h.adopted.left), "cluster: adopted a peer's verdict");
    }
}
