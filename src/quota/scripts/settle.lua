-- settle.lua: settles one request exactly once: refunds unused reserved tokens and releases its lease.
-- The lease is the proof of a live reservation: only the call that removes it refunds, so a second settle,
-- a settle for a request Redis never admitted, or a settle after the lease expired does nothing.
--
-- KEYS[1]  bucket HASH  {tokens, ts, dur} (see token-bucket.lua)
-- KEYS[2]  leases ZSET  request id -> lease expiry in ms
-- ARGV[1]  rate          tokens per second (float > 0)
-- ARGV[2]  burst         bucket capacity in tokens (integer >= 1)
-- ARGV[3]  request id
-- ARGV[4]  refund        tokens to give back: reserved - used, >= 0 (the bucket is capped at burst)
-- ARGV[5]  lease_ttl_ms  the TTL the lease was taken with (to recover its start for the duration EWMA)
-- ARGV[6]  now_ms        '' = Redis TIME (production); a number = injected clock (tests only)
-- Clock and refill: now_ms and refilled_bucket in prelude.lua (prepended by redis-quota-store.ts).
--
-- Returns 1 when this call settled the request, 0 when there was nothing (left) to settle.

local id = ARGV[3]
local expiry = tonumber(redis.call('ZSCORE', KEYS[2], id))
if expiry == nil then return 0 end
redis.call('ZREM', KEYS[2], id)

local now = now_ms(ARGV[6])
-- An expired lease already gave its slot back; its reservation is kept (the request outlived its lease).
if expiry <= now then return 0 end

local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local refund = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])

-- refilled_bucket caps at burst before the refund and we cap again after: min(min(t, B) + r, B) = min(t + r, B).
local tokens, ts, dur = refilled_bucket(KEYS[1], rate, burst, now)
tokens = tokens + refund
if tokens > burst then tokens = burst end

-- Exponentially weighted mean of lease durations (weight 0.2 per settle): feeds the concurrency Retry-After.
local d = now - (expiry - ttl)
if d < 0 then d = 0 end
if dur == nil then dur = d else dur = dur + (d - dur) * 0.2 end

redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', ts), 'dur', string.format('%.17g', dur))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 60000)
return 1
