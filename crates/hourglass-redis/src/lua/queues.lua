-- The registry of queues (one hash, outside the shards): name -> pause
-- ('' running, '0' paused until resumed, or the Unix ms it ends).
-- KEYS: queues. ARGV: op ('use' or 'pause') queue max [pause].
-- Returns 'ok' or 'too_many_queues'.
local queues = KEYS[1]
local op, q, max = ARGV[1], ARGV[2], tonumber(ARGV[3])
if redis.call('HEXISTS', queues, q) == 0 and redis.call('HLEN', queues) >= max then return 'too_many_queues' end
if op == 'pause' then
  redis.call('HSET', queues, q, ARGV[4])
else
  redis.call('HSETNX', queues, q, '')
end
return 'ok'
