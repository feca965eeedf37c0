//! The shared queue's Lua: every change that touches more than one key is one script, so
//! it is atomic, one round trip, and reads only Redis's clock (`TIME`), never a host's.
//!
//! Keys under `{prefix}:tasks:` (README "Several routers", the shared queue):
//! - `t:{id}`, a hash per task. The router writes `doc` (the task without its request and
//!   result), `req`, `result`, `owner`, `score`; the scripts alone write `status`, `lease`
//!   (the holder's token), `lapses` (Redis ms of each lease that lapsed), `started_ms`,
//!   `ended_ms` and `ended_by`, so a status is only ever changed here, by compare-and-set.
//! - `ready` (zset): tasks that may run now, scored priority then age (lowest first).
//! - `later` (zset): tasks that may run from a time on (a backoff), scored by Redis ms.
//! - `leases` (zset): running tasks, scored by when their lease lapses (Redis ms): the
//!   pool's count against `tasks.max_running` (`super::limits`).
//! - `mslots:{machine}` (zset, every score 0): tasks holding one of the machine's
//!   `task_slots` in the pool; a task's hash names the one it holds (`slot`).
//! - `all` (zset, every score 0): every task id, which sort by age, for the list and the prune.
//! - `open` (zset, every score 0): the unfinished tasks, counted against `tasks.max_queued`.
//! - `open_by` (hash): unfinished tasks per owner, counted against `tasks.max_queued_per_key`
//!   (a value that is no whole number counts as none and is dropped at the owner's next end).
//! - `idem:{hash}`: `{fingerprint} {id}`, the pool-wide `Idempotency-Key`.
//! - `seq`: the counter that numbers tasks in submit order.
//! - `deadlines` (zset): unfinished tasks scored by their deadline (unix ms), for the
//!   tasks that expire while they wait (`super::deadlines`).
//! - `ended` (list): tasks a script ended (a claim, a deadline, a parent's end), whose
//!   callbacks a router takes into `callbacks`.
//! - `callbacks` (zset): pending callback deliveries, scored by when any router may take
//!   one (Redis ms); `cb_holder` in the hash names its holder (`super::callbacks`).
//! - `children:{id}` (set): the follow-ups naming task `id` (`super::follow`); a follow-up's
//!   hash keeps `pending`, its parents that have not succeeded.
//!
//! A task's hash is named from its id inside the scripts that walk the zsets (claim, list):
//! one Redis, not a Redis Cluster, as the verdicts are.

use redis::Script;

mod views;

use views::{COUNTS, GET, LIST};

/// Helpers every script shares: Redis's clock, whether a status is final, and one task's
/// hash read whole but bounded: each field's length is looked at (`HSTRLEN`) before it is
/// read, so a huge value stays in Redis; a key of another type is named, not read.
pub(super) const COMMON: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local finals = {succeeded = true, failed = true, cancelled = true, expired = true}
local fields = {'status', 'doc', 'lapses', 'started_ms', 'ended_ms', 'ended_by', 'seq', 'result', 'req'}
local function fetch(k, id, max, whole)
  local kind = redis.call('TYPE', k).ok
  if kind == 'none' then return nil end
  if kind ~= 'hash' then return {'!', id, 'its key holds a ' .. kind .. ', not a task'} end
  local n = whole and #fields or #fields - 2
  for i = 1, n do
    local len = redis.call('HSTRLEN', k, fields[i])
    if len > max then
      return {'!', id, 'its field ' .. fields[i] .. ' is ' .. len .. ' bytes, more than ' .. max}
    end
  end
  local out = {'=', id}
  local got = redis.call('HMGET', k, unpack(fields, 1, n))
  for i = 1, n do out[#out + 1] = got[i] or '' end
  return out
end
local function unqueue(id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
end
local function close(id)
  unqueue(id)
  redis.call('ZREM', KEYS[5], id)
end
local function forget_owner(open_key, task_key)
  local o = redis.call('HGET', task_key, 'owner')
  local by = open_key .. '_by'
  if not o or redis.call('TYPE', by).ok ~= 'hash' then return end
  local n = redis.pcall('HINCRBY', by, o, -1)
  if type(n) ~= 'number' or n <= 0 then redis.call('HDEL', by, o) end
end
";

/// A submit: a new task, or the one its idempotency key already names. Atomic, so two
/// routers submitting one key at once make one task.
/// A resend of a keyed submit is answered however full the queue is; a new task only while
/// the pool holds fewer than `max_open` unfinished ones (0: no bound), and its owner fewer
/// than `max_owner` (0: no bound).
/// A follow-up's parents (ARGV from the 11th) must be its owner's: it is stored `blocked`
/// on those that have not ended, linked to them (`follow`), and refused when one is
/// unknown or ended without success (unless it comes ended already: then it is stored so).
/// An unfinished task joins `deadlines` (`super::deadlines`).
/// KEYS: task, ready, later, leases, all, idem, seq, open. ARGV: id, status, score, owner,
/// doc, req, fingerprint ('' = no key), max_open, max_owner, deadline_ms, parent ids...
/// Returns `{'new', status stored}`, `{'existing', id}`, `{'reused', ''}`, `{'full', count}`,
/// `{'keyfull', count}`, `{'unknown', index}`, `{'doomed', index, status}` or `{'!', why}`.
const SUBMIT: &str = r"
local fp = ARGV[7]
if fp ~= '' then
  local kind = redis.call('TYPE', KEYS[6]).ok
  if kind == 'string' then
    local v = redis.call('STRLEN', KEYS[6]) <= 200 and redis.call('GET', KEYS[6]) or ''
    local sp = string.find(v, ' ', 1, true)
    if not sp then return {'!', 'its idempotency key holds no task'} end
    if string.sub(v, 1, sp - 1) == fp then return {'existing', string.sub(v, sp + 1)} end
    return {'reused', ''}
  elseif kind ~= 'none' then
    return {'!', 'its idempotency key holds a ' .. kind .. ', not a task'}
  end
end
local open = redis.call('ZCARD', KEYS[8])
if tonumber(ARGV[8]) > 0 and open >= tonumber(ARGV[8]) then return {'full', tostring(open)} end
local by = KEYS[8] .. '_by'
local by_kind = redis.call('TYPE', by).ok
if by_kind ~= 'hash' and by_kind ~= 'none' then return {'!', 'its owner counts hold a ' .. by_kind .. ', not a hash'} end
local mine = by_kind == 'hash' and tonumber(redis.call('HGET', by, ARGV[4]) or '0') or 0
if tonumber(ARGV[9]) > 0 and mine and mine >= tonumber(ARGV[9]) then return {'keyfull', tostring(mine)} end
local base = base_of(KEYS[1], ARGV[1])
local ended = finals[ARGV[2]]
local status, pending = ARGV[2], 0
if not ended then
  local refused
  refused, pending = check_parents(base, ARGV[4], 11)
  if refused then return refused end
  if pending > 0 then status = 'blocked' elseif status == 'blocked' then status = 'queued' end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'!', 'a task with its id exists'} end
local seq = redis.pcall('INCR', KEYS[7])
if type(seq) ~= 'number' then return {'!', 'the task counter holds no whole number'} end
redis.call('HSET', KEYS[1], 'status', status, 'owner', ARGV[4], 'doc', ARGV[5],
  'req', ARGV[6], 'score', ARGV[3], 'seq', seq, 'lease', '', 'lapses', '', 'pending', pending)
if status == 'queued' or status == 'waiting' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
redis.call('ZADD', KEYS[5], 0, ARGV[1])
if ended then
  redis.call('HSET', KEYS[1], 'req', '', 'ended_ms', now_ms(), 'ended_by', 'finish')
else
  redis.call('ZADD', KEYS[8], 0, ARGV[1])
  if type(redis.pcall('HINCRBY', by, ARGV[4], 1)) ~= 'number' then redis.call('HSET', by, ARGV[4], 1) end
  link_parents(base, ARGV[1], 11)
  redis.call('ZADD', base .. 'deadlines', tonumber(ARGV[10]) or 0, ARGV[1])
end
if fp ~= '' then
  redis.call('SET', KEYS[6], fp .. ' ' .. ARGV[1])
  redis.call('HSET', KEYS[1], 'idem', KEYS[6])
end
return {'new', status}
";

/// The next task to run, under a lease. First the leases that lapsed (their router died):
/// each task goes back to `ready` with the lapse recorded, or is failed at its second
/// (`ended_by` = `interrupted`); then tasks due from `later` join `ready`; then the head of
/// `ready` (priority, then age) is taken. Entries that name no runnable task are dropped.
/// A task failed so is listed in `ended` (at most the last 1000), for a router to send its
/// callback (`super::callbacks`).
/// Nothing is taken while the pool runs `max_running` tasks (`leases`, 0: no bound), and a
/// lapsed lease gives back its machine slot (`limits`).
/// KEYS: open, ready, later, leases, ended. ARGV: task key prefix, token, lease_ms, max,
/// max_running.
/// Returns `{}` when nothing is due, else what [`COMMON`]'s `fetch` returns (whole).
const CLAIM: &str = r"
local now = now_ms()
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 32)) do
  redis.call('ZREM', KEYS[4], id)
  local k = ARGV[1] .. id
  if redis.call('TYPE', k).ok == 'hash' then free_slot(base_of(k, id), id, k) end
  if redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status') == 'running' then
    local lapses = redis.call('HSTRLEN', k, 'lapses') <= 64 and redis.call('HGET', k, 'lapses') or 'x,x'
    if lapses == '' then lapses = tostring(now) else lapses = lapses .. ',' .. now end
    redis.call('HSET', k, 'lapses', lapses, 'lease', '')
    if string.find(lapses, ',', 1, true) then
      redis.call('HSET', k, 'status', 'failed', 'ended_ms', now, 'ended_by', 'interrupted', 'req', '')
      redis.call('ZREM', KEYS[1], id)
      forget_owner(KEYS[1], k)
      redis.call('RPUSH', KEYS[5], id)
      redis.call('LTRIM', KEYS[5], -1000, -1)
      settle(base_of(k, id), id, 'failed')
    else
      redis.call('HSET', k, 'status', 'queued')
      redis.call('ZADD', KEYS[2], tonumber(redis.call('HGET', k, 'score')) or 0, id)
    end
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64)) do
  redis.call('ZREM', KEYS[3], id)
  local k = ARGV[1] .. id
  if redis.call('TYPE', k).ok == 'hash' then
    redis.call('ZADD', KEYS[2], tonumber(redis.call('HGET', k, 'score')) or 0, id)
  end
end
local most = tonumber(ARGV[5]) or 0
if most > 0 and redis.call('ZCARD', KEYS[4]) >= most then return {} end
for _ = 1, 64 do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #head == 0 then return {} end
  local id = head[1]
  redis.call('ZREM', KEYS[2], id)
  local k = ARGV[1] .. id
  local got = fetch(k, id, tonumber(ARGV[4]), true)
  if got and got[1] == '!' then return got end
  local s = got and got[3]
  if s == 'queued' or s == 'waiting' then
    redis.call('HSET', k, 'status', 'running', 'lease', ARGV[2])
    if redis.call('HEXISTS', k, 'started_ms') == 0 then redis.call('HSET', k, 'started_ms', now) end
    redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), id)
    return fetch(k, id, tonumber(ARGV[4]), true)
  end
end
return {}
";

/// The holder keeps its lease, and may save the task's progress (`doc`) with it. Anyone
/// else (its lease lapsed and another took it, or the task was cancelled or finished)
/// gets 0 and must stop.
/// KEYS: task, ready, later, leases, open. ARGV: id, token, lease_ms, doc ('' = keep).
const RENEW: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local s = redis.call('HMGET', KEYS[1], 'status', 'lease')
if s[1] ~= 'running' or s[2] ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[4], now_ms() + tonumber(ARGV[3]), ARGV[1])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'doc', ARGV[4]) end
return 1
";

/// The holder gives its task back unfinished: `queued` or `waiting`, due at once or after
/// `delay_ms` (a backoff). Compare-and-set on the lease, as [`RENEW`].
/// KEYS: task, ready, later, leases, open. ARGV: id, token, status, doc, delay_ms.
const RELEASE: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local s = redis.call('HMGET', KEYS[1], 'status', 'lease', 'score')
if s[1] ~= 'running' or s[2] ~= ARGV[2] then return 0 end
unqueue(ARGV[1])
free_slot(base_of(KEYS[1], ARGV[1]), ARGV[1], KEYS[1])
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'doc', ARGV[4], 'lease', '')
local delay = tonumber(ARGV[5])
if delay > 0 then
  redis.call('ZADD', KEYS[3], now_ms() + delay, ARGV[1])
else
  redis.call('ZADD', KEYS[2], tonumber(s[3]) or 0, ARGV[1])
end
return 1
";

/// A task's end, compare-and-set on its status: the first final status written wins,
/// whoever writes it (a router whose lease lapsed while Redis was away included); any
/// later one is dropped. The request body goes with the end; the result stays.
/// A task with a callback joins `callbacks`, held by the router that ended it
/// (`super::callbacks`).
/// KEYS: task, ready, later, leases, open. ARGV: id, status, doc, result, holder, lease_ms.
/// Returns `{1, status}` when written, `{0, status}` (the final one) when dropped, `{0, ''}`
/// when there is no such task.
const FINISH: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return {0, ''} end
local s = redis.call('HGET', KEYS[1], 'status') or ''
if finals[s] then return {0, s} end
close(ARGV[1])
free_slot(base_of(KEYS[1], ARGV[1]), ARGV[1], KEYS[1])
forget_owner(KEYS[5], KEYS[1])
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'doc', ARGV[3], 'result', ARGV[4],
  'lease', '', 'req', '', 'ended_ms', now_ms(), 'ended_by', 'finish')
settle(base_of(KEYS[1], ARGV[1]), ARGV[1], ARGV[2])
if ARGV[5] then enlist(base_of(KEYS[1], ARGV[1]), KEYS[1], ARGV[1], ARGV[5], ARGV[6]) end
return {1, ARGV[2]}
";

/// A cancel by the task's owner (`*`: any): compare-and-set as [`FINISH`]. A running
/// task's holder learns it at its next renew and stops; until it lets go (or its lease
/// lapses) the task keeps its lease and machine slot, counted as running (`limits`).
/// A task with a callback joins `callbacks`, held by the router that cancelled it.
/// KEYS: task, ready, later, leases, open. ARGV: id, owner, holder, lease_ms.
/// Returns `{1, status before}`, `{0, final status}`, or `{0, ''}` (no such task of this owner).
const CANCEL: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return {0, ''} end
local s = redis.call('HMGET', KEYS[1], 'status', 'owner')
if ARGV[2] ~= '*' and s[2] ~= ARGV[2] then return {0, ''} end
local st = s[1] or ''
if finals[st] then return {0, st} end
if st == 'running' then
  for _, z in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do redis.call('ZREM', z, ARGV[1]) end
else
  close(ARGV[1])
  redis.call('HSET', KEYS[1], 'lease', '')
end
forget_owner(KEYS[5], KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'req', '',
  'ended_ms', now_ms(), 'ended_by', 'cancel')
settle(base_of(KEYS[1], ARGV[1]), ARGV[1], 'cancelled')
if ARGV[3] then enlist(base_of(KEYS[1], ARGV[1]), KEYS[1], ARGV[1], ARGV[3], ARGV[4]) end
return {1, st}
";

/// A breaker changed somewhere in the pool: waiting tasks due soonest come back to `ready`
/// at once (one of them may be the probe) instead of at the end of their poll; tasks in a
/// backoff keep it. KEYS: later, ready. ARGV: task key prefix, at most how many to look at.
/// Returns how many came back.
const WAKE: &str = r"
local woken = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)) do
  local k = ARGV[1] .. id
  if redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'status') == 'waiting' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], tonumber(redis.call('HGET', k, 'score')) or 0, id)
    woken = woken + 1
  end
end
return woken
";

/// A finished task's `doc` written again, to record its callback's delivery; nothing else
/// of a finished task changes, and an unfinished one is left alone.
/// KEYS: task. ARGV: doc. Returns 1 when written.
const NOTE: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
if not finals[redis.call('HGET', KEYS[1], 'status') or ''] then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1])
return 1
";

/// A task claimed but unreadable (a value another hand spoiled) is set aside, `failed`,
/// so it never comes back to the head of the queue. Compare-and-set on the lease.
/// KEYS: task, ready, later, leases, open. ARGV: id, token.
const SET_ASIDE: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then return 0 end
close(ARGV[1])
free_slot(base_of(KEYS[1], ARGV[1]), ARGV[1], KEYS[1])
forget_owner(KEYS[5], KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'failed', 'lease', '', 'ended_ms', now_ms(), 'ended_by', 'spoiled')
settle(base_of(KEYS[1], ARGV[1]), ARGV[1], 'failed')
return 1
";

/// Finished tasks that ended more than `keep_ms` ago go, with their idempotency keys
/// (README "Tasks": `tasks.keep`), oldest first, looking at no more than `scan` ids; a
/// parent stays while a follow-up it names has not ended (`follow`).
/// KEYS: all. ARGV: task key prefix, keep_ms, scan. Returns how many went.
const PRUNE: &str = r"
local before = now_ms() - tonumber(ARGV[2])
local gone = 0
for _, id in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], '-', '+', 'LIMIT', 0, tonumber(ARGV[3]))) do
  local k = ARGV[1] .. id
  if redis.call('TYPE', k).ok ~= 'hash' then
    redis.call('ZREM', KEYS[1], id)
  else
    local h = redis.call('HMGET', k, 'status', 'ended_ms', 'idem')
    local ended = tonumber(h[2] or '')
    if finals[h[1] or ''] and ended and ended <= before and not followed(base_of(k, id), id) then
      local idem = h[3] or ''
      if idem ~= '' and redis.call('TYPE', idem).ok == 'string'
        and redis.call('STRLEN', idem) <= 200
        and string.sub(redis.call('GET', idem), -#id - 1) == ' ' .. id then
        redis.call('DEL', idem)
      end
      redis.call('DEL', k)
      redis.call('ZREM', KEYS[1], id)
      gone = gone + 1
    end
  end
end
return gone
";

/// The scripts, hashed once.
pub(super) struct Scripts {
    pub submit: Script,
    pub claim: Script,
    pub renew: Script,
    pub release: Script,
    pub finish: Script,
    pub cancel: Script,
    pub note: Script,
    pub wake: Script,
    pub counts: Script,
    pub set_aside: Script,
    pub get: Script,
    pub list: Script,
    pub prune: Script,
    pub take_slot: Script,
    pub let_go: Script,
    pub expire_due: Script,
    pub callbacks: super::callbacks::Scripts,
}

impl Scripts {
    pub fn new() -> Scripts {
        let helpers = format!(
            "{COMMON}{}{}{}",
            super::follow::LUA,
            super::limits::LUA,
            super::callbacks::LUA
        );
        let with = |body: &str| Script::new(&format!("{helpers}{body}"));
        Scripts {
            submit: with(SUBMIT),
            claim: with(CLAIM),
            renew: with(RENEW),
            release: with(RELEASE),
            finish: with(FINISH),
            cancel: with(CANCEL),
            note: with(NOTE),
            wake: with(WAKE),
            counts: with(COUNTS),
            set_aside: with(SET_ASIDE),
            get: with(GET),
            list: with(LIST),
            prune: with(PRUNE),
            take_slot: with(super::limits::TAKE_SLOT),
            let_go: with(super::limits::LET_GO),
            expire_due: with(super::deadlines::EXPIRE_DUE),
            callbacks: super::callbacks::Scripts::new(with),
        }
    }
}
