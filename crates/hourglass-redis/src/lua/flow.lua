-- A queue's flow control across every node, on the one key of its holds and
-- the one of its bucket (both under the service's hash tag, beside the
-- settings they read). A hold is a task leased (member its id) or a slot
-- reserved by a claim under way (member 'r:' .. claim .. ':' .. i), scored
-- by when it lapses: the task's lease end, so that a hold whose release was
-- lost (a node that died) lapses with the lease it stood for.
-- KEYS: settings holds bucket. ARGV: op queue channel, then the op's own:
--   acquire want claim hold_ms -> {granted, wait_ms}: up to `want` slots
--     reserved for hold_ms and tokens taken; wait_ms (-1: none) is when the
--     next token comes if tokens are what is short. Without limits: {want, -1}.
--   bind claim granted refund, then id until per task claimed -> 'ok': the
--     claim's reservations become its tasks' holds, the rest are dropped, and
--     `refund` tokens go back.
--   release, then ids -> 'ok' (and claims waiting on the queue wake).
--   extend id until -> 'ok'.
local settings, holds, bucket = KEYS[1], KEYS[2], KEYS[3]
local op, q, channel = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()

local function config()
  local raw = redis.call('HGET', settings, q)
  if not raw then return nil end
  local s = cmsgpack.unpack(raw)
  if not s.r and not s.c then return nil end
  return s
end

-- The bucket's tokens now (fractional), and the rate a millisecond.
local function tokens(s)
  local per_ms = s.r / 1000
  local burst = s.b or math.max(1, math.ceil(s.r))
  local stored = redis.call('HMGET', bucket, 'n', 't')
  local n, at = tonumber(stored[1]), tonumber(stored[2])
  if not n then return burst, per_ms, burst end
  if now > at then n = math.min(burst, n + (now - at) * per_ms) end
  return n, per_ms, burst
end

if op == 'acquire' then
  local want, claim, hold_ms = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
  local s = config()
  if not s then return { want, -1 } end
  local granted, wait = want, -1
  if s.c then
    redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
    granted = math.max(0, math.min(granted, s.c - redis.call('ZCARD', holds)))
  end
  if s.r then
    local n, per_ms, burst = tokens(s)
    local whole = math.floor(n + 1e-9)
    if whole < granted then
      granted = whole
      wait = math.ceil((1 - (n - whole) - 1e-9) / per_ms)
    end
    redis.call('HSET', bucket, 'n', tostring(n - granted), 't', now)
  end
  if s.c then
    for i = 1, granted do redis.call('ZADD', holds, now + hold_ms, 'r:' .. claim .. ':' .. i) end
  end
  return { granted, wait }
elseif op == 'bind' then
  local claim, granted, refund = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
  for i = 1, granted do redis.call('ZREM', holds, 'r:' .. claim .. ':' .. i) end
  for i = 7, #ARGV, 2 do redis.call('ZADD', holds, tonumber(ARGV[i + 1]), ARGV[i]) end
  local s = config()
  if refund > 0 and s and s.r then
    local n, _, burst = tokens(s)
    redis.call('HSET', bucket, 'n', tostring(math.min(burst, n + refund)), 't', now)
  end
  return 'ok'
elseif op == 'release' then
  for i = 4, #ARGV do redis.call('ZREM', holds, ARGV[i]) end
  redis.call('PUBLISH', channel, 'p ' .. q)
  return 'ok'
elseif op == 'extend' then
  redis.call('ZADD', holds, 'XX', tonumber(ARGV[5]), ARGV[4])
  return 'ok'
end
return redis.error_reply('unknown op ' .. op)
