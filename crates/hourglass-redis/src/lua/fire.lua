-- The shard owner's timer: files the tasks of the named queues that came due,
-- and gives back those whose lease ran out. Refused unless the caller holds
-- the shard's lease (fencing: a stale holder changes nothing).
-- KEYS: owner t h, then six keys per queue. ARGV: channel shard holder max
-- heads_max, then the queues' names.
-- Returns {'fenced'} or {'ok', now, due, expired, then the shard's first
-- heads_max heads as name and time}: the owner fires from those next, without
-- reading them, unless a hint says an earlier one came.
local owner, t, h = KEYS[1], KEYS[2], KEYS[3]
local channel, shard, holder, max, heads_max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('GET', owner) ~= holder then return { 'fenced' } end
local now = now_ms()
local upto = '(' .. hex(now + 1, MS_DIGITS)
local before = head_min(h)
local due, expired = 0, 0
for i = 6, #ARGV do
  local q = ARGV[i]
  local Q = queue_keys(4 + (i - 6) * QUEUE_KEY_COUNT)
  local ready = false
  for _, m in ipairs(redis.call('ZRANGE', Q.s, '-', upto, 'BYLEX', 'LIMIT', 0, max)) do
    local seq = member_seq(m)
    local rec = load(t, seq)
    redis.call('ZREM', Q.s, m)
    if rec.x and rec.x <= now then
      rec.s = 'd'
      rec.X = 1
      save(t, seq, rec)
    end
    if file(Q, h, q, seq, rec, now) then ready = true end
    due = due + 1
  end
  set_head(h, 's:' .. q, Q.s)
  for _, m in ipairs(redis.call('ZRANGE', Q.l, '-', upto, 'BYLEX', 'LIMIT', 0, max)) do
    local seq = member_seq(m)
    local rec = load(t, seq)
    redis.call('ZREM', Q.l, m)
    fail(rec, now, nil)
    rec.E = 'lease expired'
    save(t, seq, rec)
    if file(Q, h, q, seq, rec, now) then ready = true end
    expired = expired + 1
  end
  set_head(h, 'l:' .. q, Q.l)
  if ready then redis.call('PUBLISH', channel, 'r ' .. shard .. ' ' .. q) end
end
hint_head(channel, shard, h, before)
local out = { 'ok', now, due, expired }
for _, v in ipairs(redis.call('ZRANGE', h, 0, heads_max - 1, 'WITHSCORES')) do table.insert(out, v) end
return out
