//! The Lua scripts the routers run in Redis: each one round trip, atomic, reading only
//! Redis's own clock (`TIME`, `PX`, `PTTL`), never a host's.

use redis::Script;

/// A transition, published: the generation from `INCR`, the verdict hash, the cooldown as
/// a key that expires with it, our probe lease released if we held it, then `PUBLISH`.
/// The hash's `at_ms` and `cooldown_until_ms` are Redis's own clock, for people reading
/// Redis: no router reads them (the time left is the cooldown key's `PTTL`).
/// KEYS: gen, verdict, cooldown, probe. ARGV: channel, state, cooldown_ms, left_ms, node,
/// instance, reason, failures, token ('' = none), share, verdict_ttl_ms.
const PUBLISH: &str = r"
local g = redis.call('INCR', KEYS[1])
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
return g
";

/// Every verdict, for a (re)sync: per pair of KEYS (verdict, cooldown) one JSON text in the
/// shape of a published message, the time left read by `PTTL`; '' where there is none.
/// Numbers Redis holds that are not finite numbers come back missing, so the reader
/// rejects them instead of the script failing. ARGV: the shares, in order.
const READ: &str = r"
local function num(x)
  local n = tonumber(x)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
local out = {}
for i = 1, #KEYS, 2 do
  local h = redis.call('HGETALL', KEYS[i])
  if #h == 0 then
    out[#out + 1] = ''
  else
    local v = {}
    for j = 1, #h, 2 do v[h[j]] = h[j + 1] end
    local l = redis.call('PTTL', KEYS[i + 1])
    if l < 0 then l = 0 end
    out[#out + 1] = cjson.encode({m = ARGV[(i + 1) / 2], g = num(v.gen), s = v.state,
      c = num(v.cooldown_ms), l = l, n = v.node, i = '', r = v.reason, f = num(v.failures)})
  end
end
return out
";

/// The probe lease: `{-1, ''}` when taken, else `{ms, holder}`: how long its holder still
/// has it, and who (a lease some hand left without expiry gets one, so it cannot wedge the
/// pool). KEYS: probe. ARGV: token, lease_ms.
const TAKE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {-1, ''} end
local holder = redis.call('GET', KEYS[1]) or ''
local l = redis.call('PTTL', KEYS[1])
if l == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {tonumber(ARGV[2]), holder}
end
if l < 0 then return {0, holder} end
return {l, holder}
";

/// Compare-and-`PEXPIRE`: the holder renews its lease, nobody else's. KEYS: probe.
/// ARGV: token, lease_ms.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Compare-and-delete: the holder releases its lease, nobody else's. KEYS: probe.
/// ARGV: token.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// This router is alive (by Redis's clock); the nodes seen within the window come back.
/// KEYS: nodes. ARGV: node, window_ms.
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return redis.call('ZRANGE', KEYS[1], 0, 63)
";

/// The scripts, hashed once.
pub(super) struct Scripts {
    pub publish: Script,
    pub read: Script,
    pub take: Script,
    pub renew: Script,
    pub release: Script,
    pub heartbeat: Script,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            publish: Script::new(PUBLISH),
            read: Script::new(READ),
            take: Script::new(TAKE),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
            heartbeat: Script::new(HEARTBEAT),
        }
    }
}
