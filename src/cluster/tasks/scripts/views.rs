//! The scripts that only read: the pool's counts, one task, a page of the list.

/// The pool's queue in numbers: unfinished tasks, running (leased), due now, due later.
/// KEYS: open, leases, ready, later.
pub(super) const COUNTS: &str = r"
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4])}
";

/// One task, whole (request and result too). KEYS: task. ARGV: id, max.
pub(super) const GET: &str = r"
return fetch(KEYS[1], ARGV[1], tonumber(ARGV[2]), true) or {}
";

/// A page of tasks, newest first, without request or result: ids before `before` ('' =
/// the newest), of `owner` (`*`: any) and `status` ('' = any), at most `limit`, looking at
/// no more than `scan` ids. KEYS: all. ARGV: task key prefix, before, limit, status,
/// owner, scan, max. Returns the tasks' `fetch`es, flattened, then the last id looked at
/// ('' when the list ended).
pub(super) const LIST: &str = r"
local from = ARGV[2] == '' and '+' or ('(' .. ARGV[2])
local ids = redis.call('ZREVRANGEBYLEX', KEYS[1], from, '-', 'LIMIT', 0, tonumber(ARGV[6]))
local out, n, last = {}, 0, ''
for _, id in ipairs(ids) do
  last = id
  local k = ARGV[1] .. id
  local owner = redis.call('TYPE', k).ok == 'hash' and redis.call('HGET', k, 'owner')
  if owner and (ARGV[5] == '*' or owner == ARGV[5]) then
    local got = fetch(k, id, tonumber(ARGV[7]), false)
    if got[1] == '!' or ARGV[4] == '' or got[3] == ARGV[4] then
      for _, v in ipairs(got) do out[#out + 1] = v end
      n = n + 1
      if n >= tonumber(ARGV[3]) then return {out, id} end
    end
  end
end
if #ids < tonumber(ARGV[6]) then last = '' end
return {out, last}
";
