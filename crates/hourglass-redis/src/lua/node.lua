-- A node's heartbeat, and what it counted since its last (figures.rs).
-- KEYS: nodes, the node's last flush applied, then the hashes it adds to:
-- the totals' figures (when it flushes), each queue's, the second's history.
-- ARGV: node now_ms seq kept_ms start beat clock, then for each hash:
-- how long it lives (ms, 0: for ever), a count n, then n pairs of a field
-- and what to add to it ('m' is a maximum, not a sum).
-- A flush whose seq was applied already (or 0) adds nothing; one applied adds
-- one to the totals' `version` (which begins at `start`). The heartbeat is
-- given only if `beat` is 1: the last of a heartbeat's scripts. With `clock`
-- 1, the heartbeat is at Redis's time (`TIME`), returned for the node to set
-- its estimate of Redis's clock by; otherwise at `now_ms`, that estimate.
-- Returns Redis's time (0 if not read) and every node in the membership with
-- its heartbeat (none if it did not beat): which are alive is the node's to
-- judge (figures.rs). Called when the node has counts to add, or reads
-- Redis's clock; the other heartbeats are a `ZADD`, and a `ZRANGE` when it
-- reads who is alive. A reading of the sums reads their version itself.
local nodes, flushed = KEYS[1], KEYS[2]
local node, seq = ARGV[1], tonumber(ARGV[3])
if seq > 0 and seq > tonumber(redis.call('GET', flushed) or '0') then
  redis.call('SET', flushed, seq, 'PX', ARGV[4])
  if redis.call('HEXISTS', KEYS[3], 'version') == 0 then redis.call('HSET', KEYS[3], 'version', ARGV[5]) end
  redis.call('HINCRBY', KEYS[3], 'version', 1)
  local at = 8
  for k = 3, #KEYS do
    local kept, n = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
    at = at + 2
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
    if kept > 0 and n > 0 then redis.call('PEXPIRE', KEYS[k], kept) end
  end
end
if ARGV[6] ~= '1' then return { 0, {} } end
local clock = ARGV[7] == '1'
local now = clock and now_ms() or tonumber(ARGV[2])
redis.call('ZADD', nodes, now, node)
return { clock and now or 0, redis.call('ZRANGE', nodes, 0, -1, 'WITHSCORES') }
