-- Reads tasks. KEYS: t p, and a sorted set to list (or the t key again).
-- ARGV: mode ('ids': then sequence numbers; 'range': then start and count,
-- a BYLEX range of the set).
-- Returns {now, then seq record payload per task found}.
local t, p, z = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local out = { now }
local seqs = {}
if ARGV[1] == 'ids' then
  for i = 2, #ARGV do table.insert(seqs, tonumber(ARGV[i])) end
else
  for _, m in ipairs(redis.call('ZRANGE', z, ARGV[2], '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[3]))) do
    table.insert(seqs, member_seq(m))
  end
end
for _, seq in ipairs(seqs) do
  local raw = redis.call('HGET', t, field(seq))
  if raw then
    table.insert(out, seq)
    table.insert(out, raw)
    table.insert(out, redis.call('HGET', p, field(seq)))
  end
end
return out
