-- Hands out up to `max` due tasks of one queue of one shard, in claim order
-- (the prelude's hand_out).
-- KEYS: t p h lseq paused, the queue's keys. ARGV: channel shard queue max
-- lease_ms payload_bytes_max scan_max delivery ('pull' takes from r, 'push'
-- from R, each task then for exactly lease_ms whatever its own lease) secret
-- (new_lease's).
-- Returns {now, pause, stop, then seq payload attempt token lease_end due
-- target per task (as hand_out)}, where pause is -1 (not paused), 0 (until
-- resumed) or when it ends (and nothing follows it), and stop why it handed
-- out fewer than `max`: STOP_DRAINED (nothing more is due), STOP_BYTES (the
-- next task's payload would pass payload_bytes_max) or STOP_SCANNED (it
-- looked at scan_max tasks, dead ones among them, and more may be due).
-- A claim that leaves the due set empty says so on the channel ('e SHARD
-- US QUEUE' for pull claims, 'E' for push): no other node's claim needs to
-- ask the shard until a hint says it has due tasks again (US, Redis's time
-- in µs, tells a node which hints came after it, whatever order they
-- arrive in: its own, given ahead of the channel, or another primary's).
local t, p, h, lseq, paused = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local Q = queue_keys(6)
local channel, shard, q = ARGV[1], ARGV[2], ARGV[3]
local max, lease_ms, bytes_max, scan_max = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local push = ARGV[8] == 'push'
local secret = ARGV[9]
local R = push and Q.R or Q.r
local now = now_ms()
-- Nothing due: most claim scripts that find nothing ask a shard another
-- claim drained first, and they are answered with no more than this.
if redis.call('EXISTS', R) == 0 then return { now, -1, STOP_DRAINED } end
local pause = pause_of(paused, q, now)
if pause then return { now, tonumber(pause) } end
local out = { now, -1, STOP_DRAINED }
local budget = { bytes = bytes_max, got = 0 }
local taken, stop = hand_out(Q, t, p, h, lseq, q, push, max, lease_ms, budget, scan_max, secret, now, out)
out[3] = stop
-- Drained short of max, hand_out looked at every member and removed each;
-- with max handed out, the set may hold more.
if taken > 0 and stop == STOP_DRAINED and (taken < max or redis.call('EXISTS', R) == 0) then
  redis.call('PUBLISH', channel, (push and 'E ' or 'e ') .. shard .. ' ' .. now_us() .. ' ' .. q)
end
hint_lowered(channel, shard)
return out
