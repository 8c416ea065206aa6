-- A node's lease on a shard, fenced by an epoch from a counter never deleted.
-- KEYS: owner epoch. ARGV: op ('acquire', 'renew', 'release') node holder ms.
-- Returns {'ok', holder} or {'held', holder} or {'lost'}.
local owner, epoch = KEYS[1], KEYS[2]
local op, node, holder, ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local current = redis.call('GET', owner)
if op == 'acquire' then
  if current then return { 'held', current } end
  holder = node .. ':' .. redis.call('INCR', epoch)
  redis.call('SET', owner, holder, 'PX', ms)
  return { 'ok', holder }
elseif op == 'renew' then
  if current ~= holder then return { 'lost' } end
  redis.call('PEXPIRE', owner, ms)
  return { 'ok', holder }
elseif op == 'release' then
  if current == holder then redis.call('DEL', owner) end
  return { 'ok', holder }
end
return redis.error_reply('unknown op ' .. op)
