-- Adds tasks to one queue of one shard, all or none.
-- KEYS: t p seq h, the queue's six keys. ARGV: channel shard queue cap, then
-- per task: payload run_kind ('d' delay, 'a' at) run key max priority lease
-- every expiry_kind ('', 'd', 'a') expiry target (MessagePack, '' none).
-- Returns {'ok', now, then seq due created per task} or {'too_many_tasks'}.
-- A batch costs its writes once, not once a task: one INCRBY for the new
-- tasks' sequence numbers, its writes gathered (`writes` in the prelude),
-- and one look at the queue's head (and the shard's earliest, if that
-- head moves).
local t, p, seqk, h = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local Q = queue_keys(5)
local channel, shard, q, cap = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local n = (#ARGV - 4) / 11
local now, now_past = time_now()
if redis.call('HLEN', t) + n > cap then return { 'too_many_tasks' } end

-- Which tasks are new: one whose key is held, by a task stored before or by
-- one earlier in this batch, is answered with that task instead.
local holder = {} -- key -> the batch's task (i) that takes it
local same = {}   -- i -> the batch's task it repeats
local stored = {} -- i -> the stored task's sequence number
local fresh = 0
for i = 0, n - 1 do
  local key = ARGV[5 + i * 11 + 3]
  if key ~= '' and holder[key] then
    same[i] = holder[key]
  else
    local existing = key ~= '' and redis.call('HGET', Q.k, key)
    if existing then
      stored[i] = tonumber(existing)
    else
      fresh = fresh + 1
      if key ~= '' then holder[key] = i end
    end
  end
end

local out = { 'ok', now }
local seq = fresh > 0 and redis.call('INCRBY', seqk, fresh) - fresh or 0
local seqs, runs = {}, {}
local w = writes()
local first_scheduled, any_due
local queue_pushes
for i = 0, n - 1 do
  local a = 5 + i * 11
  if stored[i] then
    local rec = load(t, stored[i])
    seqs[i], runs[i] = stored[i], rec.r
    table.insert(out, seqs[i]); table.insert(out, rec.r); table.insert(out, 0)
  elseif same[i] then
    table.insert(out, seqs[same[i]]); table.insert(out, runs[same[i]]); table.insert(out, 0)
  else
    seq = seq + 1
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
    local key = ARGV[a + 3]
    if key ~= '' then
      rec.k = key
      set_later(w, Q.k, key, seq)
    end
    save_later(w, t, seq, rec)
    set_later(w, p, field(seq), ARGV[a])
    -- As `file` in the prelude, for a new task: due now, or scheduled.
    if run <= now then
      if queue_pushes == nil then queue_pushes = redis.call('EXISTS', Q.P) == 1 end
      file_due_later(w, Q, seq, rec, queue_pushes)
      any_due = true
    else
      add_later(w, Q.s, at_member(run, seq))
      if not first_scheduled or run < first_scheduled then first_scheduled = run end
    end
    seqs[i], runs[i] = seq, run
    table.insert(out, seq); table.insert(out, run); table.insert(out, 1)
  end
end

write_all(w)
if first_scheduled then head_by(h, 's:' .. q, first_scheduled) end
if any_due then hint_due(channel, shard, q) end
hint_lowered(channel, shard)
return out
