#!lua flags=allow-oom
-- Extend the leases of running jobs; only the owner (current token) may extend.
-- KEYS: active events drain
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] number of jobs
-- then per job: id, token, progress ('' = unchanged), checkpoint JSON ('' = unchanged)
-- Returns per job -1 = stale token (lease lost), 0 = extended, 1 = extended and cancellation requested.
local prefix, maxlen, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
drain_intake_at(3, prefix, maxlen)  -- a handed job's hash
local now = now_ms()
local out = {}
for j = 0, n - 1 do
  local job_id, token, progress, checkpoint = ARGV[4 + 4 * j], ARGV[5 + 4 * j], ARGV[6 + 4 * j], ARGV[7 + 4 * j]
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'token', 'state', 'lease_ms', 'cancel_requested')
  if f[1] ~= token or f[2] ~= RUNNING then
    out[#out + 1] = -1
  else
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(f[3] or 30000), job_id)
    redis.call('HSET', job_key, 'heartbeat_at', now)
    if progress ~= '' or checkpoint ~= '' then
      if progress ~= '' then redis.call('HSET', job_key, 'progress', progress) end
      if checkpoint ~= '' then redis.call('HSET', job_key, 'checkpoint', checkpoint) end
      emit(KEYS[2], maxlen, job_id, 'progress', RUNNING)
    end
    out[#out + 1] = (f[4] == '1') and 1 or 0
  end
end
return out
