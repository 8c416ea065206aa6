-- A node's hold on a shard, fenced by an epoch from a counter never deleted.
-- The holder (`node:epoch`) has no time to live: it holds for as long as its
-- node's heartbeat is live in the membership (shards.rs). The fire and
-- schedule scripts check it (fencing).
-- KEYS: owner epoch. ARGV: op ('acquire' or 'release') node holder, and for
-- release the channel and the shard.
-- acquire: takes the shard if its holder is still `holder` ('' for none),
-- which the caller read, and found free, its own or its node's heartbeat a
-- lease old. Returns {'ok', holder} or {'held', holder}.
-- release: lets go of it if `holder` still holds it, and hints `g SHARD` so
-- that the node whose turn it is takes it at once, not at its next
-- heartbeat. Returns {'ok', holder}.
local owner, epoch = KEYS[1], KEYS[2]
local op, node, holder = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('GET', owner)
if op == 'acquire' then
  if (current or '') ~= holder then return { 'held', current } end
  holder = node .. ':' .. redis.call('INCR', epoch)
  redis.call('SET', owner, holder)
  return { 'ok', holder }
elseif op == 'release' then
  if current == holder then
    redis.call('DEL', owner)
    redis.call('PUBLISH', ARGV[4], 'g ' .. ARGV[5])
  end
  return { 'ok', holder }
end
return redis.error_reply('unknown op ' .. op)
