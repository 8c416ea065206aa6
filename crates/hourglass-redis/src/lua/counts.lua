-- Each named queue's counts in one shard. KEYS: a queue's keys per queue.
-- Returns scheduled due urgent leased dead oldest_due (-1: none) per queue.
-- ARGV: the priority below which a due task is urgent.
local urgent_below = '(' .. hex(tonumber(ARGV[1]), PRIORITY_DIGITS)
local out = {}
for first = 1, #KEYS, QUEUE_KEY_COUNT do
  local Q = queue_keys(first)
  local oldest = redis.call('ZRANGE', Q.o, 0, 0)[1]
  local due = redis.call('ZCARD', Q.r) + redis.call('ZCARD', Q.R)
  local urgent = redis.call('ZLEXCOUNT', Q.r, '-', urgent_below) + redis.call('ZLEXCOUNT', Q.R, '-', urgent_below)
  for _, v in ipairs({ redis.call('ZCARD', Q.s), due, urgent, redis.call('ZCARD', Q.l), redis.call('ZCARD', Q.d),
      oldest and member_ms(oldest) or -1 }) do
    table.insert(out, v)
  end
end
return out
