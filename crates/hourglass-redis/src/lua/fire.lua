-- The shard owner's timer: files the tasks of the named queues that came due,
-- gives back those whose lease ran out, and hands due tasks at once to the
-- claims waiting on the owner's node (its takers), in this one script: a
-- task so handed over costs no claim script, no hint and no second fsync.
-- Given a time AHEAD still to come (Redis ms; 0 for none), it also hands the
-- takers left with room, and none of them handed a task due now, the tasks
-- due at AHEAD exactly, leased from AHEAD (their lease counts from their due
-- time): the node answers their claims at AHEAD, so that the script's round
-- trip is not part of their lateness (`handover.rs`). They are never filed
-- as due: what no taker takes stays in the scheduled set as it is.
-- Refused unless the caller holds the shard's lease (fencing: a stale holder
-- changes nothing). A queue paused here hands nothing over; what is handed
-- over follows the prelude's hand_out, as a claim does, and tasks due now
-- reach it without being filed as due first while the queue holds no
-- other due task.
-- KEYS: owner t h p lseq paused, then QUEUE_KEY_COUNT keys per queue.
-- ARGV: channel shard holder max heads_max secret ahead bytes_max scan_max
-- takers, then each taker's most tasks, then per queue its name and, for a
-- pull then a push taker, the taker (1-based; 0 for none), its lease_ms and
-- the most its queue's flow control allows now (-1: no limit). Each taker
-- may take bytes_max bytes of payloads.
-- Returns {'fenced'} or {'ok', now, µs past now, due, expired, died,
-- past_expiry, n, then the shard's first heads_max heads as name and time (n
-- values): the owner fires from those next, without reading them, unless a
-- hint says an earlier one came; then per hand-over: taker, queue (1-based,
-- as named), count, and count tasks as hand_out writes them}. A queue whose
-- due tasks were all handed over is not hinted: no other claim needs to
-- look.
local owner, t, h, p, lseq, paused = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local channel, shard, holder = ARGV[1], ARGV[2], ARGV[3]
local max, heads_max, secret, ahead = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local bytes_max, scan_max, takers = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local PER_QUEUE = 7
if redis.call('GET', owner) ~= holder then return { 'fenced' } end
local now, now_past = time_now()
local upto = '(' .. hex(now + 1, MS_DIGITS)
-- The shard's earliest deadline before the script. The fire changes `h` by
-- set_head as well as head_by, so it hints from the earliest after (the
-- first of the heads it returns), not hint_lowered; head_by is told the
-- earliest before is read, and does not read it again.
local before = head_min(h)
lowered_from_read, lowered_from = true, before
-- Tasks filed due, leases given back, tasks made dead (out of attempts or
-- past their expiry), and of those, past their expiry.
local due, expired, died, past_expiry = 0, 0, 0, 0
local budgets = {}
for i = 1, takers do budgets[i] = { n = tonumber(ARGV[10 + i]), bytes = bytes_max, got = 0 } end
local handed = {}
local first = 11 + takers
-- What the script reads of a queue (by its place, `at`) at most once:
-- whether it is paused, whether it has a target (flag P), and, once its
-- tasks due now are handed over, whether any is left unclaimed. The queues
-- named are distinct (`shards.rs` sorts them and drops repeats), so no other
-- queue's turn changes what was read.
local paused_at, pushes_at, left_at = {}, {}, {}
local function is_paused(at, q)
  if paused_at[at] == nil then paused_at[at] = pause_of(paused, q, now) ~= nil end
  return paused_at[at]
end
local function queue_pushes(at, Q)
  if pushes_at[at] == nil then pushes_at[at] = redis.call('EXISTS', Q.P) == 1 end
  return pushes_at[at]
end
local function any_left(at, Q)
  if left_at[at] == nil then left_at[at] = redis.call('EXISTS', Q.r, Q.R) > 0 end
  return left_at[at]
end
-- Hands the due tasks of queue `q` (the ARGV from `i`, the `at`th queue)
-- to its pull or push taker, as many as the taker and the queue's flow
-- control allow, leased from `from`; with `fresh_only`, only to a taker
-- handed nothing due now (`fresh`, set before the ahead pass); from
-- `given` if given (as hand_out).
-- Returns how many it handed over, and how many due tasks it looked at.
local function hand_side(Q, q, i, at, push, from, fresh_only, given)
  local arg = i + (push and 4 or 1)
  local taker, lease_ms, allowed = tonumber(ARGV[arg]), tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2])
  local budget = budgets[taker]
  if not budget or (fresh_only and not budget.fresh) then return 0, 0 end
  local most = budget.n
  if allowed >= 0 then most = math.min(most, allowed) end
  if most <= 0 then return 0, 0 end
  local tasks = {}
  local taken, _, looked =
    hand_out(Q, t, p, h, lseq, q, push, most, lease_ms, budget, scan_max, secret, from, tasks, given)
  if taken > 0 then
    budget.n = budget.n - taken
    for _, v in ipairs({ taker, at + 1, taken }) do table.insert(handed, v) end
    for _, v in ipairs(tasks) do table.insert(handed, v) end
  end
  return taken, looked
end
for i = first, #ARGV, PER_QUEUE do
  local at = (i - first) / PER_QUEUE
  local q = ARGV[i]
  local Q = queue_keys(7 + at * QUEUE_KEY_COUNT)
  local ready = false
  -- What came due, read and unfiled a batch at a time; the tasks now due
  -- (`due_now`) are filed below, as `file` would, one task at a time.
  local members = redis.call('ZRANGE', Q.s, '-', upto, 'BYLEX', 'LIMIT', 0, max)
  local due_now = {}
  if #members > 0 then
    local seqs = {}
    for k, m in ipairs(members) do seqs[k] = member_seq(m) end
    local recs = load_all(t, seqs)
    redis.call('ZREM', Q.s, unpack(members))
    local w = writes()
    for k, seq in ipairs(seqs) do
      local rec = recs[k]
      if rec.x and rec.x <= now then
        rec.s = 'd'
        rec.X = 1
        save_later(w, t, seq, rec)
        add_later(w, Q.d, field(seq))
        died, past_expiry = died + 1, past_expiry + 1
      elseif rec.s == 's' and rec.r <= now then
        due_now[#due_now + 1] = { rec = rec, seq = seq }
        ready = true
      elseif file(Q, h, q, seq, rec, now) then
        ready = true
      end
      due = due + 1
    end
    write_all(w)
  end
  for _, m in ipairs(redis.call('ZRANGE', Q.l, '-', upto, 'BYLEX', 'LIMIT', 0, max)) do
    local seq = member_seq(m)
    local rec = load(t, seq)
    redis.call('ZREM', Q.l, m)
    fail(rec, now, nil)
    rec.E = 'lease expired'
    save(t, seq, rec)
    if rec.s == 'd' then
      died = died + 1
      if rec.X then past_expiry = past_expiry + 1 end
    end
    if file(Q, h, q, seq, rec, now) then ready = true end
    expired = expired + 1
  end
  set_head(h, 'l:' .. q, Q.l)
  -- The tasks now due are handed out from here while the queue holds no
  -- other due task (so they are all a claim would find, and in its order:
  -- priority, due time, sequence), and filed as due otherwise; those no
  -- taker takes are filed after.
  local handed_here = 0
  local runs = ready and not is_paused(at, q)
  local pushes = #due_now > 0 and queue_pushes(at, Q)
  local given = nil
  if runs and #due_now > 0 and redis.call('EXISTS', Q.r, Q.R) == 0 then
    given = by_side(due_now, pushes)
  else
    local w = writes()
    for _, task in ipairs(due_now) do file_due_later(w, Q, task.seq, task.rec, pushes) end
    write_all(w)
  end
  if runs then
    local rest = writes()
    local left = 0
    for _, push in ipairs({ false, true }) do
      local side = given and given[push]
      if not side or #side > 0 then
        local taken, looked = hand_side(Q, q, i, at, push, now, false, side)
        handed_here = handed_here + taken
        for k = looked + 1, side and #side or 0 do
          file_due_later(rest, Q, side[k].seq, side[k].rec, pushes)
          left = left + 1
        end
      end
    end
    write_all(rest)
    -- The queue's due sets hold just what was filed here.
    if given then left_at[at] = left > 0 end
  end
  if ready and (handed_here == 0 or any_left(at, Q)) then
    hint_due(channel, shard, q)
  end
end
-- Ahead: the tasks due at AHEAD, for the takers that were handed nothing
-- due now (so that a claim's tasks share one due time, which its answer
-- waits for), in each queue with no due task left unclaimed (which a hand
-- out would take first). Handed out from the scheduled set, in the order a
-- claim would find them due (by_side), leased from AHEAD; the rest stay
-- scheduled as they are.
if ahead > now then
  for _, budget in ipairs(budgets) do budget.fresh = budget.got == 0 end
  for i = first, #ARGV, PER_QUEUE do
    local at = (i - first) / PER_QUEUE
    local q = ARGV[i]
    local Q = queue_keys(7 + at * QUEUE_KEY_COUNT)
    if not is_paused(at, q) and not any_left(at, Q) then
      local members = redis.call('ZRANGE', Q.s, '[' .. hex(ahead, MS_DIGITS), '(' .. hex(ahead + 1, MS_DIGITS),
        'BYLEX', 'LIMIT', 0, max)
      if #members > 0 then
        local seqs = {}
        for k, m in ipairs(members) do seqs[k] = member_seq(m) end
        local recs = load_all(t, seqs)
        local handable = {}
        for k, seq in ipairs(seqs) do
          local rec = recs[k]
          -- One that expires by its due time is left to die then.
          if rec and rec.s == 's' and rec.r == ahead and not (rec.x and rec.x <= ahead) then
            handable[#handable + 1] = { rec = rec, seq = seq, member = members[k] }
          end
        end
        local sides = by_side(handable, queue_pushes(at, Q))
        local gone = {}
        for _, push in ipairs({ false, true }) do
          local given = sides[push]
          if #given > 0 then
            local taken, looked = hand_side(Q, q, i, at, push, ahead, true, given)
            due = due + taken
            for k = 1, looked do gone[#gone + 1] = given[k].member end
          end
        end
        if #gone > 0 then redis.call('ZREM', Q.s, unpack(gone)) end
      end
    end
  end
end
-- Each queue's head of its scheduled set, once both passes are done with it.
for i = first, #ARGV, PER_QUEUE do
  local at = (i - first) / PER_QUEUE
  set_head(h, 's:' .. ARGV[i], queue_keys(7 + at * QUEUE_KEY_COUNT).s)
end
-- The shard's earliest deadline is the first of its heads (heads_max >= 1).
local heads = redis.call('ZRANGE', h, 0, heads_max - 1, 'WITHSCORES')
hint_earlier(channel, shard, before, heads[2] and tonumber(heads[2]))
local out = { 'ok', now, now_past, due, expired, died, past_expiry, #heads }
for _, v in ipairs(heads) do table.insert(out, v) end
for _, v in ipairs(handed) do table.insert(out, v) end
return out
