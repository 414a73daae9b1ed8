#!lua flags=allow-oom
-- Workers whose process heartbeat lapsed (core/lapse.py), run by every recoverer every half second.
-- KEYS: alive gone taking workers seen
-- ARGV[1] op: 'scan' or 'done'  ARGV[2] worker hash prefix (jc:{workers}:w:, this slot)
-- scan: ARGV[3] limit  ARGV[4] how long a gone record is kept (ms)  ARGV[5] how many are kept
--       ARGV[6] silence ms  ARGV[7] spare ms  ARGV[8] stale ms
--   Each worker whose deadline passed is declared gone in one step: off `alive`, into `gone` (so its own
--   heartbeat and registry renewal are refused from now on: worker_beat.lua, register_worker.lua) and into
--   `taking` (its jobs are to be taken back, takeback.lua per queue, then 'done'); its registry hash becomes
--   a gone record (state, when and why) kept ARGV[4] ms, the last ARGV[5] at most. A worker left in `taking`
--   for ARGV[8] ms (its recoverer died between the steps) is handed out again: taking back is idempotent.
--   After a silence (no scan for ARGV[6] ms: Redis was frozen or unreachable, or no recoverer ran) no worker
--   could beat either, so every deadline that passed meanwhile, or is about to, gets ARGV[7] ms from now.
--   Returns, per worker to take back: id, queues (comma-separated, '' unknown), last heartbeat ms, now ms.
-- done: ARGV[3] worker id  ARGV[4] jobs taken back. Returns 1.
local prefix = ARGV[2]
if ARGV[1] == 'done' then
  redis.call('ZREM', KEYS[3], ARGV[3])
  if redis.call('EXISTS', prefix .. ARGV[3]) == 1 then
    redis.call('HINCRBY', prefix .. ARGV[3], 'jobs_taken_back', tonumber(ARGV[4]))
  end
  return 1
end
local limit, keep_ms, keep, silence, spare, stale =
  tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()
local seen = tonumber(redis.call('GET', KEYS[5]) or '')
-- Written at most every 250 ms, whatever the number of recoverers scanning: a silence is measured in seconds.
if not seen or now - seen >= 250 then redis.call('SET', KEYS[5], now) end
if seen and now - seen > silence then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], '-inf', now + spare, 'BYSCORE')) do
    redis.call('ZADD', KEYS[1], 'GT', now + spare, id)
  end
  return {}
end
local out = {}
local lapsed = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
for i = 1, #lapsed, 2 do
  local id, deadline = lapsed[i], tonumber(lapsed[i + 1])
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], now, id)
  redis.call('ZADD', KEYS[3], now, id)
  local beat = tonumber(redis.call('ZSCORE', KEYS[4], id)) or 0
  local reason = 'no heartbeat for ' .. (beat > 0 and seconds_words(now - beat) or 'its expiry')
    .. ' (deadline passed ' .. seconds_words(now - deadline) .. ' ago)'
  local key = prefix .. id
  local queues = ''
  if redis.call('EXISTS', key) == 1 then
    queues = redis.call('HGET', key, 'queues') or ''
    redis.call('HSET', key, 'state', 'gone', 'gone_at', now, 'gone_reason', reason, 'jobs_taken_back', 0)
    redis.call('PEXPIRE', key, keep_ms)
  end
  out[#out + 1] = id
  out[#out + 1] = queues
  out[#out + 1] = tostring(beat)
  out[#out + 1] = tostring(now)
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], '-inf', now - stale, 'BYSCORE', 'LIMIT', 0, limit)) do
  redis.call('ZADD', KEYS[3], now, id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', prefix .. id, 'queues') or ''
  out[#out + 1] = tostring(tonumber(redis.call('ZSCORE', KEYS[4], id)) or 0)
  out[#out + 1] = tostring(now)
end
-- Gone records: an hour (ARGV[4]) and a bounded number (ARGV[5]), oldest first out.
local old = redis.call('ZRANGE', KEYS[2], '-inf', now - keep_ms, 'BYSCORE', 'LIMIT', 0, 1000)
local excess = redis.call('ZCARD', KEYS[2]) - #old - keep
if excess > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], #old, #old + excess - 1)) do old[#old + 1] = id end
end
for _, id in ipairs(old) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('DEL', prefix .. id)
end
return out
