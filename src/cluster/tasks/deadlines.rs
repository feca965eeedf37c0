//! Deadlines kept while a task waits (SPEC §10 "Deadline", §15): a claim and a walk check a
//! task's deadline, but a task that is not claimed — blocked on its parents, queued behind
//! a full pool, waiting out a backoff — would pass it unseen. `deadlines` (a sorted set
//! scored by each unfinished task's deadline, unix ms) is looked at by every router's
//! worker every few seconds: a task past its deadline that no router runs is `expired`
//! there (its follow-ups cancelled, as any end cancels them), and listed in `ended` for a
//! router to send its callback. A running task is left to its walk, which ends at the
//! deadline. Deadlines are compared with Redis's clock (`TIME`), as leases are.

use super::{QueueError, SharedQueue};

/// Up to `n` tasks past their deadline, not running, expire; entries of tasks that ended
/// (or are gone) are dropped on the way.
/// KEYS: deadlines, ready, later, open, ended. ARGV: task key prefix, n.
/// Returns how many expired.
pub(super) const EXPIRE_DUE: &str = r"
local now = now_ms()
local base = string.sub(ARGV[1], 1, #ARGV[1] - 2)
local expired = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local k = ARGV[1] .. id
  local st = redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status')
  if not st or finals[st] then
    redis.call('ZREM', KEYS[1], id)
  elseif st ~= 'running' then
    redis.call('ZREM', KEYS[1], id)
    for i = 2, 4 do redis.call('ZREM', KEYS[i], id) end
    forget_owner(KEYS[4], k)
    redis.call('HSET', k, 'status', 'expired', 'lease', '', 'req', '', 'ended_ms', now,
      'ended_by', 'deadline')
    redis.call('RPUSH', KEYS[5], id)
    redis.call('LTRIM', KEYS[5], -1000, -1)
    settle(base, id, 'expired')
    expired = expired + 1
  end
end
return expired
";

impl SharedQueue {
    /// Expires up to `n` tasks whose deadline passed while they waited (not running):
    /// how many.
    pub async fn expire_due(&self, n: u32) -> Result<u64, QueueError> {
        let mut call = self.scripts.expire_due.prepare_invoke();
        call.key(self.key("deadlines"))
            .key(self.key("ready"))
            .key(self.key("later"))
            .key(self.key("open"))
            .key(self.key("ended"))
            .arg(self.key("t:"))
            .arg(n.max(1));
        self.bounded(call.invoke_async(&mut self.conn().await?))
            .await
    }
}
