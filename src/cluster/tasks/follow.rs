//! Follow-ups in the pool's queue (README "The shared task queue"; SPEC §10, §15): a task
//! with `after` is stored `blocked` and is not claimable until every parent succeeded; the
//! script that ends a parent readies its follow-ups or cancels them, down the chain, in the
//! same atomic step. What a parent's answer gives a follow-up (`{{after.N}}`) is read by the
//! router that runs the follow-up, as the local queue reads it.
//!
//! Every end of a task goes through `settle` here (it also takes the task off
//! `deadlines`, `super::deadlines`).
//!
//! Keys (beside `scripts`' own): `children:{id}`, a set of the follow-ups naming task `id`,
//! each one's `pending` (its parents that have not succeeded) in its hash. A set holds at
//! most the pool's unfinished tasks (`tasks.max_queued`) and those that ended since: a
//! cascade deletes it, the prune empties it of follow-ups that ended, and a parent is kept
//! (not pruned) while a follow-up it names has not ended.

use super::answers::spoiled;
use super::{record, QueueError, SharedQueue};
use crate::outcome::TaskStatus;
use crate::store::tasks::Idem;
use crate::task::{Task, TaskId};

/// The scripts' follow-up helpers, after `scripts`' own (`finals`, `now_ms`, `forget_owner`).
pub(super) const LUA: &str = r"
local function base_of(task_key, id)
  return string.sub(task_key, 1, #task_key - #id - 2)
end
local function check_parents(base, owner, first)
  local pending = 0
  for i = first, #ARGV do
    local k = base .. 't:' .. ARGV[i]
    if redis.call('TYPE', k).ok ~= 'hash' then return {'unknown', tostring(i - first)} end
    local h = redis.call('HMGET', k, 'status', 'owner')
    if h[2] ~= owner then return {'unknown', tostring(i - first)} end
    local st = h[1] or ''
    if finals[st] then
      if st ~= 'succeeded' then return {'doomed', tostring(i - first), st} end
    else
      pending = pending + 1
    end
  end
  return nil, pending
end
local function link_parents(base, id, first)
  for i = first, #ARGV do redis.call('SADD', base .. 'children:' .. ARGV[i], id) end
end
local function settle(base, id, status)
  redis.call('ZREM', base .. 'deadlines', id)
  local ck = base .. 'children:' .. id
  if redis.call('TYPE', ck).ok ~= 'set' then return end
  if status == 'succeeded' then
    for _, c in ipairs(redis.call('SMEMBERS', ck)) do
      local k = base .. 't:' .. c
      if redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status') == 'blocked' then
        local n = redis.pcall('HINCRBY', k, 'pending', -1)
        if type(n) ~= 'number' or n <= 0 then
          redis.call('HSET', k, 'status', 'queued', 'pending', 0)
          redis.call('ZADD', base .. 'ready', tonumber(redis.call('HGET', k, 'score')) or 0, c)
        end
      end
    end
    return
  end
  local now = now_ms()
  local todo = {{id, status}}
  while #todo > 0 do
    local p = table.remove(todo)
    local pk = base .. 'children:' .. p[1]
    if redis.call('TYPE', pk).ok == 'set' then
      for _, c in ipairs(redis.call('SMEMBERS', pk)) do
        local k = base .. 't:' .. c
        local st = redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status')
        if st and not finals[st] and st ~= 'running' then
          for _, z in ipairs({'ready', 'later', 'open', 'deadlines'}) do
            redis.call('ZREM', base .. z, c)
          end
          forget_owner(base .. 'open', k)
          redis.call('HSET', k, 'status', 'cancelled', 'req', '', 'ended_ms', now,
            'ended_by', 'after:' .. p[1] .. ':' .. p[2])
          redis.call('RPUSH', base .. 'ended', c)
          redis.call('LTRIM', base .. 'ended', -1000, -1)
          todo[#todo + 1] = {c, 'cancelled'}
        end
      end
      redis.call('DEL', pk)
    end
  end
end
local function followed(base, id)
  local ck = base .. 'children:' .. id
  if redis.call('TYPE', ck).ok ~= 'set' then return false end
  for _, c in ipairs(redis.call('SRANDMEMBER', ck, 64)) do
    local k = base .. 't:' .. c
    local st = redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status')
    if st and not finals[st] then return true end
    redis.call('SREM', ck, c)
  end
  if redis.call('SCARD', ck) > 0 then return true end
  redis.call('DEL', ck)
  return false
end
";

/// What a submit did, follow-ups included.
#[derive(Debug, PartialEq, Eq)]
pub enum Linked {
    /// Stored, in this status: `blocked` while a parent has not succeeded, else as sent
    /// (a follow-up whose parents all succeeded already is `queued`).
    New(TaskStatus),
    /// Its Idempotency-Key names this task already (same body).
    Existing(TaskId),
    /// Its Idempotency-Key was used with another body.
    KeyReused,
    /// `after[i]` names no task of its owner in the pool: nothing stored.
    UnknownAfter(usize),
    /// `after[i]` ended so, without success: nothing stored; the task is to be stored
    /// cancelled (`dependency_failed`), as the local queue does.
    Doomed(usize, TaskStatus),
}

impl SharedQueue {
    /// Stores `task` (queued, waiting, blocked, or already ended) with its request, linked
    /// to its parents (`task.after`), unless its key names one already, the pool holds
    /// `max_open` unfinished tasks (0: no bound) or its owner `max_owner` (`None`: no
    /// bound), or a parent is unknown or ended without success. [`Linked::New`] only once
    /// Redis acknowledged the write.
    pub async fn submit_linked(
        &self,
        task: &Task,
        request: &[u8],
        idem: Option<&Idem>,
        (max_open, max_owner): (u32, Option<u32>),
    ) -> Result<Linked, QueueError> {
        let mut call = self.scripts.submit.prepare_invoke();
        let idem_key = idem.map_or(String::new(), |i| i.key.clone());
        call.key(self.task_key(&task.id))
            .key(self.key("ready"))
            .key(self.key("later"))
            .key(self.key("leases"))
            .key(self.key("all"))
            .key(self.key(&format!("idem:{idem_key}")))
            .key(self.key("seq"))
            .key(self.key("open"))
            .arg(task.id.as_str())
            .arg(task.status.as_str())
            .arg(super::score(task))
            .arg(&task.owner)
            .arg(record::doc(task))
            .arg(request)
            .arg(idem.map_or("", |i| i.fingerprint.as_str()))
            .arg(max_open)
            .arg(max_owner.unwrap_or(0))
            .arg(task.deadline_ms);
        for p in &task.after {
            call.arg(p.as_str());
        }
        let got: Vec<String> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        let at = |i: usize| got.get(i).map_or("", String::as_str);
        let index = || {
            at(1)
                .parse::<usize>()
                .ok()
                .filter(|&i| i < task.after.len())
                .ok_or_else(|| spoiled(task.id.as_str(), format!("after index '{}'", at(1))))
        };
        let status = |s: &str| {
            s.parse::<TaskStatus>()
                .map_err(|e| spoiled(task.id.as_str(), e.to_string()))
        };
        match at(0) {
            "new" => Ok(Linked::New(status(at(1))?)),
            "reused" => Ok(Linked::KeyReused),
            "full" => Err(QueueError::Full(
                at(1).parse().unwrap_or(u64::from(max_open)),
            )),
            "keyfull" => Err(QueueError::KeyFull(max_owner.unwrap_or(0))),
            "existing" => at(1)
                .parse::<TaskId>()
                .map(Linked::Existing)
                .map_err(|why| spoiled(at(1), why)),
            "unknown" => Ok(Linked::UnknownAfter(index()?)),
            "doomed" => Ok(Linked::Doomed(index()?, status(at(2))?)),
            _ => Err(spoiled(task.id.as_str(), at(1).to_string())),
        }
    }
}
