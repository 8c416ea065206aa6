-- Adds tasks to one queue of one shard, all or none.
-- KEYS: t p seq h, the queue's six keys. ARGV: channel shard queue cap, then
-- per task: payload run_kind ('d' delay, 'a' at) run key max priority lease
-- every expiry_kind ('', 'd', 'a') expiry target (MessagePack, '' none).
-- Returns {'ok', now, then seq due created per task} or {'too_many_tasks'}.
local t, p, seqk, h = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local Q = queue_keys(5)
local channel, shard, q, cap = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local n = (#ARGV - 4) / 11
local now, now_past = time_now()
if redis.call('HLEN', t) + n > cap then return { 'too_many_tasks' } end
local before = head_min(h)
local out = { 'ok', now }
local ready = false
for i = 0, n - 1 do
  local a = 5 + i * 11
  local key = ARGV[a + 3]
  local existing = key ~= '' and redis.call('HGET', Q.k, key)
  if existing then
    local seq = tonumber(existing)
    local rec = load(t, seq)
    table.insert(out, seq)
    table.insert(out, rec.r)
    table.insert(out, 0)
  else
    local seq = redis.call('INCR', seqk)
    local run = tonumber(ARGV[a + 2])
    if ARGV[a + 1] == 'd' then run = after(now, now_past, run) end
    local rec = { q = q, r = run, a = 0, m = tonumber(ARGV[a + 4]), p = tonumber(ARGV[a + 5]), c = now, s = 's' }
    if ARGV[a + 6] ~= '' then rec.l = tonumber(ARGV[a + 6]) end
    if ARGV[a + 7] ~= '' then rec.e = tonumber(ARGV[a + 7]) end
    if ARGV[a + 8] ~= '' then
      rec.x = tonumber(ARGV[a + 9])
      if ARGV[a + 8] == 'd' then rec.x = after(now, now_past, rec.x) end
    end
    if ARGV[a + 10] ~= '' then rec.h = cmsgpack.unpack(ARGV[a + 10]) end
    if key ~= '' then
      rec.k = key
      redis.call('HSET', Q.k, key, seq)
    end
    save(t, seq, rec)
    redis.call('HSET', p, field(seq), ARGV[a])
    if file(Q, h, q, seq, rec, now) then ready = true end
    table.insert(out, seq)
    table.insert(out, run)
    table.insert(out, 1)
  end
end
if ready then redis.call('PUBLISH', channel, 'r ' .. shard .. ' ' .. q) end
hint_head(channel, shard, h, before)
return out
