-- A node's heartbeat, with what it counted since its last (figures.rs).
-- KEYS: nodes, the node's last flush applied, the totals' figures, then each
-- queue's figures.
-- ARGV: node now_ms lease_ms seq kept_ms, then for each key from the totals'
-- on: a count n, then n pairs of a field and what to add to it ('m' is a
-- maximum, not a sum). A flush whose seq was applied already (or 0) adds
-- nothing.
-- Returns the live nodes.
local nodes, flushed = KEYS[1], KEYS[2]
local node, now, lease, seq = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if seq > tonumber(redis.call('GET', flushed) or '0') then
  redis.call('SET', flushed, seq, 'PX', ARGV[5])
  local at = 6
  for k = 3, #KEYS do
    local n = tonumber(ARGV[at])
    at = at + 1
    for _ = 1, n do
      local field, by = ARGV[at], ARGV[at + 1]
      at = at + 2
      if field == 'm' then
        if tonumber(by) > tonumber(redis.call('HGET', KEYS[k], 'm') or '0') then
          redis.call('HSET', KEYS[k], 'm', by)
        end
      else
        redis.call('HINCRBY', KEYS[k], field, by)
      end
    end
  end
end
redis.call('ZADD', nodes, now, node)
redis.call('ZREMRANGEBYSCORE', nodes, '-inf', '(' .. (now - lease))
return redis.call('ZRANGE', nodes, 0, -1)
