//! The pool's limits on running tasks (README "The shared task queue"; SPEC §15):
//! `tasks.max_running` and each machine's `task_slots` counted across the routers, in Redis,
//! so a router that dies gives its slots back when its leases lapse.
//!
//! - **Running** is the `leases` set itself: one entry per running task, added by the claim,
//!   removed by the finish, the give-back, the holder letting go of a task cancelled under it,
//!   and the claim that finds the lease lapsed. A claim takes nothing while it holds
//!   `max_running` entries.
//! - **A machine's slots** are `mslots:{machine}` (a sorted set of task ids, scores 0): a
//!   walk's task takes one before its request goes to the machine, and holds at most one machine's at a time
//!   (its hash names it, `slot`); it is given back by the task's next take, its end, its
//!   give-back, and the claim that finds its lease lapsed. A take also drops members whose
//!   task holds no lease any more, so a slot never stays taken by a task that stopped.

use super::{QueueError, SharedQueue};
use crate::task::{Task, TaskId};

/// The scripts' slot helper, after `scripts`' own: gives back the machine slot the task
/// at `k` holds, if any.
pub(super) const LUA: &str = r"
local function free_slot(base, id, k)
  local m = redis.call('HGET', k, 'slot')
  if m and m ~= '' then
    redis.call('ZREM', base .. 'mslots:' .. m, id)
    redis.call('HSET', k, 'slot', '')
  end
end
";

/// A running task's holder takes one of a machine's slots, unless the pool holds `max` of
/// them (members whose task holds no lease, or another machine's slot, are dropped first).
/// The task gives back the slot it held on another machine. Compare-and-set on the lease.
/// KEYS: task, mslots of the machine. ARGV: id, token, max, machine.
/// Returns 1 when taken (or held already), 0 when not.
pub(super) const TAKE_SLOT: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local h = redis.call('HMGET', KEYS[1], 'status', 'lease', 'slot')
if h[1] ~= 'running' or h[2] ~= ARGV[2] then return 0 end
if redis.call('TYPE', KEYS[2]).ok ~= 'zset' and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if h[3] == ARGV[4] and redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 1 end
local base = base_of(KEYS[1], ARGV[1])
free_slot(base, ARGV[1], KEYS[1])
for _, other in ipairs(redis.call('ZRANGE', KEYS[2], 0, 63)) do
  local k = base .. 't:' .. other
  local o = redis.call('TYPE', k).ok == 'hash' and redis.call('HMGET', k, 'lease', 'slot')
  if not o or (o[1] or '') == '' or o[2] ~= ARGV[4] then redis.call('ZREM', KEYS[2], other) end
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('HSET', KEYS[1], 'slot', ARGV[4])
return 1
";

/// The holder of a task that was cancelled under it (its renew said stop) lets go: its
/// place among the running and its machine slot come back now, not when its lease lapses.
/// KEYS: task, leases. ARGV: id, token. Returns 1 when it was the holder's to let go.
pub(super) const LET_GO: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[1], 'status') == 'running' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
free_slot(base_of(KEYS[1], ARGV[1]), ARGV[1], KEYS[1])
redis.call('HSET', KEYS[1], 'lease', '')
return 1
";

impl SharedQueue {
    /// Takes one of `machine`'s `max` task slots in the pool for task `id`, run under
    /// `token`'s lease; false when the pool holds `max` (or the task is no longer this
    /// router's).
    pub async fn take_slot(
        &self,
        id: &TaskId,
        token: &str,
        machine: &str,
        max: u32,
    ) -> Result<bool, QueueError> {
        let mut call = self.scripts.take_slot.prepare_invoke();
        call.key(self.task_key(id))
            .key(self.key(&format!("mslots:{machine}")))
            .arg(id.as_str())
            .arg(token)
            .arg(max)
            .arg(machine);
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }

    /// `task` ended under `token`'s lease by another hand (a cancel): its running place and
    /// machine slot come back now; false when there was nothing of this router's to let go.
    pub async fn let_go(&self, task: &Task, token: &str) -> Result<bool, QueueError> {
        let mut call = self.scripts.let_go.prepare_invoke();
        call.key(self.task_key(&task.id))
            .key(self.key("leases"))
            .arg(task.id.as_str())
            .arg(token);
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }
}
