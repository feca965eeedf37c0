//! The Lua scripts the routers run in Redis: each one round trip, atomic, reading only
//! Redis's own clock (`TIME`, `PX`, `PTTL`), never a host's.

use redis::Script;

/// What makes one share's keys unusable, prepended to the scripts that touch them, so a
/// read, a publish and a probe lease agree on which shares are bad. Another hand may have
/// left anything there: a verdict key that is no hash, a generation that is no whole number
/// (or one no reader believes, from 9e15 on), a probe key that is no lease. Only `TYPE` and
/// `STRLEN` look at a key before it is read, so nothing large is ever copied.
const SPOILED: &str = r"
local function probe_spoiled(p)
  local pt = redis.call('TYPE', p).ok
  if pt ~= 'string' and pt ~= 'none' then return 'its probe key holds a ' .. pt .. ', not a lease' end
  if pt == 'string' and redis.call('STRLEN', p) > 200 then return 'its probe key holds no lease' end
  return nil
end
local function spoiled(v, g, p)
  local vt = redis.call('TYPE', v).ok
  if vt ~= 'hash' and vt ~= 'none' then return 'its verdict key holds a ' .. vt .. ', not a hash' end
  local gt = redis.call('TYPE', g).ok
  if gt ~= 'string' and gt ~= 'none' then return 'its gen key holds a ' .. gt .. ', not a whole number' end
  if gt == 'string' then
    local s = redis.call('STRLEN', g) <= 16 and redis.call('GET', g) or ''
    if not (s == '0' or string.match(s, '^[1-9]%d*$')) or tonumber(s) >= 9e15 then
      return 'its gen key holds no whole number below 9e15'
    end
  end
  return probe_spoiled(p)
end
";

/// A transition, published: the generation from `INCR`, the verdict hash, the cooldown as
/// a key that expires with it, our probe lease released if we held it, then `PUBLISH`.
/// The hash's `at_ms` and `cooldown_until_ms` are Redis's own clock, for people reading
/// Redis: no router reads them (the time left is the cooldown key's `PTTL`).
/// Keys some other hand spoiled (see [`SPOILED`]) are checked before anything is written:
/// the answer is `{0, why}` and nothing changes, so one bad machine's keys never fail the
/// script, nor the link.
/// KEYS: gen, verdict, cooldown, probe. ARGV: channel, state, cooldown_ms, left_ms, node,
/// instance, reason, failures, token ('' = none), share, verdict_ttl_ms.
/// Returns `{generation, ''}` or `{0, why}`.
const PUBLISH: &str = r"
local why = spoiled(KEYS[2], KEYS[1], KEYS[4])
if why then return {0, why} end
local g = redis.pcall('INCR', KEYS[1])
if type(g) ~= 'number' then return {0, 'its gen key holds no whole number'} end
if g >= 9e15 then return {0, 'its gen key went beyond 9e15'} end
local left = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untl = 0
if ARGV[2] == 'open' then untl = now + left end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'gen', g, 'cooldown_ms', ARGV[3],
           'node', ARGV[5], 'reason', ARGV[7], 'failures', ARGV[8],
           'at_ms', now, 'cooldown_until_ms', untl)
redis.call('PEXPIRE', KEYS[2], ARGV[11])
if ARGV[2] == 'open' and left > 0 then
  redis.call('SET', KEYS[3], g, 'PX', left)
else
  redis.call('DEL', KEYS[3])
end
if ARGV[9] ~= '' and redis.call('GET', KEYS[4]) == ARGV[9] then
  redis.call('DEL', KEYS[4])
end
redis.call('PUBLISH', ARGV[1], cjson.encode({m = ARGV[10], g = g, s = ARGV[2],
  c = tonumber(ARGV[3]), l = left, n = ARGV[5], i = ARGV[6], r = ARGV[7],
  f = tonumber(ARGV[8])}))
return {g, ''}
";

/// Every verdict, for a (re)sync: per four KEYS (verdict, cooldown, gen, probe) one JSON
/// text in the shape of a published message, the time left read by `PTTL`; '' where there
/// is none; `!why` where the keys cannot be used. What leaves Redis is bounded: only the six
/// fields a verdict has are read (`HMGET`, never `HGETALL`), each after `HSTRLEN` says it is
/// at most `max_field` bytes, so a huge field stays in Redis and costs the router nothing.
/// Numbers Redis holds that are not finite numbers come back missing, so the reader
/// rejects them instead of the script failing. ARGV: max_field, then the shares, in order.
const READ: &str = r"
local max = tonumber(ARGV[1])
local fields = {'state', 'gen', 'cooldown_ms', 'node', 'reason', 'failures'}
local function num(x)
  local n = tonumber(x)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
local function unusable(i)
  local why = spoiled(KEYS[i], KEYS[i + 2], KEYS[i + 3])
  if why then return why end
  for _, f in ipairs(fields) do
    local n = redis.call('HSTRLEN', KEYS[i], f)
    if n > max then
      return 'the field ' .. f .. ' of its verdict is ' .. n .. ' bytes, more than ' .. max
    end
  end
  return nil
end
local out = {}
for i = 1, #KEYS, 4 do
  local why = unusable(i)
  if why then
    out[#out + 1] = '!' .. why
  elseif redis.call('EXISTS', KEYS[i]) == 0 then
    out[#out + 1] = ''
  else
    local h = redis.call('HMGET', KEYS[i], unpack(fields))
    local v = {}
    for j, f in ipairs(fields) do if h[j] then v[f] = h[j] end end
    local l = redis.call('PTTL', KEYS[i + 1])
    if l < 0 then l = 0 end
    out[#out + 1] = cjson.encode({m = ARGV[(i + 3) / 4 + 1], g = num(v.gen), s = v.state,
      c = num(v.cooldown_ms), l = l, n = v.node, i = '', r = v.reason, f = num(v.failures)})
  end
end
return out
";

/// The generation counter of one share, to check a message that claims one far ahead of
/// what this router knows: -1 when there is none that is a whole number. KEYS: gen.
const GENERATION: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'string' or redis.call('STRLEN', KEYS[1]) > 16 then
  return -1
end
local g = redis.call('GET', KEYS[1])
if not string.match(g, '^%d+$') then return -1 end
return tonumber(g)
";

/// The probe lease: `{-1, ''}` when taken, else `{ms, holder}`: how long its holder still
/// has it, and who (a lease some hand left without expiry gets one, so it cannot wedge the
/// pool); `{-2, why}` when the key holds something no router wrote (no lease at all).
/// KEYS: probe. ARGV: token, lease_ms.
const TAKE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {-1, ''} end
local why = probe_spoiled(KEYS[1])
if why then return {-2, why} end
local holder = redis.call('GET', KEYS[1]) or ''
local l = redis.call('PTTL', KEYS[1])
if l == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {tonumber(ARGV[2]), holder}
end
if l < 0 then return {0, holder} end
return {l, holder}
";

/// Compare-and-`PEXPIRE`: the holder renews its lease, nobody else's (nor a key of
/// another type, which `GET` would refuse). KEYS: probe. ARGV: token, lease_ms.
const RENEW: &str = r"
if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Compare-and-delete: the holder releases its lease, nobody else's. KEYS: probe.
/// ARGV: token.
const RELEASE: &str = r"
if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// This router is alive (by Redis's clock); the nodes seen within the window come back,
/// at most 64 of at most 64 bytes each. The key is the routers' own and short-lived: one
/// of another type is replaced, not a reason to stop beating.
/// KEYS: nodes. ARGV: node, window_ms.
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'zset' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
local out = {}
for _, n in ipairs(redis.call('ZRANGE', KEYS[1], 0, 63)) do
  if #n <= 64 then out[#out + 1] = n end
end
return out
";

/// The scripts, hashed once.
pub(super) struct Scripts {
    pub publish: Script,
    pub read: Script,
    pub generation: Script,
    pub take: Script,
    pub renew: Script,
    pub release: Script,
    pub heartbeat: Script,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            publish: Script::new(&format!("{SPOILED}{PUBLISH}")),
            read: Script::new(&format!("{SPOILED}{READ}")),
            generation: Script::new(GENERATION),
            take: Script::new(&format!("{SPOILED}{TAKE}")),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
            heartbeat: Script::new(HEARTBEAT),
        }
    }
}
