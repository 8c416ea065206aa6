-- Hands out up to `max` due tasks of one queue of one shard, in claim order.
-- KEYS: t p h lseq paused, the queue's keys. ARGV: channel shard queue max
-- lease_ms payload_bytes_max scan_max delivery ('pull' takes from r, 'push'
-- from R, each task then for exactly lease_ms whatever its own lease) secret
-- (new_lease's).
-- Each task's own target follows its due time (packed; '' if none).
-- Returns {now, pause, stop, then seq payload attempt token lease_end due per
-- task}, where pause is -1 (not paused), 0 (until resumed) or when it ends
-- (and nothing follows it), and stop why it handed out fewer than `max`:
-- STOP_DRAINED (nothing more is due), STOP_BYTES (the next task's payload
-- would pass payload_bytes_max) or STOP_SCANNED (it looked at scan_max tasks,
-- dead ones among them, and more may be due).
local t, p, h, lseq, paused = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local Q = queue_keys(6)
local channel, shard, q = ARGV[1], ARGV[2], ARGV[3]
local max, lease_ms, bytes_max, scan_max = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local push = ARGV[8] == 'push'
local secret = ARGV[9]
local R = push and Q.R or Q.r
local now = now_ms()
local pause = redis.call('HGET', paused, q)
if pause and (pause == '0' or tonumber(pause) > now) then return { now, tonumber(pause) } end
local out = { now, -1, STOP_DRAINED }
local before = head_min(h)
local taken, bytes, looked = 0, 0, 0
local gone_r, gone_o, leased = {}, {}, {}
local first_end = nil
local full = false
while taken < max and looked < scan_max and not full do
  local members = redis.call('ZRANGE', R, looked, looked + (max - taken) - 1)
  if #members == 0 then break end
  for _, m in ipairs(members) do
    local seq = member_seq(m)
    local rec = load(t, seq)
    if rec.x and rec.x <= now then
      -- Not delivered by its expiry: dead, never late.
      rec.s = 'd'
      rec.X = 1
      save(t, seq, rec)
      redis.call('ZADD', Q.d, 0, field(seq))
    else
      local payload = redis.call('HGET', p, field(seq))
      bytes = bytes + #payload
      if taken > 0 and bytes > bytes_max then
        full = true
        break
      end
      rec.a = rec.a + 1
      rec.s = 'l'
      rec.L = new_lease(lseq, secret)
      rec.u = now + ((not push and rec.l) or lease_ms)
      save(t, seq, rec)
      table.insert(leased, 0)
      table.insert(leased, at_member(rec.u, seq))
      if not first_end or rec.u < first_end then first_end = rec.u end
      taken = taken + 1
      local target = rec.h and cmsgpack.pack(rec.h) or ''
      for _, v in ipairs({ seq, payload, rec.a, rec.L, rec.u, rec.r, target }) do table.insert(out, v) end
    end
    looked = looked + 1
    table.insert(gone_r, m)
    table.insert(gone_o, ready_at(m))
  end
end
if full then
  out[3] = STOP_BYTES
elseif taken < max and looked >= scan_max then
  out[3] = STOP_SCANNED
end
if #gone_r > 0 then
  redis.call('ZREM', R, unpack(gone_r))
  redis.call('ZREM', Q.o, unpack(gone_o))
end
if #leased > 0 then
  redis.call('ZADD', Q.l, unpack(leased))
  head_by(h, 'l:' .. q, first_end)
end
hint_head(channel, shard, h, before)
return out
