-- Acks of several tasks of one queue of one shard, each on its own: removed
-- (a repeating one scheduled at its next occurrence) if its lease is current.
-- KEYS: t p h, the queue's keys. ARGV: channel shard queue, then field (the
-- seq in hex, as `field` prints it: read, not printed) and lease token per ack.
-- Returns one code per ack: 'ok', 'not_found', 'stale', or 'queue' (the task
-- is of another queue: ack it on its own).
local t, p, h = KEYS[1], KEYS[2], KEYS[3]
local Q = queue_keys(4)
local channel, shard, q = ARGV[1], ARGV[2], ARGV[3]
-- Redis's time, read only for a repeating task: an ack of any other needs none.
local now = nil
local seqs = {}
for i = 4, #ARGV, 2 do seqs[#seqs + 1] = member_seq(ARGV[i]) end
local recs = load_all(t, seqs)
-- The records are read at once, so a task acked twice in one batch is
-- answered the second time as it then is: gone, or (repeating) rescheduled.
local acked = {}
local w = writes()
local out = {}
for k, seq in ipairs(seqs) do
  local rec, token = recs[k], ARGV[3 + 2 * k]
  if acked[seq] then
    out[k] = acked[seq]
  elseif not rec then
    out[k] = 'not_found'
  elseif rec.q ~= q then
    out[k] = 'queue'
  elseif rec.s ~= 'l' or rec.L ~= token then
    out[k] = 'stale'
  elseif rec.e then
    now = now or now_ms()
    unfile(Q, q, seq, rec, now)
    rec.a, rec.s, rec.L, rec.u = 0, 's', nil, nil
    rec.r = next_run(rec.r, rec.e, now)
    save(t, seq, rec)
    if file(Q, h, q, seq, rec, now) then hint_due(channel, shard, q) end
    acked[seq] = 'stale'
    out[k] = 'ok'
  else
    -- Leased (checked above): `unfile` and `forget`, gathered.
    rem_later(w, Q.l, at_member(rec.u, seq))
    forget_later(w, Q, t, p, seq, rec)
    acked[seq] = 'not_found'
    out[k] = 'ok'
  end
end
write_all(w)
hint_lowered(channel, shard)
return out
