-- One task's change: OP is cancel, cancel_unleased, reschedule, retry, take,
-- ack, nack, extend or return.
-- KEYS: t p h lseq, the queue's six keys. ARGV: channel shard op seq queue,
-- then the op's own arguments.
-- Returns {code, now, record, payload} where code is 'ok', 'not_found',
-- 'stale', 'conflict' or 'queue' (the task is of another queue, named as the
-- record's q: ask again with its keys).
local t, p, h, lseq = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local Q = queue_keys(5)
local channel, shard, op, seq, q = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local now, now_past = time_now()
local rec = load(t, seq)
if not rec then return { 'not_found', now } end
if rec.q ~= q then return { 'queue', now, rec.q } end
-- The task as it now is, with its payload (none once it is gone).
local function done(code)
  local ready = false
  local payload = ''
  if code == 'ok' and op ~= 'cancel' and op ~= 'cancel_unleased' and not (op == 'ack' and not rec.e) then
    save(t, seq, rec)
    ready = file(Q, h, q, seq, rec, now)
    payload = redis.call('HGET', p, field(seq))
  end
  if ready then hint_due(channel, shard, q) end
  hint_lowered(channel, shard)
  return { code, now, cmsgpack.pack(rec), payload }
end
local function holds(token) return rec.s == 'l' and rec.L == token end

if op == 'cancel' or op == 'cancel_unleased' then
  if op == 'cancel_unleased' and rec.s == 'l' then return { 'conflict', now } end
  -- A leased task may wait on a node for its claim (handed over ahead, or
  -- lingering): every node drops it if it hears this first (`revoked.rs`).
  if rec.s == 'l' then redis.call('PUBLISH', channel, 'x ' .. shard .. ' ' .. string.format('%d', seq)) end
  unfile(Q, q, seq, rec, now)
  forget(Q, t, p, seq, rec)
  return done('ok')
elseif op == 'reschedule' then
  if rec.s == 'l' then return { 'conflict', now } end
  unfile(Q, q, seq, rec, now)
  if rec.s == 'd' then rec.a = 0 end
  rec.s = 's'
  rec.r = tonumber(ARGV[7])
  if ARGV[6] == 'd' then rec.r = after(now, now_past, rec.r) end
  return done('ok')
elseif op == 'retry' then
  if rec.s ~= 'd' then return { 'conflict', now } end
  unfile(Q, q, seq, rec, now)
  rec.x, rec.X, rec.a, rec.s, rec.r = nil, nil, 0, 's', now
  return done('ok')
elseif op == 'take' then
  if rec.s == 'l' then return { 'conflict', now } end
  unfile(Q, q, seq, rec, now)
  lease(Q, h, t, lseq, q, seq, rec, now, tonumber(ARGV[6]), ARGV[7])
  hint_lowered(channel, shard)
  return { 'ok', now, cmsgpack.pack(rec), redis.call('HGET', p, field(seq)) }
elseif op == 'ack' then
  if not holds(ARGV[6]) then return { 'stale', now } end
  unfile(Q, q, seq, rec, now)
  if rec.e then
    rec.a, rec.s, rec.L, rec.u = 0, 's', nil, nil
    rec.r = next_run(rec.r, rec.e, now)
  else
    forget(Q, t, p, seq, rec)
  end
  return done('ok')
elseif op == 'nack' then
  -- ARGV: token delay ('' for a backoff) reason ('' for none) priority ('' to keep) dead (0/1)
  if not holds(ARGV[6]) then return { 'stale', now } end
  unfile(Q, q, seq, rec, now)
  if ARGV[10] == '1' then
    rec.s, rec.L, rec.u = 'd', nil, nil
  else
    local delay = nil
    if ARGV[7] ~= '' then delay = tonumber(ARGV[7]) end
    fail(rec, now, delay, now_past)
  end
  if ARGV[8] ~= '' then rec.E = ARGV[8] else rec.E = nil end
  if ARGV[9] ~= '' then rec.p = tonumber(ARGV[9]) end
  return done('ok')
elseif op == 'extend' then
  if not holds(ARGV[6]) then return { 'stale', now } end
  unfile(Q, q, seq, rec, now)
  rec.u = now + tonumber(ARGV[7])
  return done('ok')
elseif op == 'return' then
  -- Handed over by a fire to a claim that ended before it took the task:
  -- due again at once, in its place, and the attempt is not counted, as it
  -- was never delivered. ARGV: token.
  if not holds(ARGV[6]) then return { 'stale', now } end
  unfile(Q, q, seq, rec, now)
  rec.a, rec.s, rec.L, rec.u = rec.a - 1, 's', nil, nil
  return done('ok')
end
return redis.error_reply('unknown op ' .. op)
