//! Callbacks delivered by the pool, not by one router (README "The shared task queue";
//! SPEC §10 "Callbacks", §15): a finished task whose callback is still to be delivered is
//! in `callbacks` (a sorted set scored by when any router may take it, Redis ms), so a
//! router that dies between attempts, or in one, leaves it to the routers alive.
//!
//! - A task that ends with a callback joins the set in the script that ended it (finish,
//!   cancel), or that took it off `ended` (a script ended it), held by that router.
//! - A router **holds** a delivery before each attempt: its entry is scored the end of a
//!   lease ([`LEASE`], longer than an attempt may take) and the task's hash names the holder
//!   (`cb_holder`), so one router at a time sends it.
//! - After the attempt the holder **notes** it (compare-and-set on `cb_holder`): the task's
//!   `doc` with the delivery's progress (shown on every router), and the entry scored when
//!   the next attempt is due, held by none — or gone once delivered or failed.
//! - Every router's worker takes the entries that are **due** (a backoff that ended, or a
//!   lease that lapsed with its router) and attempts them: the `webhook-id` is the task's,
//!   and the attempts and backoff go on from the count in its `doc`.
//!
//! The set holds at most the finished tasks whose callbacks are pending; an entry whose
//! task is gone (pruned) is dropped when met.

use std::time::Duration;

use redis::Script;

use super::{millis, record, QueueError, SharedQueue};
use crate::task::{Task, TaskId};

/// How long a router holds a delivery for one attempt: the attempt's 10 s and room to wait
/// for a slot on the wire. A router that dies holding it is relieved after this.
pub const LEASE: Duration = Duration::from_secs(30);

/// The scripts' helper, after `follow`'s (`base_of`): a finished task at `k` whose `doc`
/// has a callback (serde writes `"callback":null` for none, and a string value cannot hold
/// that text unescaped) joins `callbacks`, held by `holder` for `lease_ms`, in the script
/// that ended it or took it off `ended`, so no router's death between the two loses it.
pub(super) const LUA: &str = r#"
local function enlist(base, k, id, holder, lease_ms)
  local doc = redis.call('HGET', k, 'doc') or ''
  if string.find(doc, '"callback":null', 1, true) then return end
  local cb = base .. 'callbacks'
  local kind = redis.call('TYPE', cb).ok
  if kind ~= 'zset' and kind ~= 'none' then return end
  redis.call('ZADD', cb, now_ms() + tonumber(lease_ms), id)
  redis.call('HSET', k, 'cb_holder', holder)
end
"#;

/// Up to `n` ids of tasks a script ended (a claim at their second interruption, a deadline,
/// a parent's end, an import), oldest first, taken off the list; each with a callback joins
/// `callbacks`, held by `holder`, whose router sends its first attempt.
/// KEYS: ended. ARGV: n, task key prefix, holder, lease_ms. Returns the ids.
const TAKE_ENDED: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'list' then return {} end
local ids = redis.call('LPOP', KEYS[1], tonumber(ARGV[1])) or {}
for _, id in ipairs(ids) do
  local k = ARGV[2] .. id
  if redis.call('TYPE', k).ok == 'hash' and finals[redis.call('HGET', k, 'status') or ''] then
    enlist(base_of(k, id), k, id, ARGV[3], ARGV[4])
  end
end
return ids
";

/// Holds task `id`'s delivery for `holder`: taken when it is not in the set (the task just
/// ended), due, or `holder`'s already. A task that is gone or unfinished is not held.
/// KEYS: task, callbacks. ARGV: id, holder, lease_ms. Returns 1 when held.
const HOLD: &str = r"
local kind = redis.call('TYPE', KEYS[2]).ok
if kind ~= 'zset' and kind ~= 'none' then return 0 end
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then redis.call('ZREM', KEYS[2], ARGV[1]) return 0 end
if not finals[redis.call('HGET', KEYS[1], 'status') or ''] then return 0 end
local now = now_ms()
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
local holder = redis.call('HGET', KEYS[1], 'cb_holder') or ''
if at and tonumber(at) > now and holder ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[1], 'cb_holder', ARGV[2])
return 1
";

/// Up to `n` deliveries that are due, each now held by `holder`.
/// KEYS: callbacks. ARGV: task key prefix, holder, lease_ms, n. Returns their ids.
const DUE: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return {} end
local now = now_ms()
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))) do
  local k = ARGV[1] .. id
  if redis.call('TYPE', k).ok ~= 'hash' then
    redis.call('ZREM', KEYS[1], id)
  else
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
    redis.call('HSET', k, 'cb_holder', ARGV[2])
    out[#out + 1] = id
  end
end
return out
";

/// The holder notes an attempt: the task's `doc` ('' = kept) and its next attempt due after
/// `delay_ms` ('' = none: delivered, failed, or nothing to deliver). Compare-and-set on
/// `cb_holder`: a holder whose lease lapsed and was taken writes nothing.
/// KEYS: task, callbacks. ARGV: id, holder, doc, delay_ms. Returns 1 when written.
const NOTE: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then redis.call('ZREM', KEYS[2], ARGV[1]) return 0 end
if not finals[redis.call('HGET', KEYS[1], 'status') or ''] then return 0 end
if (redis.call('HGET', KEYS[1], 'cb_holder') or '') ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'doc', ARGV[3]) end
redis.call('HSET', KEYS[1], 'cb_holder', '')
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif redis.call('TYPE', KEYS[2]).ok == 'zset' or redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[4]), ARGV[1])
end
return 1
";

/// The delivery scripts, hashed once.
pub(super) struct Scripts {
    take_ended: Script,
    hold: Script,
    due: Script,
    note: Script,
}

impl Scripts {
    pub fn new(with: impl Fn(&str) -> Script) -> Scripts {
        Scripts {
            take_ended: with(TAKE_ENDED),
            hold: with(HOLD),
            due: with(DUE),
            note: with(NOTE),
        }
    }
}

impl SharedQueue {
    /// Up to `n` tasks a script ended, taken off the list: the first attempts of their
    /// callbacks are this router's, held for it. Ids that are not task ids are dropped.
    pub async fn take_ended(&self, n: u32) -> Result<Vec<TaskId>, QueueError> {
        let mut call = self.scripts.callbacks.take_ended.prepare_invoke();
        call.key(self.key("ended"))
            .arg(n.max(1))
            .arg(self.key("t:"))
            .arg(&self.node)
            .arg(millis(LEASE));
        let ids: Vec<String> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Holds finished task `id`'s callback delivery for this router, for one attempt;
    /// false when another router holds it, its next attempt is not due, or the task is
    /// gone or unfinished.
    pub async fn hold_callback(&self, id: &TaskId) -> Result<bool, QueueError> {
        let mut call = self.scripts.callbacks.hold.prepare_invoke();
        call.key(self.task_key(id))
            .key(self.key("callbacks"))
            .arg(id.as_str())
            .arg(&self.node)
            .arg(millis(LEASE));
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }

    /// Up to `n` callback deliveries that are due (their backoff ended, or the router that
    /// held them died), now held by this router.
    pub async fn due_callbacks(&self, n: u32) -> Result<Vec<TaskId>, QueueError> {
        let mut call = self.scripts.callbacks.due.prepare_invoke();
        call.key(self.key("callbacks"))
            .arg(self.key("t:"))
            .arg(&self.node)
            .arg(millis(LEASE))
            .arg(n.max(1));
        let ids: Vec<String> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Notes an attempt of `id`'s callback held by this router: `task` as it now stands
    /// (`None`: kept as it is), and the next attempt due after `next` (`None`: no more);
    /// false when it was no longer this router's to note.
    pub async fn note_callback(
        &self,
        id: &TaskId,
        task: Option<&Task>,
        next: Option<Duration>,
    ) -> Result<bool, QueueError> {
        let mut call = self.scripts.callbacks.note.prepare_invoke();
        call.key(self.task_key(id))
            .key(self.key("callbacks"))
            .arg(id.as_str())
            .arg(&self.node)
            .arg(task.map_or(String::new(), record::doc))
            .arg(next.map_or(String::new(), |d| millis(d).to_string()));
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }
}
