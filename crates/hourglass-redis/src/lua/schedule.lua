-- The schedules of one shard (see schedules.rs), under the shard's hash tag:
-- each schedule's record (MessagePack, by name) in hash `sch`, its payload in
-- hash `schp`, its name in sorted set `sn` (all scores 0, so that a listing
-- by name is a range), and, while it runs (not paused, with a next
-- occurrence), that occurrence as the head 'c:' .. name in `h`, beside the
-- queues' heads: the shard's owner sleeps to the earliest of them all.
-- A record: q queue, c cron expression, z time zone, e period (ms), f misfire
-- ('skip', 'once', 'all'), o overlap ('allow', 'forbid'), m max attempts, x
-- each occurrence's deadline (ms), S since (ms), n next occurrence (ms), lo
-- and li the latest occurrence enqueued and its task's sequence number, P
-- paused (1), v revision: a new value of the shard's counter `srev` at every
-- change (a put, a pause, a firing), so that a change Rust computed from a
-- read goes ahead only if nothing changed since.
-- Time zones and cron are Rust's: a firing is given the occurrences to
-- enqueue and the next, worked out from the record it read, and applies
-- them only if the record is still that one (revision and next), and only
-- for the shard's current holder. So a stale computation, a second node or
-- a node stopped past its lease changes nothing, and each occurrence is
-- enqueued once.
-- KEYS: sch schp sn h srev owner t p seq, then (fire only) the queue's keys.
-- ARGV: op channel shard name, then the op's own.
local sch, schp, sn, h, srev, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local op, channel, shard, name = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local head = 'c:' .. name

local function read()
  local raw = redis.call('HGET', sch, name)
  if raw then return cmsgpack.unpack(raw) end
  return nil
end

-- Stores `rec` with a new revision, and keeps its head in `h` (hinting the
-- owner of an earlier deadline).
local function store(rec)
  rec.v = redis.call('INCR', srev)
  redis.call('HSET', sch, name, cmsgpack.pack(rec))
  local before = head_min(h)
  if rec.n and not rec.P then redis.call('ZADD', h, rec.n, head) else redis.call('ZREM', h, head) end
  hint_head(channel, shard, h, before)
end

-- Whether `rec` (nil: none) is the one a change expects: 'any', 'absent',
-- or 'queue' and that queue.
local function expected(rec, kind, queue)
  if kind == 'any' then return true end
  if kind == 'absent' then return rec == nil end
  return rec ~= nil and rec.q == queue
end

local function found(rec)
  if rec then return { 'expect', rec.q } end
  return { 'expect', '' }
end

if op == 'get' then
  -- Returns {'ok', record, payload} or {'none'}.
  local raw = redis.call('HGET', sch, name)
  if not raw then return { 'none' } end
  return { 'ok', raw, redis.call('HGET', schp, name) }

elseif op == 'put' then
  -- ARGV: revision read ('0': none was there) record payload.
  -- Returns {'ok', created (1 or 0), record} or {'changed'}.
  local cur = read()
  local rev = tonumber(ARGV[5])
  if (rev == 0 and cur) or (rev ~= 0 and (not cur or cur.v ~= rev)) then return { 'changed' } end
  local rec = cmsgpack.unpack(ARGV[6])
  store(rec)
  redis.call('HSET', schp, name, ARGV[7])
  redis.call('ZADD', sn, ZERO, name)
  return { 'ok', cur and 0 or 1, redis.call('HGET', sch, name) }

elseif op == 'pause' then
  -- ARGV: paused ('1' or '0') expect queue.
  -- Returns {'ok', record, payload}, {'none'} or {'expect', queue found}.
  local cur = read()
  if not cur then return { 'none' } end
  if not expected(cur, ARGV[6], ARGV[7]) then return found(cur) end
  local paused = ARGV[5] == '1'
  if (cur.P == 1) ~= paused then
    if paused then cur.P = 1 else cur.P = nil end
    store(cur)
  end
  return { 'ok', redis.call('HGET', sch, name), redis.call('HGET', schp, name) }

elseif op == 'delete' then
  -- ARGV: expect queue. Returns {'ok'}, {'none'} or {'expect', queue found}.
  local cur = read()
  if not cur then return { 'none' } end
  if not expected(cur, ARGV[5], ARGV[6]) then return found(cur) end
  redis.call('HDEL', sch, name)
  redis.call('HDEL', schp, name)
  redis.call('ZREM', sn, name)
  redis.call('ZREM', h, head)
  return { 'ok' }

elseif op == 'list' then
  -- `name` is the cursor ('' from the first). ARGV: count.
  -- Returns name and record of up to count schedules after the cursor.
  local from = '-'
  if name ~= '' then from = '(' .. name end
  local out = {}
  for _, n in ipairs(redis.call('ZRANGE', sn, from, '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[5]))) do
    table.insert(out, n)
    table.insert(out, redis.call('HGET', sch, n))
  end
  return out

elseif op == 'arm' then
  -- Sets the head from the record as stored (a head found out of step).
  local cur = read()
  if cur and cur.n and not cur.P then redis.call('ZADD', h, cur.n, head) else redis.call('ZREM', h, head) end
  return { 'ok' }

elseif op == 'defer' then
  -- ARGV: holder retry_at. A schedule its owner cannot fire now (its
  -- record unreadable by this node): its head moves to retry_at, so that
  -- the shard's queues and other schedules fire meanwhile.
  -- Returns {'ok'} or {'fenced'}.
  if redis.call('GET', owner) ~= ARGV[5] then return { 'fenced' } end
  redis.call('ZADD', h, 'XX', tonumber(ARGV[6]), head)
  return { 'ok' }

elseif op == 'fire' then
  -- ARGV: holder revision first next ('' none) skipped retry_at cap
  -- priority, then the occurrences to enqueue, oldest first (the misfire
  -- policy applied). Overlap and deadlines are applied here, on the task's
  -- state and Redis's clock.
  -- Returns {'ok', now, skipped, then each task's sequence number and
  -- occurrence}, {'fenced'}, {'changed'}, {'early', now} or
  -- {'too_many_tasks', now} (nothing changed but the head, moved to retry_at).
  local t, p, seqk = KEYS[7], KEYS[8], KEYS[9]
  local Q = queue_keys(10)
  local holder, rev, first = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  local next_ms, skipped = tonumber(ARGV[8]), tonumber(ARGV[9])
  local retry_at, cap, priority = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  if redis.call('GET', owner) ~= holder then return { 'fenced' } end
  local rec = read()
  if not rec or rec.v ~= rev or rec.n ~= first or rec.P then return { 'changed' } end
  local now = now_ms()
  local runs = {}
  for i = 13, #ARGV do
    local at = tonumber(ARGV[i])
    if at > now then return { 'early', now } end
    table.insert(runs, at)
  end
  if rec.o == 'forbid' and #runs > 0 then
    -- At most one of the schedule's tasks alive: the latest occurrence, if
    -- the previous one's task is done or dead.
    local previous = rec.li and load(t, rec.li)
    local keep = 1
    if previous and previous.s ~= 'd' then keep = 0 end
    skipped = skipped + #runs - keep
    if keep == 1 then runs = { runs[#runs] } else runs = {} end
  end
  if rec.x then
    -- Too late to start: skipped, not enqueued to die.
    local in_time = {}
    for _, at in ipairs(runs) do
      if at + rec.x > now then table.insert(in_time, at) end
    end
    skipped = skipped + #runs - #in_time
    runs = in_time
  end
  local keys, fresh = {}, 0
  for i, at in ipairs(runs) do
    keys[i] = 'schedule:' .. name .. ':' .. at
    if redis.call('HEXISTS', Q.k, keys[i]) == 0 then fresh = fresh + 1 end
  end
  if fresh > 0 and redis.call('HLEN', t) + fresh > cap then
    redis.call('ZADD', h, retry_at, head)
    return { 'too_many_tasks', now }
  end
  local payload = redis.call('HGET', schp, name)
  local out = { 'ok', now, skipped }
  local ready = false
  for i, at in ipairs(runs) do
    local existing = redis.call('HGET', Q.k, keys[i])
    if existing then
      -- Enqueued already (by a client with the same key): it stands for the occurrence.
      rec.lo, rec.li = at, tonumber(existing)
    else
      local seq = redis.call('INCR', seqk)
      local task = { q = rec.q, r = at, a = 0, m = rec.m, p = priority, c = now, s = 's', k = keys[i] }
      if rec.x then task.x = at + rec.x end
      redis.call('HSET', Q.k, keys[i], seq)
      save(t, seq, task)
      redis.call('HSET', p, field(seq), payload)
      if file(Q, h, rec.q, seq, task, now) then ready = true end
      rec.lo, rec.li = at, seq
      table.insert(out, seq)
      table.insert(out, at)
    end
  end
  rec.n = next_ms
  store(rec)
  if ready then hint_due(channel, shard, rec.q) end
  return out
end
return redis.error_reply('unknown op ' .. op)
