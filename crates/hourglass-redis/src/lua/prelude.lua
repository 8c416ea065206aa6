-- Shared by every script (prepended to each). A shard's tasks live under one
-- hash tag: records in hash `t` (MessagePack, by 12-hex-digit sequence
-- number), payloads in hash `p`, and each queue's tasks in sorted sets whose
-- members sort lexicographically (all scores 0) in the order they are used:
--   s  scheduled, by due time:        DDDDDDDDDDD:SSSSSSSSSSSS
--   r  due, in claim order:  PPPPPPPP:DDDDDDDDDDD:SSSSSSSSSSSS
--   o  due, oldest first:              DDDDDDDDDDD:SSSSSSSSSSSS
--   l  leased, by lease end:           UUUUUUUUUUU:SSSSSSSSSSSS
--   d  dead, by sequence:                          SSSSSSSSSSSS
--   k  idempotency key -> sequence (a hash)
--   R  due for push claims, in claim order, as r (r holds the due tasks
--      for pull claims): a task is pushed if its record has a target (h) or
--      the queue has one, which flag P (a string, '1') says in every shard
-- and sorted set `h` keeps, for the shard's owner, each queue's earliest due
-- time ('s:' .. queue) and lease end ('l:' .. queue): never later than the
-- set's first member, perhaps earlier (a removal leaves it be; the owner's
-- fire script sets it right); and each running schedule's next occurrence
-- ('c:' .. name, kept by schedule.lua). Time is Redis's (TIME).
-- A record: q queue, r due (ms), a attempt, m max attempts (0: unlimited),
-- p priority, l own lease, k key, e period, x expiry, X expired, E last error,
-- c created, s state ('s' scheduled, 'l' leased, 'd' dead), L lease token
-- (16 hex digits that cannot be guessed: see new_lease; stores written
-- before held the shard's lease counter itself, a number),
-- u lease end, h its own HTTP target ({u url, m method code, H {{name,
-- value}, ...}}, as Rust packs it).
-- Rust defines what both sides use, and `scripts.rs` writes it above this
-- prelude: ATTEMPTS_UNLIMITED, the members' widths (SEQ_DIGITS, MS_DIGITS,
-- PRIORITY_DIGITS), QUEUE_KEY_COUNT and queue_keys(first) (a queue's keys from
-- KEYS[first]), and backoff_ms(attempt).

-- The script's first reading of Redis's time (TIME's two strings), which
-- its hints carry (now_us).
local script_time = nil
-- Redis's time: the millisecond, and the microseconds past it.
local function time_now()
  local t = redis.call('TIME')
  script_time = script_time or t
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end

local function now_ms()
  local ms = time_now()
  return ms
end

-- When something asked for `delay` ms after `now` (and `past` µs) is due:
-- never before the delay has passed. A task is due once now_ms reaches its
-- due time, so a delay counts from now rounded up; none (0) from now rounded
-- down, as a task cannot be handed out before it exists. Arrival::after_ms
-- in Rust.
local function after(now, past, delay)
  if delay == 0 or past == 0 then return now + delay end
  return now + 1 + delay
end

local function hex(n, width)
  return string.format('%0' .. width .. 'x', n)
end
-- The members, built from their parts, each part printed once a script
-- and then looked up: a `string.format` costs about 0.3 µs in Redis's Lua,
-- and a task was printed three to five times a script (its field for its
-- record, its payload and its write, its times for each set it moved
-- between; BENCHMARKS.md). A seq read from a member keeps the digits it was
-- read from, and is not printed at all. A script's tasks are bounded, and so
-- are these tables.
local SEQ_FMT = '%0' .. SEQ_DIGITS .. 'x'
local MS_FMT = '%0' .. MS_DIGITS .. 'x'
local PRIORITY_FMT = '%0' .. PRIORITY_DIGITS .. 'x'
local seqs_printed, ms_printed, priorities_printed = {}, {}, {}
local function print_once(known, fmt, n)
  local s = known[n]
  if not s then
    s = string.format(fmt, n)
    known[n] = s
  end
  return s
end
local function ms_hex(ms) return print_once(ms_printed, MS_FMT, ms) end
-- The score of every member of the tasks' sets, as a string: Redis takes a
-- string argument as it is, where it prints a number first (`%.17g`).
local ZERO = '0'
local function field(seq) return print_once(seqs_printed, SEQ_FMT, seq) end
-- A member of a time and a task's field, and a due member of a priority and
-- such a member.
local function at_field(ms, f) return ms_hex(ms) .. ':' .. f end
local function ready_at_member(pri, at) return print_once(priorities_printed, PRIORITY_FMT, pri) .. ':' .. at end
local function at_member(ms, seq) return at_field(ms, field(seq)) end
local function ready_member(pri, ms, seq) return ready_at_member(pri, at_member(ms, seq)) end
-- The seq of a member, or of a field (a member's last digits); its digits
-- are remembered as its field.
local function member_seq(m)
  local digits = string.sub(m, -SEQ_DIGITS)
  local seq = tonumber(digits, 16)
  seqs_printed[seq] = digits
  return seq
end
local function member_ms(m) return tonumber(string.sub(m, 1, MS_DIGITS), 16) end
-- A due member without its priority: the task's member of the oldest-first set.
local function ready_at(m) return string.sub(m, PRIORITY_DIGITS + 2) end

local function load(t, seq)
  local raw = redis.call('HGET', t, field(seq))
  if raw then return cmsgpack.unpack(raw) end
  return nil
end
local function save(t, seq, rec) redis.call('HSET', t, field(seq), cmsgpack.pack(rec)) end

-- The records of `fields` in one HMGET: recs[k] is fields[k]'s (nil if none).
local function load_fields(t, fields)
  local recs = {}
  if #fields == 0 then return recs end
  local raws = redis.call('HMGET', t, unpack(fields))
  for k = 1, #fields do
    if raws[k] then recs[k] = cmsgpack.unpack(raws[k]) end
  end
  return recs
end
-- The records of `seqs`, as load_fields.
local function load_all(t, seqs)
  local fields = {}
  for k, seq in ipairs(seqs) do fields[k] = field(seq) end
  return load_fields(t, fields)
end

-- Writes gathered to go together when `write_all` sends them: fields to set
-- in hashes (one HSET a hash), members to add to sorted sets (one ZADD a
-- set, all scores 0) or remove (one ZREM a set), fields to delete from
-- hashes (one HDEL a hash). A script reads nothing it gathered before it
-- writes it. Two values a task at most: `options.rs` asserts that every
-- script's most tasks fit Lua's limit on the values one unpack passes
-- (LUA_UNPACK_MAX).
local function lists() return { by = {}, keys = {} } end
local function writes() return { set = lists(), add = lists(), rem = lists(), del = lists() } end
-- Appends `a`, and `b` if given, to the list of `key` in `into`.
local function gather(into, key, a, b)
  local list = into.by[key]
  if not list then
    list = {}
    into.by[key] = list
    into.keys[#into.keys + 1] = key
  end
  local n = #list
  list[n + 1] = a
  if b ~= nil then list[n + 2] = b end
end
local function set_later(w, key, name, value) gather(w.set, key, name, value) end
local function save_later(w, t, seq, rec) set_later(w, t, field(seq), cmsgpack.pack(rec)) end
local function add_later(w, key, member) gather(w.add, key, ZERO, member) end
local function rem_later(w, key, member) gather(w.rem, key, member) end
local function del_later(w, key, name) gather(w.del, key, name) end
local function write_all(w)
  for _, key in ipairs(w.set.keys) do redis.call('HSET', key, unpack(w.set.by[key])) end
  for _, key in ipairs(w.add.keys) do redis.call('ZADD', key, unpack(w.add.by[key])) end
  for _, key in ipairs(w.rem.keys) do redis.call('ZREM', key, unpack(w.rem.by[key])) end
  for _, key in ipairs(w.del.keys) do redis.call('HDEL', key, unpack(w.del.by[key])) end
end
-- As `file`, gathered in `w`, for a task that is due (state 's', due by
-- now): `queue_pushes` says whether its queue has a target (flag P).
local function file_due_later(w, Q, seq, rec, queue_pushes)
  local at = at_member(rec.r, seq)
  add_later(w, (rec.h ~= nil or queue_pushes) and Q.R or Q.r, ready_at_member(rec.p, at))
  add_later(w, Q.o, at)
end
-- Due tasks ({rec = record, seq = seq, ...} each) read and not filed, by the
-- side file_due_later would file them in (false: pull, R's; true: push),
-- each side in claim order, as its due set holds them: priority, due time,
-- sequence (ready_member's parts, compared as numbers).
local function by_side(tasks, queue_pushes)
  local sides = { [false] = {}, [true] = {} }
  for _, task in ipairs(tasks) do
    local side = sides[task.rec.h ~= nil or queue_pushes]
    side[#side + 1] = task
  end
  local function before(a, b)
    if a.rec.p ~= b.rec.p then return a.rec.p < b.rec.p end
    if a.rec.r ~= b.rec.r then return a.rec.r < b.rec.r end
    return a.seq < b.seq
  end
  table.sort(sides[false], before)
  table.sort(sides[true], before)
  return sides
end

-- The earliest deadline of the shard, or nil.
local function head_min(h)
  local first = redis.call('ZRANGE', h, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end
-- Keeps `h` in step with the first member of `zkey`.
local function set_head(h, name, zkey)
  local first = redis.call('ZRANGE', zkey, 0, 0)[1]
  if first then redis.call('ZADD', h, member_ms(first), name) else redis.call('ZREM', h, name) end
end
-- Tells the shard's owner that its earliest deadline went from `before`
-- (nil: none) to `after`, if that is earlier.
local function hint_earlier(channel, shard, before, after)
  if after and (not before or after < before) then
    redis.call('PUBLISH', channel, 'h ' .. shard .. ' ' .. after)
  end
end
-- Tells the shard's owner of an earlier deadline than it had (`before`, read
-- with head_min before the script changed `h`).
local function hint_head(channel, shard, h, before)
  hint_earlier(channel, shard, before, head_min(h))
end

-- Redis's time in microseconds, printed: what a hint or a drain says it was
-- published at, so that a node can order the two whichever arrives first
-- (`watch.rs`: one published by another primary, across a Cluster's
-- failover, may overtake the other). The script's first reading of the
-- time, or one of its own if it read none: a script runs whole before the
-- next, so its start orders it as well as its publish would.
local published_us = nil
local function now_us()
  if not published_us then
    local t = script_time or redis.call('TIME')
    published_us = t[1] .. string.format('%06d', t[2])
  end
  return published_us
end
-- Says on the channel that `shard` has due tasks of queue `q`.
local function hint_due(channel, shard, q)
  redis.call('PUBLISH', channel, 'r ' .. shard .. ' ' .. now_us() .. ' ' .. q)
end

-- What head_by changed in the script's one shard: the shard's earliest
-- deadline before its first change (read then, and only then), and the
-- earliest head it set. A script that changes `h` only through head_by, and
-- nothing of `h` before its first call, tells the owner with hint_lowered:
-- it reads the shard's earliest not at all when no head moves and once when
-- one does, where hint_head reads it before and after.
local lowered_from_read, lowered_from, lowered_to = false, nil, nil
-- Keeps the queue's head in `h` no later than `ms`.
local function head_by(h, name, ms)
  local head = redis.call('ZSCORE', h, name)
  if not head or ms < tonumber(head) then
    if not lowered_from_read then lowered_from_read, lowered_from = true, head_min(h) end
    redis.call('ZADD', h, ms, name)
    if not lowered_to or ms < lowered_to then lowered_to = ms end
  end
end
-- As hint_head, for a script that changed `h` only through head_by: the
-- earliest deadline after is the earlier of the one before and the earliest
-- head head_by set.
local function hint_lowered(channel, shard)
  hint_earlier(channel, shard, lowered_from, lowered_to)
end

-- Whether a task is delivered by push: it has a target, or its queue has.
local function pushed(Q, rec) return rec.h ~= nil or redis.call('EXISTS', Q.P) == 1 end

-- Files `rec` by its state; returns true if it is due (ready to claim).
local function file(Q, h, q, seq, rec, now)
  if rec.s == 'd' then
    redis.call('ZADD', Q.d, ZERO, field(seq))
  elseif rec.s == 'l' then
    redis.call('ZADD', Q.l, ZERO, at_member(rec.u, seq))
    head_by(h, 'l:' .. q, rec.u)
  elseif rec.r <= now then
    redis.call('ZADD', pushed(Q, rec) and Q.R or Q.r, ZERO, ready_member(rec.p, rec.r, seq))
    redis.call('ZADD', Q.o, ZERO, at_member(rec.r, seq))
    return true
  else
    redis.call('ZADD', Q.s, ZERO, at_member(rec.r, seq))
    head_by(h, 's:' .. q, rec.r)
  end
  return false
end

-- Takes `rec` out of the set its state files it in. The queue's head in `h`
-- is left as it was: at worst earlier than the set's first member, which
-- wakes the owner for nothing, and its fire script sets it right.
local function unfile(Q, q, seq, rec, now)
  if rec.s == 'd' then
    redis.call('ZREM', Q.d, field(seq))
  elseif rec.s == 'l' then
    redis.call('ZREM', Q.l, at_member(rec.u, seq))
  elseif rec.r > now then
    redis.call('ZREM', Q.s, at_member(rec.r, seq))
  elseif redis.call('ZREM', Q.r, ready_member(rec.p, rec.r, seq))
      + redis.call('ZREM', Q.R, ready_member(rec.p, rec.r, seq)) == 1 then
    redis.call('ZREM', Q.o, at_member(rec.r, seq))
  else
    -- Due, but its owner has not filed it as due yet.
    redis.call('ZREM', Q.s, at_member(rec.r, seq))
  end
end

-- Removes the task for good, gathered in `w`: its record, its payload and
-- its key.
local function forget_later(w, Q, t, p, seq, rec)
  del_later(w, t, field(seq))
  del_later(w, p, field(seq))
  if rec.k then del_later(w, Q.k, rec.k) end
end
-- Removes the task for good, now.
local function forget(Q, t, p, seq, rec)
  local w = writes()
  forget_later(w, Q, t, p, seq, rec)
  write_all(w)
end

-- A new lease token: the first 16 hex digits of the SHA-1 of `secret`, a
-- random value the node draws for each script (never stored), and the
-- shard's lease counter, which no two leases share. A client that holds one
-- lease cannot work out another; two leases of a task differ but for odds
-- of one in 2^64, as the embedded store's random ones do.
local function lease_token(secret, counter)
  -- `%d`, not the number concatenated: Lua prints that with `%.14g`, a
  -- floating-point printf, which would also round counters past 10^14.
  return string.sub(redis.sha1hex(secret .. ':' .. string.format('%d', counter)), 1, 16)
end
local function new_lease(lseq, secret) return lease_token(secret, redis.call('INCR', lseq)) end
-- The tokens of the leases of counters `first` + 1, `first` + 2, ...: the
-- token of an odd-numbered one (k) as lease_token's, and that of the next
-- (k + 1) the next 16 hex digits of the same SHA-1, so that a hand-out
-- hashes once for two tasks. Called with k, it hashes only for a pair not
-- met yet: a task skipped (dead) leaves its counter unused, as before.
local function lease_tokens(secret, first)
  local digests = {}
  return function(k)
    local odd = k - (k + 1) % 2
    local digest = digests[odd]
    if not digest then
      digest = redis.sha1hex(secret .. ':' .. string.format('%d', first + odd))
      digests[odd] = digest
    end
    if k == odd then return string.sub(digest, 1, 16) end
    return string.sub(digest, 17, 32)
  end
end

-- Hands the task out under a new lease (it is unfiled): one more attempt.
local function lease(Q, h, t, lseq, q, seq, rec, now, lease_ms, secret)
  rec.a = rec.a + 1
  rec.s = 'l'
  rec.L = new_lease(lseq, secret)
  rec.u = now + (rec.l or lease_ms)
  save(t, seq, rec)
  file(Q, h, q, seq, rec, now)
end

-- The pause of queue `q` in the shard's copy (`paused`) if it holds at
-- `now`: '0' (until resumed) or when it ends; nil if the queue runs.
local function pause_of(paused, q, now)
  local pause = redis.call('HGET', paused, q)
  if pause and (pause == '0' or tonumber(pause) > now) then return pause end
  return nil
end

-- Hands out up to `max` due tasks of queue `q` (from Q.R for push claims,
-- else Q.r), in claim order, each under a new lease (one more attempt): the
-- claim script's work, and the fire script's when it hands tasks to a
-- waiting claim, so that both keep the same rules. A pull task gets its own
-- lease or `lease_ms`, a push task exactly `lease_ms` (its target's timeout
-- and a margin). A task met past its expiry is made dead, never handed out
-- late. `budget.bytes` bounds the payloads of the claim the tasks are for,
-- `budget.got` counts its tasks so far: the first always goes, a later one
-- only if its payload fits. Looks at `scan_max` due tasks at most. Appends
-- seq payload attempt token lease_end due target (packed; '' if none) per
-- task to `out`. Returns how many it handed out, why no more: STOP_DRAINED
-- (nothing more is due, or it handed out `max`), STOP_BYTES or STOP_SCANNED,
-- and how many due tasks it looked at (each handed out or made dead).
-- Given `given`, due tasks of the queue that the caller read and did not
-- file in R (which holds none), in claim order (a side of by_side's), it
-- hands those out instead, and moves them nowhere: the caller takes the
-- first `looked` out of the set that holds them.
local function hand_out(Q, t, p, h, lseq, q, push, max, lease_ms, budget, scan_max, secret, now, out, given)
  local R = push and Q.R or Q.r
  local taken, looked = 0, 0
  local gone_r, gone_o, leased = {}, {}, {}
  local w = writes()
  local first_end = nil
  local stop = STOP_DRAINED
  while taken < max and looked < scan_max and stop == STOP_DRAINED do
    -- The next tasks in claim order: their members in R (none if given),
    -- fields and records.
    local members, fields, recs = nil, {}, {}
    if given then
      for k = 1, math.min(#given - looked, max - taken) do
        fields[k], recs[k] = field(given[looked + k].seq), given[looked + k].rec
      end
    else
      members = redis.call('ZRANGE', R, looked, looked + (max - taken) - 1)
      -- Each task's field, as its member ends.
      for k, m in ipairs(members) do fields[k] = string.sub(m, -SEQ_DIGITS) end
      recs = load_fields(t, fields)
    end
    if #fields == 0 then break end
    -- One lease counter for each task looked at; those not handed out
    -- leave theirs unused.
    local token = lease_tokens(secret, redis.call('INCRBY', lseq, #fields) - #fields)
    for k = 1, #fields do
      local f, rec = fields[k], recs[k]
      if rec.x and rec.x <= now then
        -- Not delivered by its expiry: dead, never late.
        rec.s = 'd'
        rec.X = 1
        set_later(w, t, f, cmsgpack.pack(rec))
        add_later(w, Q.d, f)
      else
        local payload = redis.call('HGET', p, f)
        if budget.got > 0 and #payload > budget.bytes then
          stop = STOP_BYTES
          break
        end
        budget.bytes = budget.bytes - #payload
        budget.got = budget.got + 1
        rec.a = rec.a + 1
        rec.s = 'l'
        rec.L = token(k)
        rec.u = now + ((not push and rec.l) or lease_ms)
        set_later(w, t, f, cmsgpack.pack(rec))
        leased[2 * taken + 1] = ZERO
        leased[2 * taken + 2] = at_field(rec.u, f)
        if not first_end or rec.u < first_end then first_end = rec.u end
        taken = taken + 1
        -- Its seven values, in place: no table and no call a value.
        local n = #out
        out[n + 1], out[n + 2], out[n + 3], out[n + 4] = tonumber(f, 16), payload, rec.a, rec.L
        out[n + 5], out[n + 6], out[n + 7] = rec.u, rec.r, rec.h and cmsgpack.pack(rec.h) or ''
      end
      looked = looked + 1
      if members then
        gone_r[looked] = members[k]
        gone_o[looked] = ready_at(members[k])
      end
    end
  end
  if stop == STOP_DRAINED and taken < max and looked >= scan_max then stop = STOP_SCANNED end
  write_all(w)
  if #gone_r > 0 then
    redis.call('ZREM', R, unpack(gone_r))
    redis.call('ZREM', Q.o, unpack(gone_o))
  end
  if #leased > 0 then
    redis.call('ZADD', Q.l, unpack(leased))
    head_by(h, 'l:' .. q, first_end)
  end
  return taken, stop, looked
end

-- A delivery failed at `now` (and `past` µs): due again `delay` or a
-- backoff after it, never early, or dead if out of attempts or past its
-- expiry (the engine's fail_attempt).
local function fail(rec, now, delay, past)
  local function later(ms) return after(now, past or 0, ms) end
  local unlimited = rec.m == ATTEMPTS_UNLIMITED
  rec.L = nil
  rec.u = nil
  if rec.x and rec.x <= now then
    rec.s = 'd'
    rec.X = 1
  elseif not unlimited and rec.a >= rec.m then
    rec.s = 'd'
  else
    rec.s = 's'
    if delay then
      rec.r = later(delay)
    elseif unlimited then
      rec.r = later(0)
    else
      rec.r = later(backoff_ms(rec.a))
    end
  end
end

-- The first occurrence of a repeating task after `now`, on its grid.
local function next_run(r, every, now)
  if r + every > now then return r + every end
  return r + every * (math.floor((now - r) / every) + 1)
end
