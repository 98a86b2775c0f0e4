-- prelude.lua: the clock and the bucket refill, shared by token-bucket.lua, settle.lua and renew.lua.
-- redis-quota-store.ts prepends this file to each of them (one EVALSHA script each), so the math that
-- acquire and settle must agree on exists once.

-- now_ms(arg): '' = Redis TIME in ms (production: every gateway sharing a bucket reads one clock, whatever the
-- skew between hosts); a number = injected clock (tests only).
local function now_ms(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  end
  return tonumber(arg)
end

-- refilled_bucket(key, rate, burst, now) -> tokens, ts, dur
-- The bucket HASH {tokens, ts, dur} read and refilled to `now` at `rate` tokens per second, capped at `burst`.
-- A missing bucket is full. If the clock went backwards (failover to a replica whose clock is behind), ts is
-- kept and refill pauses until it catches up. dur (EWMA of lease durations, ms) may be nil.
local function refilled_bucket(key, rate, burst, now)
  local b = redis.call('HMGET', key, 'tokens', 'ts', 'dur')
  local tokens = tonumber(b[1])
  local ts = tonumber(b[2])
  if tokens == nil or ts == nil then
    tokens = burst
    ts = now
  end
  if now > ts then
    tokens = tokens + (now - ts) * rate / 1000
    ts = now
  end
  if tokens > burst then tokens = burst end
  return tokens, ts, tonumber(b[3])
end
