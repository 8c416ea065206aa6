-- Deletes up to `max` dead tasks of one queue. KEYS: t p, the queue's six
-- keys. ARGV: max. Returns their sequence numbers.
local t, p = KEYS[1], KEYS[2]
local Q = queue_keys(3)
local out = {}
for _, m in ipairs(redis.call('ZRANGE', Q.d, 0, tonumber(ARGV[1]) - 1)) do
  local seq = member_seq(m)
  local rec = load(t, seq)
  redis.call('ZREM', Q.d, m)
  if rec then forget(Q, t, p, seq, rec) end
  table.insert(out, seq)
end
return out
