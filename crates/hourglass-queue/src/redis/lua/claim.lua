-- Hands out up to `max` due tasks of one queue of one shard, in claim order.
-- KEYS: t p h lseq paused, the queue's six keys. ARGV: channel shard queue max
-- lease_ms payload_bytes_max scan_max.
-- Returns {now, pause, then seq payload attempt token lease_end due per task},
-- where pause is -1 (not paused), 0 (until resumed) or when it ends.
local t, p, h, lseq, paused = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local Q = queue_keys(6)
local channel, shard, q = ARGV[1], ARGV[2], ARGV[3]
local max, lease_ms, bytes_max, scan_max = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local pause = redis.call('HGET', paused, q)
if pause and (pause == '0' or tonumber(pause) > now) then return { now, tonumber(pause) } end
local out = { now, -1 }
local before = head_min(h)
local taken, bytes, scanned = 0, 0, 0
while taken < max and scanned < scan_max do
  scanned = scanned + 1
  local first = redis.call('ZRANGE', Q.r, 0, 0)[1]
  if not first then break end
  local seq = member_seq(first)
  local rec = load(t, seq)
  if rec.x and rec.x <= now then
    -- Not delivered by its expiry: dead, never late.
    unfile(Q, h, q, seq, rec)
    rec.s = 'd'
    rec.X = 1
    save(t, seq, rec)
    file(Q, h, q, seq, rec, now)
  else
    local payload = redis.call('HGET', p, field(seq))
    bytes = bytes + #payload
    if taken > 0 and bytes > bytes_max then break end
    unfile(Q, h, q, seq, rec)
    lease(Q, h, t, lseq, q, seq, rec, now, lease_ms)
    taken = taken + 1
    for _, v in ipairs({ seq, payload, rec.a, rec.L, rec.u, rec.r }) do table.insert(out, v) end
  end
end
hint_head(channel, shard, h, before)
return out
