-- Acks of several tasks of one queue of one shard, each on its own: removed
-- (a repeating one scheduled at its next occurrence) if its lease is current.
-- KEYS: t p h, the queue's six keys. ARGV: channel shard queue, then seq and
-- lease token per ack.
-- Returns one code per ack: 'ok', 'not_found', 'stale', or 'queue' (the task
-- is of another queue: ack it on its own).
local t, p, h = KEYS[1], KEYS[2], KEYS[3]
local Q = queue_keys(4)
local channel, shard, q = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
local before = head_min(h)
local out = {}
for i = 4, #ARGV, 2 do
  local seq, token = tonumber(ARGV[i]), ARGV[i + 1]
  local rec = load(t, seq)
  if not rec then
    table.insert(out, 'not_found')
  elseif rec.q ~= q then
    table.insert(out, 'queue')
  elseif rec.s ~= 'l' or rec.L ~= token then
    table.insert(out, 'stale')
  else
    unfile(Q, q, seq, rec, now)
    if rec.e then
      rec.a, rec.s, rec.L, rec.u = 0, 's', nil, nil
      rec.r = next_run(rec.r, rec.e, now)
      save(t, seq, rec)
      if file(Q, h, q, seq, rec, now) then redis.call('PUBLISH', channel, 'r ' .. shard .. ' ' .. q) end
    else
      forget(Q, t, p, seq, rec)
    end
    table.insert(out, 'ok')
  end
end
hint_head(channel, shard, h, before)
return out
