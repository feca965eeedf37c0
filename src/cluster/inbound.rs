//! What comes in from Redis: every verdict read on a (re)sync, and the messages on the
//! verdicts channel. All of it is outside input: a share whose keys cannot be used is
//! skipped and named, never the link's trouble.

use std::sync::Arc;
use std::time::SystemTime;

use super::heard::{millis, Heard, MAX_FIELD};
use super::worker::Worker;
use super::{bounded, Pool};

impl Worker<'_> {
    /// Reads every shared machine's verdict and adopts what is newer than what we know.
    /// Only Redis failing fails it: a share whose keys cannot be used is skipped.
    pub async fn read_all(&mut self) -> Result<(), String> {
        let link = self.link;
        let shares = self.pool().shares();
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

    /// A message on the verdicts channel.
    pub fn heard(&self, bytes: &[u8]) {
        match Heard::parse(bytes) {
            Ok(h) if h.instance == self.link.instance => {}
            Ok(h) => self.adopt(h, false),
            Err(why) => {
                tracing::warn!(error = %why, "cluster: an unreadable message on the verdicts channel; ignored");
            }
        }
    }

    /// Adopts `h` if it is newer than anything known for its machine. A sync read also
    /// lowers what we know to what Redis holds (it may have restarted empty).
    fn adopt(&self, h: Heard, synced: bool) {
        let link = self.link;
        let pool = self.pool();
        // Only machines of ours: a message about any other URL is not remembered at all.
        let Some(share) = pool.shares().into_iter().find(|s| **s == *h.share) else {
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
        adopted(&*pool, &share, &h);
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
