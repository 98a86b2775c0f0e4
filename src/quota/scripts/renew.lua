-- renew.lua: extends the leases a live gateway still holds, so a stream longer than the lease TTL keeps its
-- slot and its refund, while a crashed gateway (which stops renewing) loses its leases one TTL later.
-- Only live leases are extended: an expired one stays expired (its slot was already given back).
--
-- KEYS[1]  leases ZSET  request id -> lease expiry in ms
-- ARGV[1]  lease_ttl_ms  new expiry = now + lease_ttl_ms
-- ARGV[2]  now_ms        '' = Redis TIME (production); a number = injected clock (tests only)
-- ARGV[3..] request ids
--
-- Returns the ids that were NOT extended (expired or settled meanwhile): the caller stops renewing them.

local ttl = tonumber(ARGV[1])
local now = now_ms(ARGV[2])  -- prelude.lua
local gone = {}
for i = 3, #ARGV do
  local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if expiry ~= nil and expiry > now then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  else
    gone[#gone + 1] = ARGV[i]
  end
end
if #gone < #ARGV - 2 and redis.call('PTTL', KEYS[1]) < ttl + 60000 then redis.call('PEXPIRE', KEYS[1], ttl + 60000) end
return gone
