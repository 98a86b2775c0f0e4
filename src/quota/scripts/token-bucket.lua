-- token-bucket.lua: atomic admission of one request for one tenant (the quota store's acquire).
-- Refills the token bucket, prunes expired concurrency leases, then either takes `cost` tokens and a lease
-- named after the request id, or refuses with the reason and the milliseconds until it would succeed.
--
-- KEYS[1]  bucket HASH  {tokens = float tokens, ts = ms of last update, dur = EWMA of lease durations in ms}
-- KEYS[2]  leases ZSET  member = request id, score = lease expiry in ms (same clock as ts)
-- ARGV[1]  rate          tokens per second (float > 0)
-- ARGV[2]  burst         bucket capacity in tokens (integer >= 1)
-- ARGV[3]  cost          tokens to reserve: prompt tokens + max_tokens (integer >= 0)
-- ARGV[4]  max_inflight  leases the tenant may hold at once (integer >= 1)
-- ARGV[5]  request id    lease member; an id with a live lease is refused (reason 2)
-- ARGV[6]  lease_ttl_ms  how long a lease lives without a settle (integer > 0)
-- ARGV[7]  now_ms        '' = use Redis TIME (production); a number = injected clock (tests only)
-- ARGV[8]  default_dur_ms lease duration assumed until the first settle has taught one (integer > 0)
--
-- Returns {admitted, reason, remaining_tokens, reset_ms, inflight, retry_ms}, all integers:
--   admitted          1 = tokens and lease taken, 0 = refused (nothing taken)
--   reason            0 = ok, 1 = tokens (rate_limit_exceeded), 2 = concurrency (concurrency_limit_exceeded)
--   remaining_tokens  floor of the bucket after this call
--   reset_ms          ms until the bucket is full again
--   inflight          leases held after this call
--   retry_ms          ms until this request would be admitted (0 when admitted). When cost > burst it can
--                     never be admitted: reason 1 and retry_ms = ms until the bucket is full (see README).
--
-- Clock and refill: now_ms and refilled_bucket in prelude.lua (prepended by redis-quota-store.ts).

local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local max_inflight = tonumber(ARGV[4])
local id = ARGV[5]
local ttl = tonumber(ARGV[6])
local now = now_ms(ARGV[7])
local tokens, ts, dur = refilled_bucket(KEYS[1], rate, burst, now)

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[2])
-- An id that already holds a live lease is refused as a concurrency conflict: one id, one request in
-- flight. Otherwise a client repeating its x-request-id would run many requests on one lease.
local dup_expiry = tonumber(redis.call('ZSCORE', KEYS[2], id))

local reset_ms = math.ceil((burst - tokens) * 1000 / rate)
local token_wait = 0
if cost > burst then
  token_wait = math.max(reset_ms, 1)
elseif tokens < cost then
  token_wait = math.ceil((cost - tokens) * 1000 / rate)
end

local at_cap = dup_expiry ~= nil or inflight >= max_inflight
local lease_wait = 0
if at_cap then
  -- The lease that must end first: the duplicate's own, else the (inflight - max_inflight + 1)-th earliest.
  -- Its expiry is a hard upper bound; the estimate is the learned mean lease duration minus its age.
  local expiry = dup_expiry
  if expiry == nil then
    local k = inflight - max_inflight
    expiry = tonumber(redis.call('ZRANGE', KEYS[2], k, k, 'WITHSCORES')[2])
  end
  local started = expiry - ttl
  local mean = dur or tonumber(ARGV[8])
  lease_wait = math.ceil(math.min(expiry - now, math.max(0, started + mean - now)))
end

if token_wait > 0 then
  return {0, 1, math.floor(tokens), reset_ms, inflight, math.max(token_wait, lease_wait)}
end
if at_cap then
  return {0, 2, math.floor(tokens), reset_ms, inflight, lease_wait}
end

tokens = tokens - cost
reset_ms = math.ceil((burst - tokens) * 1000 / rate)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', ts))
-- A bucket left alone refills to full; keeping it a minute past that costs little and spares clock edges.
redis.call('PEXPIRE', KEYS[1], reset_ms + 60000)
redis.call('ZADD', KEYS[2], now + ttl, id)
if redis.call('PTTL', KEYS[2]) < ttl + 60000 then redis.call('PEXPIRE', KEYS[2], ttl + 60000) end
return {1, 0, math.floor(tokens), reset_ms, inflight + 1, 0}
