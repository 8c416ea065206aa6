-- A queue's push target set or removed in one shard: its flag P, and its due
-- tasks moved to the claims that now take them (those with a target of their
-- own stay pushed). KEYS: t, the queue's keys. ARGV: channel shard queue
-- pushes ('1' or '').
-- Returns how many due tasks moved.
local t = KEYS[1]
local Q = queue_keys(2)
local channel, shard, q, pushes = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local from, to = Q.R, Q.r
if pushes then
  redis.call('SET', Q.P, '1')
  from, to = Q.r, Q.R
else
  redis.call('DEL', Q.P)
end
local moved = 0
for _, m in ipairs(redis.call('ZRANGE', from, 0, -1)) do
  if pushes or not load(t, member_seq(m)).h then
    redis.call('ZREM', from, m)
    redis.call('ZADD', to, ZERO, m)
    moved = moved + 1
  end
end
if moved > 0 then hint_due(channel, shard, q) end
return moved
